"""Tensors made on the host are checked before their memory is taken (docs/security.md "Bounded resources").

ops.fill, initializer, Parameter(initializer(...)), nn.Dense of 100 GB fail with a ResourceLimitError
naming the shape, its bytes and the limit, never numpy's MemoryError; so do smaller ones over a
max_device_memory set low, and ones over the process's own limit (RLIMIT_AS, in a subprocess); an
allocation numpy still cannot make is said as ours. Initializers allocate their result once, in its
dtype: their float64 draws are a bounded chunk, and the values are those of one draw of the whole
shape. A negative dimension is a ShapeError (or the layer's error) naming the argument.
"""
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Parameter, Tensor, context, nn, ops
from graphkernel.common.initializer import CHUNK, Constant, TruncatedNormal, initializer
from graphkernel.nn.layers import LayerError
from graphkernel.ops.static import StaticValueError
from graphkernel.tensor import ParameterTuple
from ir import GraphBuilder
from ir.errors import ShapeError
from ir.limits import ResourceLimitError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HUGE = (160000, 160000)   # float32: 102,400,000,000 bytes, more than any machine this runs on


@pytest.mark.parametrize("make", [
    lambda: ops.fill(ms.float32, HUGE, 1.0),
    lambda: initializer("normal", HUGE),
    lambda: initializer("zeros", list(HUGE), ms.float32),
    lambda: Parameter(initializer("truncatedNormal", HUGE)),
    lambda: nn.Dense(160000, 160000),
    lambda: Tensor(np.ones((1,), np.float64)).__class__(np.broadcast_to(np.float64(1), HUGE), ms.float32),
], ids=["fill", "initializer", "zeros", "Parameter", "Dense", "Tensor-cast"])
def test_a_100_gb_tensor_is_refused_naming_shape_bytes_and_limit(make):
    with pytest.raises(ResourceLimitError) as info:
        make()
    message = str(info.value)
    assert "f32[160000,160000]" in message and "102400000000 bytes" in message
    assert "more than the limit of" in message and "max_device_memory" in message


@pytest.mark.parametrize("make,what", [
    (lambda: ops.fill(ms.float32, (8192, 8192), 0.5), "fill"),
    (lambda: nn.Dense(8192, 8192), "initializer HeUniform"),
    (lambda: initializer("ones", (8192, 8192)), "initializer One"),
    (lambda: ParameterTuple([Parameter(np.zeros((4096,), np.float32), name="w")]).clone("m"), None),
])
def test_max_device_memory_applies_when_a_tensor_is_made(make, what):
    context.set_context(max_device_memory="64MB")
    if what is None:   # a small one is made as before
        assert make()[0].shape == (4096,)
        return
    with pytest.raises(ResourceLimitError, match=f"{what}: f32\\[8192,8192\\] \\(67108864 elements\\) needs "
                                                 r"268435456 bytes \(256\.0 MiB\), more than the limit of "
                                                 r"67108864 bytes \(64\.0 MiB\)"):
        make()


def test_a_parameter_over_the_limit_names_itself():
    data = np.zeros((1024, 1024), np.float32)   # made by the caller; the Parameter's copy is ours
    context.set_context(max_device_memory="1MB")
    with pytest.raises(ResourceLimitError, match=r"Parameter big: f32\[1024,1024\]"):
        Parameter(data, name="big")


PROCESS_LIMIT = textwrap.dedent("""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, resource.RLIM_INFINITY))
    import numpy as np
    import graphkernel as ms
    from graphkernel import context, ops
    from graphkernel.common.initializer import initializer
    from ir.limits import ResourceLimitError
    context.set_context(max_device_memory="1TB")   # above the process's limit: that one decides
    for name, make in (("over", lambda: initializer("normal", (65536, 65536))),       # 16 GiB
                       ("near", lambda: ops.fill(ms.float32, (63 << 10, 32 << 10), 1.0))):  # 7.9 GiB
        try:
            make()
            print(name, "made")
        except ResourceLimitError as e:
            print(name, e)
""")


