"""Every elementwise and broadcasting primitive through the generated kernels, against numpy.

The ops come from the op table (tests/op_samples.py): a new op row is tested here by existing."""
import re

import numpy as np
import pytest

from kernels import DeviceConfig, lower
from ir.ops import OPS, Cost
from ir import GraphBuilder
from tests.kernel_graphs import fused, random_array, reference
from tests.op_samples import dtypes, kernel_ops, sample
from tests.tolerance import assert_close

CFG = DeviceConfig()
pytestmark = pytest.mark.filterwarnings("error::kernels.KernelBuildWarning")

SHAPES = [((4, 4), (4, 4)), ((3, 1), (1, 5)), ((2, 3, 4), (4,)), ((), (2, 3)), ((5, 1, 3), (5, 2, 1))]


def run(graph, arrays, cfg=CFG):
    return lower(graph, cfg).run(arrays)


def check(graph, arrays, **kw):
    outs = run(graph, arrays)
    for got, want in zip(outs, reference(graph, arrays)):
        assert_close(got, want, **kw)
    return outs


def operands(op, shapes, dtype="float32"):
    if dtype.startswith("int"):
        return [random_array(s, dtype, seed=i) for i, s in enumerate(shapes)]
    return [sample(op, s, dtype, seed=i) for i, s in enumerate(shapes)]


def exact(op: str) -> bool:
    """Ops computed by one correctly rounded operation (or none): the kernels give numpy's bits."""
    return OPS[op].cost < Cost.TRANSCENDENTAL


@pytest.mark.grid
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", kernel_ops(2))
def test_binary(op, shapes):
    for dtype in dtypes(op):
        b = GraphBuilder(dtype=dtype)
        x, y = b.input(shapes[0]), b.input(shapes[1])
        g = b.graph(b.op(op, x, y))
        arrays = operands(op, shapes, dtype)
        check(g, arrays, bitwise=exact(op), rtol_scale=1 if exact(op) else 3)
        assert_close(run(fused(g), arrays)[0], run(g, arrays)[0], bitwise=True)


@pytest.mark.grid
@pytest.mark.parametrize("op", kernel_ops(1))
@pytest.mark.parametrize("shape", [(4, 4), (7,), ()], ids=str)
def test_unary(op, shape):
    for dtype in dtypes(op):
        b = GraphBuilder(dtype=dtype)
        x = b.input(shape)
        g = b.graph(b.op(op, x))
        arrays = operands(op, [shape], dtype)
        check(g, arrays, bitwise=exact(op), rtol_scale=1 if exact(op) else 3)
        assert_close(run(fused(g), arrays)[0], run(g, arrays)[0], bitwise=True)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Maximum", "Minimum", "Greater", "Equal"])
def test_binary_integers(op, dtype):
    b = GraphBuilder(dtype=dtype)
    x, y = b.input((3, 4)), b.input((4,))
    check(b.graph(b.op(op, x, y)), operands(op, [(3, 4), (4,)], dtype))


def test_int32_wraps_like_numpy():
    b = GraphBuilder(dtype="int32")
    x = b.input((4,))
    g = b.graph(b.op("Mul", x, x))
    a = np.array([70000, -70000, 3, 2 ** 31 - 1], np.int32)
    check(g, [a])


@pytest.mark.parametrize("op", ["Neg", "Abs"])
def test_unary_int32(op):
    b = GraphBuilder(dtype="int32")
    x = b.input((5,))
    check(b.graph(b.op(op, x)), [random_array((5,), "int32")])


def test_float64_chain():
    b = GraphBuilder(dtype="float64")
    x = b.input((3, 5))
    check(b.graph(b.op("Exp", b.op("Mul", x, b.const(0.5)))), [random_array((3, 5), "float64")])


