"""--enable_low_precision (MindSpore 1.x-2.2's meaning: fused kernels compute in float16): off by default;
when on, the float16 casts inside each composite show in the kernel table, the results are within float16's
tolerance of the reference and differ from the float32 path; the one switch with which fusion changes a
result (docs/precision.md)."""
import warnings

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, ops
from graphkernel.settings.flags import parse_flags
from graphkernel.nn import Cell
from tolerance import ATOL, RTOL, assert_close

RNG = np.random.default_rng(0)
X = Tensor(RNG.standard_normal((64, 128)).astype(np.float32))
Y = Tensor(RNG.standard_normal((64, 128)).astype(np.float32))


class Net(Cell):
    def construct(self, x, y):
        return ops.Softmax()(ops.Tanh()(x * y + 1.0) * 3.0), x * y - 0.3


def run(flags="", fuse=True, target="Ascend"):
    ms.set_context(mode=ms.GRAPH_MODE, device_target=target, enable_graph_kernel=fuse, graph_kernel_flags=flags)
    net = Net()
    return net.compile(X, Y), [o.asnumpy() for o in net(X, Y)]


def within_float16(got, want):
    np.testing.assert_allclose(got, want, rtol=RTOL[np.dtype(np.float16)] * 4,
                               atol=ATOL[np.dtype(np.float16)] * 4)


def test_off_by_default_fusion_changes_nothing():
    compiled, fused = run()
    assert not compiled.options.flags.enable_low_precision
    assert all("Cast" not in k.op_types for k in compiled.kernels)
    _, unfused = run(fuse=False)
    assert_close(fused[1], unfused[1], bitwise=True)      # a float32 elementwise chain: bit for bit
    _, reference = run(target="CPU")
    for got, want in zip(fused, reference):
        assert_close(got, want)


def test_on_the_composites_compute_in_float16():
    compiled, low = run("--enable_low_precision")
    _, reference = run(target="CPU")
    kernels = [k.op_types for k in compiled.kernels]
    assert kernels and all(ops_[0] == "Cast" and ops_[-1] == "Cast" for ops_ in kernels), kernels
    for got, want in zip(low, reference):
        assert got.dtype == np.float32                     # the interface keeps its dtypes
        within_float16(got, want)
        assert not np.array_equal(got, want)               # float16 arithmetic: not the float32 results
    assert any("[low_precision] fuse" in str(r) and "computes in float16" in str(r) for r in compiled.log)


@pytest.mark.parametrize("text, on", [("--enable_low_precision", True), ("--enable_low_precision=ON", True),
                                      ("--enable_low_precision=1", True), ("--enable_low_precision=false", False),
                                      ("--enable_low_precision=Off", False)])
def test_booleans_parse_as_mindspore_s_without_a_warning(text, on):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_flags(text, read_env=False).enable_low_precision is on


def test_without_fusion_it_changes_nothing():
    compiled, results = run("--enable_low_precision", fuse=False)
    assert all("Cast" not in k.op_types for k in compiled.kernels)
    _, reference = run(target="CPU")
    assert_close(results[1], reference[1])


def test_a_constant_float16_cannot_hold_keeps_its_composite_float32():
    class Big(Cell):
        def construct(self, x):
            return x * 1.0e6 + 1.0

    ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True,
                   graph_kernel_flags="--enable_low_precision")
    compiled = Big().compile(X)
    assert all("Cast" not in k.op_types for k in compiled.kernels)
    assert any("stays float32" in str(r) and "overflows float16" in str(r) for r in compiled.log)
    assert_close(Big()(X).asnumpy(), X.asnumpy() * np.float32(1e6) + np.float32(1))
