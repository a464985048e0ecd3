"""int8, int16, uint8 to uint64 and bfloat16 tensors (MindSpore's ms.int8 ... ms.bfloat16): Cast to and from each on
both targets, fused and unfused, against MindSpore 2.10's results for the same inputs (printed on its CPU);
integer arithmetic wraps as numpy's and MindSpore's; bfloat16 tensors and Parameters (ml_dtypes) hold it
and Cast converts it inside kernels (its arithmetic: tests/test_kernels_bfloat16.py)."""
import ml_dtypes
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import GraphKernelError, Parameter, Tensor, nn, ops
from ir import GraphBuilder
from ir.dtypes import DType, as_dtype
from ir.graph import TensorType
from graphkernel.compiler import compile_graph
from fusion_helpers import options
from graphkernel.settings.options import CompileOptions
from ir.interpret import interpret
from op_samples import kernel_ops
from tolerance import assert_close

X = np.array([[1.5, -2.25, 3.0e5, 1.0 / 3, 65504.0, 1e-40]], np.float32)
# MindSpore 2.10: Cast(Cast(X, bfloat16), float32) and Cast(Cast(Cast(X, bfloat16), float16), float32)
VIA_BF16 = [[1.5, -2.25, 299008.0, 0.33398438, 65536.0, 9.1835496e-41]]
VIA_BF16_F16 = [[1.5, -2.25, np.inf, 0.33398438, np.inf, 0.0]]
A8 = np.array([100, -100, 127, -128], np.int8)
C8 = np.array([100, -100, 1, 1], np.int8)


class Call(nn.Cell):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def construct(self, *xs):
        return self.fn(*xs)


def test_cast_to_and_from_bfloat16_as_mindspore_2_10(setting):
    def fn(x):
        b = ops.Cast()(x, ms.bfloat16)
        return b, ops.Cast()(b, ms.float32) * 1.0, ops.Cast()(ops.Cast()(b, ms.float16), ms.float32)

    b, via, via_f16 = Call(fn)(Tensor(X))
    assert b.dtype == ms.bfloat16 and b.asnumpy().dtype == ml_dtypes.bfloat16
    assert_close(via.asnumpy(), np.float32(VIA_BF16), bitwise=True)
    assert_close(via_f16.asnumpy(), np.float32(VIA_BF16_F16), bitwise=True)


def test_integer_arithmetic_wraps_as_mindspore_2_10(setting):
    def fn(a, c):
        return a + c, ops.Cast()(a, ms.float32) * 0.5, ops.Cast()(c, ms.int8) - a, ops.Cast()(a, ms.uint8)

    got = [t.asnumpy() for t in Call(fn)(Tensor(A8), Tensor(C8))]
    want = [np.int8([-56, 56, -128, -127]), np.float32([50.0, -50.0, 63.5, -64.0]), np.int8([0, 0, -126, -127]),
            np.uint8([100, 156, 127, 128])]
    for g, w in zip(got, want):
        assert_close(g, w, bitwise=True)


INT_DTYPES = [DType.int8, DType.int16, DType.uint8, DType.uint16, DType.uint32, DType.uint64]   # int32/64: elsewhere


def _int_ops():
    """The kernel ops of two inputs that take integers (their row's inference accepts int8)."""
    out = []
    for op in kernel_ops(2):
        try:
            GraphBuilder(*[TensorType((2,), DType.int8)] * 2).op(op, *GraphBuilder(
                *[TensorType((2,), DType.int8)] * 2).inputs)
        except GraphKernelError:
            continue
        out.append(op)
    return out


@pytest.mark.grid
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@pytest.mark.parametrize("op", _int_ops())
def test_integer_kernels_equal_the_reference_bit_for_bit(op, dtype):
    """Each integer op of the table, alone, chained with a Mul and a Cast to a float and back (float64 for
    32-bit types; a 64-bit product stays integer), fused and unfused, against numpy's integer arithmetic
    (wrap-around included)."""
    rng = np.random.default_rng(5)
    arrays = [rng.integers(0, 100, (7, 33)).astype(dtype.np), rng.integers(0, 5, (33,)).astype(dtype.np)]
    b = GraphBuilder(*[TensorType(a.shape, dtype) for a in arrays])
    x, y = b.inputs
    r = b.op(op, x, y)
    outs = [r]
    if r.dtype == dtype:   # through a float that holds every value (a wider value's cast back is undefined)
        wide = DType.float32 if dtype.itemsize <= 2 else DType.float64
        product = b.op("Mul", r, x)
        outs.append(b.op("Cast", b.op("Cast", product, dtype=wide), dtype=dtype) if dtype.itemsize <= 4 else product)
    graph = b.graph(*outs)
    want = interpret(graph, arrays)
    for opts in (CompileOptions(), options()):
        for got, ref in zip(compile_graph(graph, opts, eager=True).run_arrays(arrays), want):
            assert_close(got, ref, bitwise=True, err_msg=f"{op} {dtype} fused={opts.enable_graph_kernel}")


@pytest.mark.grid
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_sums_wrap(dtype):
    x = np.full((4, 300), 100, dtype.np)
    b = GraphBuilder(TensorType(x.shape, dtype))
    graph = b.graph(b.reduce("ReduceSum", b.inputs[0], (1,), keep_dims=False), b.op("ReduceMax", b.inputs[0],
                                                                                      axis=(0,), keep_dims=False))
    want = interpret(graph, [x])
    assert want[0].dtype == dtype.np and want[0][0] == np.asarray(30000).astype(dtype.np)
    for opts in (CompileOptions(), options()):
        for got, ref in zip(compile_graph(graph, opts, eager=True).run_arrays([x]), want):
            assert_close(got, ref, bitwise=True)


