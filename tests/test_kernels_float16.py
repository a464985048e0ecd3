"""float16 kernels: uint16 bits in memory, exact conversions, every primitive's result rounded to
float16, reductions accumulated in float32 and rounded once, ReduceSum with block_dim 1.

The generated source is checked in pure Python (numpy's float16 conversions standing in for
kernels.mathfn's), and the compiled kernels over every float16 value: + - * / and the exact ops bit for
bit with numpy's float16, the transcendental ops within one float16 step of the reference.
"""
import sys

import numpy as np
import pytest

from kernels import DeviceConfig, lower
from kernels.codegen import render
from kernels.compile import kernel_globals
from kernels.layout import describe
from kernels.reduction import split_partials
from kernels.launch import choose_launch
from ir import GraphBuilder
from tests.kernel_graphs import fused, random_array, reference
from tests.test_kernels_aicore import PURE_PYTHON_MATH
from tests.tolerance import assert_close

NUMPY_F16 = {"f16_bits_to_f32": lambda h: np.float32(np.uint16(h).view(np.float16)),
             "f32_to_f16_bits": lambda x: np.float16(np.float32(x)).view(np.uint16)}


def run_in_python(graph, arrays, block_dim=3):
    spec, sizes = describe(graph)
    variant, _, tile, lanes = choose_launch(spec, sizes, 32)
    name, source = render(spec, variant)
    namespace = {**kernel_globals(), **PURE_PYTHON_MATH, **NUMPY_F16}
    exec("\n".join(line for line in source.splitlines() if not line.startswith("from kernels.")),
         namespace)
    outs = [np.empty(v.type.size, v.dtype.np) for v in graph.outputs]

    def bits(a):
        a = a.reshape(-1)
        return a.view(np.uint16) if a.dtype == np.float16 else a
    parts = [np.empty(n, d.np) for d, n in split_partials(spec, sizes, tile)] if variant == "split" else []
    namespace[name](*map(bits, arrays), *map(bits, outs), *parts, *sizes, block_dim, tile, lanes, 0, block_dim,
                    *((1,) if parts else ()))
    return [o.reshape(v.shape) for o, v in zip(outs, graph.outputs)]


def mixed_graph():
    b = GraphBuilder(dtype="float16")
    x, y = b.input((3, 10)), b.input((10,))
    h = b.op("Add", b.op("Mul", x, y), b.const(1.5))
    return b.graph(b.op("RealDiv", h, b.op("Abs", y)), b.op("ReduceSum", h, axis=(1,)),
                   b.op("Cast", h, dtype="float32"), b.op("ReduceMax", h, axis=(1,), keep_dims=True))


def test_generated_source_matches_numpy_float16_op_by_op():
    g = mixed_graph()
    arrays = [random_array((3, 10), "float16"), random_array((10,), "float16", seed=1)]
    outs = run_in_python(g, arrays)
    want = reference(g, arrays)
    for k in (0, 2, 3):  # elementwise results and a max: bit for bit
        assert_close(outs[k], want[k], bitwise=True)
    assert_close(outs[1], want[1])  # a sum: float32 accumulation, one rounding


def test_float16_reduce_sum_runs_in_one_block():
    def block_dim(op):
        b = GraphBuilder(dtype="float16")
        x = b.input((4096, 64))
        return choose_launch(*describe(b.graph(b.op(op, x, axis=(1,)))), 32)[1]
    assert block_dim("ReduceSum") == 1 and block_dim("ReduceMax") > 1


def test_compiled_float16_kernels():
    g = mixed_graph()
    arrays = [random_array((3, 10), "float16"), random_array((10,), "float16", seed=1)]
    program = lower(g, DeviceConfig())
    assert all(k.variant != "reference" for k in program.kernels)
    for got, want in zip(program.run(arrays), reference(g, arrays)):
        assert_close(got, want)


def test_float16_without_conversions_runs_on_the_reference(monkeypatch):
    lower_module = sys.modules["kernels.lower"]  # `kernels.lower` the attribute is the function
    monkeypatch.setattr(lower_module, "float16_supported", lambda: False)
    g = mixed_graph()
    arrays = [random_array((3, 10), "float16"), random_array((10,), "float16", seed=1)]
    program = lower(g, DeviceConfig())
    assert {k.variant for k in program.kernels} == {"reference"}
    for got, want in zip(program.run(arrays), reference(g, arrays)):
        assert_close(got, want, bitwise=True)


def all_float16() -> np.ndarray:
    """Every float16 value, NaNs and infinities included (65536 of them)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def steps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many float16 steps separate a and b (0 for equal values, both NaN, or +0 and -0)."""
    def ordered(x):
        bits = x.view(np.uint16).astype(np.int32)
        return np.where(bits >= 0x8000, 0x8000 - bits, bits)
    both_nan = np.isnan(a) & np.isnan(b)
    return np.where(both_nan, 0, np.abs(ordered(a) - ordered(b)))


BINARY_EXACT = ("Add", "Sub", "Mul", "RealDiv", "Maximum", "Minimum")
UNARY = {"Neg": 0, "Abs": 0, "Sqrt": 0, "Exp": 1, "Log": 1, "Tanh": 1, "Erf": 1}   # op: float16 steps allowed


@pytest.fixture(scope="module")
def every_float16_through_one_kernel():
    """One composite kernel computing each op of BINARY_EXACT and UNARY over every float16 value (paired
    with a shuffled copy for the binary ops), and the reference's results."""
    b = GraphBuilder(dtype="float16")
    x, y = b.input((1 << 16,)), b.input((1 << 16,))
    outs = [b.op(op, x, y) for op in BINARY_EXACT] + [b.op(op, x) for op in UNARY]
    graph = fused(b.graph(*outs))
    values = all_float16()
    arrays = [values, np.random.default_rng(0).permutation(values)]
    program = lower(graph, DeviceConfig())
    assert [k.variant for k in program.kernels] == ["elementwise"]
    return program.run(arrays), reference(graph, arrays)


@pytest.mark.parametrize("op", BINARY_EXACT)
def test_compiled_float16_arithmetic_is_bitwise_numpys(every_float16_through_one_kernel, op):
    got, want = every_float16_through_one_kernel
    k = BINARY_EXACT.index(op)
    assert_close(got[k], want[k], bitwise=True, err_msg=op)


@pytest.mark.parametrize("op", UNARY)
def test_compiled_float16_functions_within_their_step_bound(every_float16_through_one_kernel, op):
    got, want = every_float16_through_one_kernel
    k = len(BINARY_EXACT) + list(UNARY).index(op)
    steps = steps_apart(got[k], want[k])
    assert steps.max() <= UNARY[op], f"{op}: {steps.max()} float16 steps at {all_float16()[steps.argmax()]}"