def test_the_process_limit_is_checked_and_an_allocation_numpy_cannot_make_is_ours():
    run = subprocess.run([sys.executable, "-c", PROCESS_LIMIT], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ROOT}, timeout=300)
    assert run.returncode == 0, run.stderr
    over, near = run.stdout.strip().splitlines()[-2:]
    assert over.startswith("over initializer Normal: f32[65536,65536]") and \
        f"more than this process may allocate: {8 << 30} bytes" in over and "ulimit -v" in over
    # under the limit, but the process has mapped a part of it already (numba, numpy): numpy fails, we say so
    assert near.startswith("near fill: f32[64512,32768]") and "which this process could not allocate now" in near


@pytest.mark.parametrize("init", ["normal", "truncatedNormal", "uniform", "xavier_uniform", "he_uniform"])
def test_an_initializer_allocates_its_result_and_a_bounded_chunk_only(init):
    shape = (4, 3 * CHUNK // 4)    # 12 MiB of float32: 24 MiB of float64 if drawn at once
    tracemalloc.start()
    try:
        ms.set_seed(0)
        result = initializer(init, shape, ms.float32).asnumpy()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.dtype == np.float32 and result.shape == shape
    # the result, one float64 chunk, the mask of redraws (a byte an element) and small change; drawing the
    # whole shape in float64 would add 24 MiB
    assert peak < result.nbytes + 8 * CHUNK + result.size + (2 << 20)


def _whole_draw(init, shape, dtype, seed):
    """What drawing the whole shape at once in float64 and casting gives (the values before chunking)."""
    rng = np.random.default_rng(seed)
    if isinstance(init, TruncatedNormal):
        out = rng.standard_normal(shape)
        bad = (out < init.a) | (out > init.b)
        while bad.any():
            out[bad] = rng.standard_normal(int(bad.sum()))
            bad = (out < init.a) | (out > init.b)
        return (init.mean + init.sigma * out).astype(dtype)
    return rng.normal(0.0, 0.01, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("init", [TruncatedNormal(0.5, 0.1, -0.3, 0.3), "normal"], ids=["truncated", "normal"])
def test_chunked_draws_are_one_draw_of_the_whole_shape(init, dtype):
    shape = (3, CHUNK // 2 + 7)     # over a chunk boundary
    ms.set_seed(5)
    got = initializer(init, shape, dtype).asnumpy()
    want = _whole_draw(init if not isinstance(init, str) else None, shape, dtype, 5)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_a_constant_fills_in_the_result_dtype():
    assert initializer(Constant(0.1), (3,), ms.float16).asnumpy().tobytes() == \
        np.full(3, 0.1).astype(np.float16).tobytes()


@pytest.mark.parametrize("make,match", [
    (lambda: initializer("normal", [-2, 3]), r"initializer: shape \[-2, 3\] has a negative dimension \(-2\)"),
    (lambda: initializer("ones", (2, -1)), r"initializer: shape \[2, -1\] has a negative dimension"),
    (lambda: initializer("ones", (2.5, 1)), r"initializer: shape must be a tuple of ints"),
    (lambda: nn.LayerNorm((-5,)), r"LayerNorm: normalized_shape\[0\] must be a positive int, got -5"),
    (lambda: nn.LayerNorm((4, 0)), r"LayerNorm: normalized_shape\[1\] must be a positive int, got 0"),
    (lambda: ops.fill(ms.float32, (-1, 2), 0.0), r"fill: shape must be a tuple of non-negative ints"),
    (lambda: GraphBuilder().input((-2, 3)), r"GraphBuilder.input: shape \[-2, 3\] has a negative dimension"),
    (lambda: Tensor(np.ones((2, 3), np.float32)).reshape(-2, 3), r"Reshape .*target shape \(-2, 3\) has a negative dim"),
    (lambda: Tensor(np.ones((2, 3), np.float32)).tile((-1, 1)), r"Tile .*multiples \(-1, 1\) has a negative entry"),
], ids=["initializer", "initializer-ones", "initializer-float", "LayerNorm", "LayerNorm-zero", "fill",
        "GraphBuilder", "reshape", "tile"])
def test_a_negative_dimension_is_our_error_naming_the_argument(make, match):
    context.set_context(mode=context.PYNATIVE_MODE)
    with pytest.raises((ShapeError, LayerError, StaticValueError), match=match):
        make()