def test_select_and_comparisons():
    b = GraphBuilder()
    x, y = b.input((4, 3)), b.input((3,))
    g = b.graph(b.op("Select", b.op("Greater", x, y), x, b.op("Neg", y)))
    check(g, operands("Select", [(4, 3), (3,)]))


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"), ("float32", "bool"),
                                     ("bool", "float32"), ("float32", "float64"), ("float64", "float32")])
def test_cast(src, dst):
    b = GraphBuilder(dtype=src)
    x = b.input((6,))
    a = random_array((6,), src)
    check(b.graph(b.op("Cast", x, dtype=dst)), [a if src == "bool" else a * 10])


def test_broadcast_to():
    b = GraphBuilder()
    x = b.input((3, 1))
    check(b.graph(b.op("BroadcastTo", x, shape=(2, 3, 4))), [random_array((3, 1))])


@pytest.mark.parametrize("exponent", [0.0, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 0.5, -0.5, 2.5])
def test_pow_by_constant(exponent):
    b = GraphBuilder()
    x = b.input((8,))
    g = b.graph(b.op("Pow", x, b.const(exponent)))
    check(g, [random_array((8,), low=0.1)], rtol_scale=3)


def test_pow_integer_exponent_is_multiplications():
    b = GraphBuilder()
    x = b.input((4, 4))
    g = fused(b.graph(b.op("Pow", b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0)), b.const(3.0))))
    source = lower(g, CFG).kernels[0].source
    body = source[source.index("\ndef "):]
    assert "**" not in body and "pow(" not in body
    assert re.search(r"\((v_\d+) \* \1 \* \1\)", body)


def test_float32_constants_stay_float32():
    """The kernel takes the constant as a float64 argument and computes with it as float32 (numba
    widens float32 * float64 to float64): float32(0.1) passed exactly, float32 products."""
    b = GraphBuilder()
    x = b.input((16,))
    g = b.graph(b.op("Mul", x, b.const(0.1)))
    program = lower(g, CFG)
    assert re.search(r"cst_(\d+) = np\.float32\(sc_\1\)", program.kernels[0].source)
    assert 0.10000000149011612 in program.steps[0].extra
    check(g, [random_array((16,))], bitwise=True)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_one_kernel_serves_every_value_of_its_float_constants(dtype):
    """(x * c + d) / e for constants of every kind (inf, nan, -0.0, a subnormal, values not exact in
    float32): one compiled kernel per dtype, the constants its arguments, numpy's bits each time.
    Integer constants and Pow's exponent (its emitter writes x * x for 2) stay literals."""
    tiny = float(np.finfo(np.float16 if dtype == "float16" else np.float32).smallest_subnormal)
    values = [(0.5, 1.5, 3.0), (np.inf, -0.0, 7.0), (np.nan, 0.1, -2.5), (tiny, 1e-3, 1 / 3)]
    functions, names = set(), set()
    x = random_array((5, 33), dtype, seed=3)
    for c, d, e in values:
        b = GraphBuilder()
        xi = b.input((5, 33), dtype)
        k = lambda v: b.const(v, xi.dtype)
        g = fused(b.graph(b.op("RealDiv", b.op("Add", b.op("Mul", xi, k(c)), k(d)), k(e))))
        program = lower(g, CFG)
        header = re.search(r"def \w+\((.*)\):", program.kernels[0].source).group(1)
        assert len(program.steps) == 1 and len(re.findall(r"\bsc_\d+", header)) == 3
        functions.add(program.steps[0].fn)
        names.add(program.kernels[0].kernel)
        for got, want in zip(program.run([x]), reference(g, [x])):
            assert_close(got, want, bitwise=True)
    assert len(names) == 1 and len(functions) == 1
    b = GraphBuilder()
    xi = b.input((4,), dtype)
    g = fused(b.graph(b.op("Mul", b.op("Pow", xi, b.const(2.0, xi.dtype)), b.const(3, xi.dtype))))
    body = lower(g, CFG).kernels[0].source
    assert re.search(r"\((\w+) \* \1\)", body) and "sc_" in body   # x * x; 3.0 an argument