def test_bfloat16_parameters_hold_and_take_values(setting):
    w = Parameter(Tensor(np.array([1.0, 2.0, 3.0], ml_dtypes.bfloat16)), name="w")

    class Step(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = w

        def construct(self, g):
            new = ops.Cast()(self.w, ms.float32) - g * 0.1
            ops.assign(self.w, ops.Cast()(new, ms.bfloat16))
            return new

    new = Step()(Tensor(np.array([1.0, 1.0, 1.0], np.float32)))
    assert w.dtype == ms.bfloat16
    assert_close(new.asnumpy(), np.float32([0.9, 1.9, 2.9]))
    np.testing.assert_array_equal(w.asnumpy(), np.array([0.9, 1.9, 2.9], np.float32).astype(ml_dtypes.bfloat16))


def test_bfloat16_conversions_fuse_with_their_neighbours():
    """Casts to and from bfloat16 are kernel ops like any other (its arithmetic: tests/test_kernels_bfloat16.py)."""
    ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    call = Call(lambda x: ops.Cast()(ops.Cast()(x * 2.0, ms.bfloat16), ms.float32) + 1.0)
    compiled = call.compile(Tensor(X))
    assert [(k.op_types, k.variant) for k in compiled.kernels] == [(("Mul", "Cast", "Cast", "Add"), "elementwise")]
    want = (X * 2).astype(ml_dtypes.bfloat16).astype(np.float32) + 1
    assert_close(call(Tensor(X)).asnumpy(), want, bitwise=True)


def test_complex64_is_a_clear_error(cpu):
    with pytest.raises(GraphKernelError, match=r"dtype complex64 \(MindSpore's mstype.complex64\) is not supported"):
        Tensor(X, ms.complex64)
    with pytest.raises(GraphKernelError, match=r"Cast .*complex64.*is not supported"):
        ops.Cast()(Tensor(X), ms.complex64)


CAST_EDGES = [0.0, -0.0, 0.5, -0.9, -6.0, 127.5, 255.9, 300.0, -129.0, 32768.0, 65535.9, 70000.0, 2.0 ** 31,
              -2.0 ** 31, -2.0 ** 31 - 512, 3e9, 5e9, -5e9, 2.0 ** 53, 2.0 ** 63, -2.0 ** 63, 1e19, 2e19, 1e30,
              -1e30, np.nan, np.inf, -np.inf]
INTEGERS = [DType.int8, DType.int16, DType.int32, DType.int64, DType.uint8, DType.uint16, DType.uint32, DType.uint64]


def test_out_of_range_float_to_integer_casts_follow_one_rule():
    """C leaves them undefined (numpy's own results depend on the array's length there); the reference
    writes ir/ops/conversions.py's rule out: numpy's values in range, the lowest value of the 32- or 64-bit
    conversion beyond it, wrapped."""
    x = np.array(CAST_EDGES, np.float64)
    cases = {DType.int8: {300.0: 44, -129.0: 127, 3e9: 0, np.nan: 0}, DType.uint8: {-6.0: 250, -0.9: 0},
             DType.uint16: {-6.0: 65530, 70000.0: 4464}, DType.int32: {3e9: -2 ** 31, np.nan: -2 ** 31},
             DType.uint32: {-6.0: 2 ** 32 - 6, 5e9: 705032704, -5e9: 3589934592, np.nan: 0, np.inf: 0},
             DType.int64: {1e19: -2 ** 63, np.nan: -2 ** 63, 3e9: 3000000000},
             DType.uint64: {-6.0: 2 ** 64 - 6, 1e19: 10 ** 19, 2e19: 0, np.inf: 0, np.nan: 2 ** 63, -np.inf: 2 ** 63}}
    for dtype, want in cases.items():
        got = interpret_cast(x, dtype)
        for value, expected in want.items():
            k = next(i for i, v in enumerate(CAST_EDGES) if v == value or (np.isnan(v) and np.isnan(value)))
            assert int(got[k]) == expected, (dtype, value, got[k])
        inside = (x >= np.iinfo(dtype.np).min) & (x < float(np.iinfo(dtype.np).max) + 1)
        assert_close(got[inside], x[inside].astype(dtype.np), bitwise=True)


def interpret_cast(x, dtype):
    b = GraphBuilder(TensorType(x.shape, as_dtype(x.dtype)))
    return interpret(b.graph(b.op("Cast", b.inputs[0], dtype=dtype)), [x])[0]


@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16], ids=lambda t: t.__name__)
def test_float_to_integer_casts_in_kernels_give_the_references_bits(src):
    """Every float -> integer Cast in a kernel, alone and fused after a Mul, over the edges of every range
    spread through 4099 elements (vectorized loops and their scalar tails): the reference's bits."""
    rng = np.random.default_rng(7)
    with np.errstate(over="ignore"):
        x = np.resize(np.array(CAST_EDGES, np.float64), 4099).astype(src)
        x[::5] = (rng.standard_normal(820) * 10.0 ** rng.integers(0, 12, 820)).astype(src)
    b = GraphBuilder(TensorType(x.shape, as_dtype(x.dtype)))
    scaled = b.op("Mul", b.inputs[0], b.const(np.ones((), src), as_dtype(x.dtype)))
    graph = b.graph(*[b.op("Cast", v, dtype=d) for d in INTEGERS for v in (b.inputs[0], scaled)])
    want = interpret(graph, [x])
    for opts in (CompileOptions(), options()):
        for k, (got, ref) in enumerate(zip(compile_graph(graph, opts, eager=True).run_arrays([x]), want)):
            assert_close(got, ref, bitwise=True, err_msg=f"{INTEGERS[k // 2]} fused={opts.enable_graph_kernel}")