def test_integer_constants_stay_literals():
    b = GraphBuilder()
    x = b.input((6,), "int32")
    g = b.graph(b.op("Mul", x, b.const(7, x.dtype)))
    program = lower(g, CFG)
    assert "np.int32(7)" in program.kernels[0].source and "sc_" not in program.kernels[0].source
    check(g, [random_array((6,), "int32")], bitwise=True)


def test_fused_chain_equals_unfused_bitwise():
    """The W3 shape of work (bias + tanh-GeLU) fused and unfused: identical bits, no FMA contraction."""
    b = GraphBuilder()
    x, bias = b.input((8, 33)), b.input((33,))
    h = b.op("Add", x, bias)
    cube = b.op("Mul", b.op("Mul", h, h), h)
    inner = b.op("Mul", b.op("Add", h, b.op("Mul", cube, b.const(0.044715))), b.const(0.7978845608028654))
    y = b.op("Mul", b.op("Mul", h, b.const(0.5)), b.op("Add", b.op("Tanh", inner), b.const(1.0)))
    g = b.graph(y)
    arrays = [random_array((8, 33), seed=1), random_array((33,), seed=2)]
    unfused = run(g, arrays)
    fused_out = run(fused(g), arrays)
    assert len(lower(fused(g), CFG).kernels) == 1
    assert_close(fused_out[0], unfused[0], bitwise=True)
    assert_close(fused_out[0], reference(g, arrays)[0], rtol_scale=3)


def test_nan_and_inf_propagate_like_numpy():
    b = GraphBuilder()
    x, y = b.input((6,)), b.input((6,))
    g = b.graph(b.op("Maximum", x, y), b.op("Minimum", x, y), b.op("Add", x, y), b.op("RealDiv", x, y),
                b.op("Greater", x, y))
    a = np.array([np.nan, 1.0, np.inf, -np.inf, 0.0, 2.0], np.float32)
    c = np.array([1.0, np.nan, np.inf, 1.0, 0.0, -0.0], np.float32)
    check(g, [a, c], bitwise=True)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_maximum_and_minimum_of_signed_zeros_follow_one_rule(dtype):
    """np.where(x >= y, x, y), a NaN from either side, on every target: numpy's own float32 loops
    return y on a tie (maximum(+0.0, -0.0) is -0.0 on x86, +0.0 in float16); the reference writes the
    rule out, and the kernels, fused or not, give the same bits."""
    b = GraphBuilder(dtype=dtype)
    x, y = b.input((6,)), b.input((6,))
    g = b.graph(b.op("Maximum", x, y), b.op("Minimum", x, y), b.op("Maximum", y, x), b.op("Minimum", y, x))
    a = np.array([0.0, -0.0, 0.0, -0.0, np.nan, 1.0], dtype)
    c = np.array([-0.0, 0.0, 0.0, -0.0, -0.0, np.nan], dtype)
    want = [np.where((p >= q) | np.isnan(p), p, q) for p, q in ((a, c), (c, a))]
    want = [want[0], np.where((a <= c) | np.isnan(a), a, c), want[1], np.where((c <= a) | np.isnan(c), c, a)]
    for outs in (reference(g, [a, c]), run(g, [a, c]), run(fused(g), [a, c])):
        for got, expected in zip(outs, want):
            assert_close(got, expected, bitwise=True)
    assert np.signbit(want[0][0]) == np.signbit(a[0]) and np.signbit(want[1][1]) == np.signbit(a[1])


def test_multi_output_composite_with_a_smaller_output():
    b = GraphBuilder()
    x, row = b.input((4, 6)), b.input((1, 6))
    r2 = b.op("Mul", row, b.const(2.0))
    g = b.graph(b.op("Add", x, r2), r2)
    check(fused(g), [random_array((4, 6)), random_array((1, 6))])
