"""The sub-byte integers int4, uint4, int2, uint2 and the 4-bit float float4_e2m1fn (ONNX's types;
numpy's dtypes from ml_dtypes, one element a byte): storage dtypes. Tensors, Parameters, constants and
graph inputs and outputs hold them, the ops that move data take them, Cast converts to and from them on
the reference and in the kernels (fused with its neighbours, the same bits fused and unfused), and any
other op is a DTypeError naming the op and the dtype.

Cast's rules (ir/ops/conversions.py) are checked against ml_dtypes' conversions, which onnx.reference's
Cast is, over edge values and random bits of every source dtype (to float4_e2m1fn: over every float16
and bfloat16 too); the kernels against the reference; the ONNX Cast node against
onnx.reference.ReferenceEvaluator. Quantization to and from these types is tests/test_onnx_quantize.py's.
"""
import ml_dtypes
import numpy as np
import pytest

from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import graphkernel as ms
import graphkernel.onnx as gx
from graphkernel import GraphKernelError, Parameter, Tensor, context, nn, ops
from graphkernel.compiler import compile_graph
from graphkernel.settings.options import CompileOptions
from ir import GraphBuilder
from ir.dtypes import DType, as_dtype
from ir.errors import DTypeError
from ir.graph import TensorType
from ir.interpret import interpret
from ir.ops import evaluate, make_node
from ir.graph import Graph
from ir.parser import parse_graph
from ir.printer import print_graph
from fusion_helpers import options
from tests.test_dtypes import Call
from tests.test_onnx_quantize import TARGETS, model, vi
from tolerance import assert_close

SUBBYTE = [DType.int4, DType.uint4, DType.int2, DType.uint2]
TABLE = {  # dtype: (ml_dtypes type, short name, bits, range, unsigned, ONNX type)
    DType.int4: (ml_dtypes.int4, "i4", 4, (-8, 7), False, TensorProto.INT4),
    DType.uint4: (ml_dtypes.uint4, "u4", 4, (0, 15), True, TensorProto.UINT4),
    DType.int2: (ml_dtypes.int2, "i2", 2, (-2, 1), False, TensorProto.INT2),
    DType.uint2: (ml_dtypes.uint2, "u2", 2, (0, 3), True, TensorProto.UINT2),
}
F4 = DType.float4_e2m1fn
STORAGE = SUBBYTE + [F4]
# the dtypes a value converts from and to: every dtype that computes, and the storage ones
OTHERS = [DType.float32, DType.float16, DType.bfloat16, DType.float64, DType.int8, DType.uint8, DType.int16,
          DType.int32, DType.int64, DType.uint64, DType.bool]
ONNX_OF = {DType.float32: TensorProto.FLOAT, DType.float16: TensorProto.FLOAT16, DType.bfloat16: TensorProto.BFLOAT16,
           DType.float64: TensorProto.DOUBLE, DType.int8: TensorProto.INT8, DType.uint8: TensorProto.UINT8,
           DType.int16: TensorProto.INT16, DType.int32: TensorProto.INT32, DType.int64: TensorProto.INT64,
           DType.uint64: TensorProto.UINT64, DType.bool: TensorProto.BOOL,
           F4: TensorProto.FLOAT4E2M1, **{d: row[5] for d, row in TABLE.items()}}

# float edge values: both ends of every range and one past them, halves (truncated, not rounded), the
# midpoints between float4's values (ties), the int32 bounds a float converts through, beyond them, NaN
# and the infinities
FLOAT_EDGES = [0.25, -0.25, 0.75, -0.75, 1.25, -1.25, 1.75, -1.75, 3.5, -3.5, 5.0, -5.0, 6.0, -6.5, 1e-30,
               0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.5, -1.5, 2.5, -2.5, 1.0, -2.0, -3.0, 3.0, 4.0, -9.0, -8.5, -8.0,
               -7.5, 7.5, 7.99, 8.0, 15.0, 15.5, 16.0, 17.0, -16.0, 100.7, -100.7, 255.0, 65504.0, -65504.0,
               2147483520.0, 2147483647.0, 2147483647.9, 2147483648.0, -2147483648.0, -2147483648.9, -2147483649.0,
               3e9 + 1, -3e9 - 1, 2.0 ** 40 + 3, 1e10, 1e300, np.nan, -np.nan, np.inf, -np.inf]
INT_EDGES = [0, 1, -1, 2, -2, 3, -3, 7, -7, 8, -8, -9, 15, 16, 17, -16, 100, -100, 127, -128, 255, 32767, -32768,
             2 ** 31 - 1, -2 ** 31, 2 ** 40 + 5, -(2 ** 40) - 3, 2 ** 63 - 1, -2 ** 63]


def edges(dtype: DType) -> np.ndarray:
    """Edge values of `dtype` (its own conversions of them for the narrow types), then random bits."""
    rng = np.random.default_rng(7)
    if dtype == DType.bool:
        return np.array([True, False, True])
    if dtype in STORAGE:   # every value, and bytes whose unused high bits are set (ignored)
        raw = np.concatenate([np.arange(1 << dtype.bits), rng.integers(0, 256, 40)]).astype(np.uint8)
        return raw.view(dtype.np)
    if dtype.is_float:
        with np.errstate(all="ignore"):
            values = np.array(FLOAT_EDGES).astype(dtype.np)
        if dtype in (DType.float32, DType.float64):
            bits = rng.integers(0, (1 << 8 * dtype.itemsize) - 1, 300, dtype=np.uint64, endpoint=True)
            values = np.concatenate([values, bits.astype(f"u{dtype.itemsize}").view(dtype.np)])
        return np.concatenate([values, rng.normal(0, 40, 60).astype(dtype.np)])
    low, high = dtype.bounds
    values = [v for v in INT_EDGES if low <= v <= high]
    randoms = rng.integers(low, high, 60, dtype=np.int64 if low < 0 else np.uint64, endpoint=True)
    return np.concatenate([np.array(values, dtype.np), randoms.astype(dtype.np)])


def bits(a: np.ndarray) -> np.ndarray:
    """The bytes of an array of a one-byte dtype (the exact memory a cast wrote), else the array."""
    return a.view(np.uint8) if a.dtype.itemsize == 1 and a.dtype != np.bool_ else a


def assert_same_bits(got, want, msg=""):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, msg)
    if got.dtype == ml_dtypes.bfloat16:
        got, want = got.view(np.uint16), want.view(np.uint16)
    np.testing.assert_array_equal(bits(got), bits(want), err_msg=msg)


def cast_node(x: np.ndarray, dtype: DType):
    node = make_node("Cast", Graph.with_inputs([TensorType(x.shape, as_dtype(x.dtype))]), {"dtype": dtype})
    with np.errstate(all="ignore"):
        return evaluate(node, [x])[0]


def ml_dtypes_cast(x: np.ndarray, dtype: DType) -> np.ndarray:
    """numpy's (ml_dtypes') astype, what onnx.reference's Cast computes; a canonical byte (the value's low
    bits, high bits clear) read first, as ml_dtypes ignores the high bits. ml_dtypes has no cast between
    two storage dtypes: through int64 (ONNX's rule between integers: the low bits) or float32 (exact)."""
    with np.errstate(all="ignore"):
        if as_dtype(x.dtype) in STORAGE:
            x = canonical(x)
            if dtype in STORAGE:
                x = x.astype(np.float32 if x.dtype == F4.np else np.int64)
        return x.astype(dtype.np)


def canonical(x: np.ndarray) -> np.ndarray:
    """A storage dtype's array with nothing but the value's bits in its bytes (the high ones clear)."""
    src = as_dtype(x.dtype)
    return (x.view(np.uint8) & ((1 << src.bits) - 1)).view(x.dtype) if src in STORAGE else x


# --- the dtype table ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", SUBBYTE, ids=str)
def test_dtype_table(dtype):
    np_type, short, width, bounds, unsigned, onnx_type = TABLE[dtype]
    assert dtype.np == np.dtype(np_type) and dtype.itemsize == 1 and dtype.bits == width
    assert dtype.short == short and dtype.bounds == bounds and dtype.is_unsigned == unsigned
    assert dtype.is_int and not dtype.is_float and not dtype.is_half and not dtype.computes
    for spelling in (dtype, dtype.value, short, np_type, np.dtype(np_type)):
        assert as_dtype(spelling) is dtype
    from graphkernel.onnx.types import to_dtype, to_onnx_type
    assert to_dtype(onnx_type, "x") is dtype and to_onnx_type(dtype) == onnx_type


def test_float4_dtype_table():
    assert F4.np == np.dtype(ml_dtypes.float4_e2m1fn) and F4.itemsize == 1 and F4.bits == 4 and F4.short == "f4e2m1"
    assert F4.is_float and not F4.is_int and not F4.is_half and not F4.computes
    for spelling in (F4, "float4_e2m1fn", "f4e2m1", ml_dtypes.float4_e2m1fn):
        assert as_dtype(spelling) is F4
    from graphkernel.onnx.types import to_dtype, to_onnx_type
    assert to_dtype(TensorProto.FLOAT4E2M1, "x") is F4 and to_onnx_type(F4) == TensorProto.FLOAT4E2M1
    b = GraphBuilder(TensorType((3,), F4))
    graph = b.graph(b.op("Cast", b.const(np.array([-6.0, -0.0, 0.5], np.float32).astype(F4.np), F4), dtype=DType.float32))
    text = print_graph(graph)
    assert "f4e2m1[3](-6.0, -0.0, 0.5)" in text and print_graph(parse_graph(text)) == text


def test_every_other_dtype_computes():
    assert [d for d in DType if not d.computes] == STORAGE
    assert DType.int8.bits == 8 and DType.float16.bits == 16 and DType.int8.bounds == (-128, 127)


@pytest.mark.parametrize("dtype", SUBBYTE, ids=str)
def test_text_form_round_trips(dtype):
    low, high = dtype.bounds
    b = GraphBuilder(TensorType((3,), dtype))
    c = b.const(np.array([low, 0, high]).astype(dtype.np), dtype)
    graph = b.graph(b.op("Cast", b.op("Reshape", c, shape=(3, 1)), dtype=DType.float32),
                    b.op("Transpose", b.op("Reshape", b.inputs[0], shape=(3, 1)), perm=(1, 0)))
    text = print_graph(graph)
    assert f"{dtype.short}[3]({low}, 0, {high})" in text and f"%0: {dtype.short}[3]" in text
    assert print_graph(parse_graph(text)) == text


# --- Cast: the reference against ml_dtypes, the kernels against the reference ---------------------------

@pytest.mark.parametrize("dst", SUBBYTE, ids=str)
def test_cast_to_a_subbyte_dtype_is_ml_dtypes_conversion(dst):
    """Integers and bools wrap to the bits; floats truncate toward zero and wrap, through int32 (NaN,
    the infinities and floats beyond int32's range give 0): ml_dtypes' results on x86, onnx.reference's."""
    for src in OTHERS + SUBBYTE:
        x = edges(src)
        assert_same_bits(cast_node(x, dst), ml_dtypes_cast(x, dst), f"{src} -> {dst}")


def every(dtype: DType) -> np.ndarray:
    """Every value of a 16-bit float, NaNs and infinities included."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype.np)


def test_cast_to_float4_is_ml_dtypes_conversion():
    """Rounding to the nearest of +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, ties to the even mantissa, +-6 beyond
    (infinities too), a NaN a zero of the other sign, a float64 through float32 (its double rounding at a
    midpoint's neighbours): ml_dtypes' results, onnx.reference's; over every float16 and bfloat16."""
    midpoints = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0])
    near = np.concatenate([midpoints, np.nextafter(midpoints, 0), np.nextafter(midpoints, 9)])
    near = np.concatenate([near, -near])
    for src in OTHERS + STORAGE:
        x = edges(src)
        if src.is_float and src.computes:
            x = np.concatenate([x, near.astype(src.np)] + ([every(src)] if src.bits == 16 else []))
        assert_same_bits(cast_node(x, F4), ml_dtypes_cast(x, F4), f"{src} -> float4_e2m1fn")


def test_cast_from_float4_is_exact():
    x = edges(F4)
    values = canonical(x).astype(np.float32)
    assert sorted(set(np.abs(values).tolist())) == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    for dst in OTHERS + SUBBYTE:
        assert_same_bits(cast_node(x, dst), ml_dtypes_cast(values, dst), f"float4_e2m1fn -> {dst}")


@pytest.mark.parametrize("src", SUBBYTE, ids=str)
def test_cast_from_a_subbyte_dtype_is_exact(src):
    x = edges(src)
    values = x.astype(np.int64)
    assert sorted(set(values.tolist())) == list(range(src.bounds[0], src.bounds[1] + 1))
    for dst in OTHERS + [F4]:
        got = cast_node(x, dst)
        assert_same_bits(got, ml_dtypes_cast(x, dst), f"{src} -> {dst}")
        assert_same_bits(got, values.astype(dst.np), f"{src} -> {dst}")


def cast_graph(src: DType, n: int):
    """x of `src` cast to every storage dtype, each of those back to int8 and to float32, and to x's own
    dtype; a Mul on x first when x computes, so the casts fuse with an op that computes."""
    b = GraphBuilder(TensorType((n,), src))
    x = b.inputs[0]
    if src.computes and src != DType.bool:
        x = b.op("Mul", x, b.const(np.ones((), src.np), src))
    outs = []
    for dst in STORAGE:
        q = b.op("Cast", x, dtype=dst)
        outs += [q, b.op("Cast", q, dtype=DType.int8), b.op("Cast", q, dtype=DType.float32)]
        if src not in (dst, DType.int8, DType.float32):
            outs.append(b.op("Cast", q, dtype=src))
    return b.graph(*outs)


# float32, float16, int8 and int4 sources always, fused and unfused; the others one in --grid-share (CI: one
# in 3), fused: their single-op kernels are the same emitters' code, one Cast each
CORE_SOURCES = (DType.float32, DType.float16, DType.int8, DType.int4)
KERNEL_SOURCES = [src if src in CORE_SOURCES else pytest.param(src, marks=pytest.mark.grid)
                  for src in OTHERS + STORAGE]


@pytest.mark.parametrize("src", KERNEL_SOURCES, ids=str)
def test_kernels_cast_as_the_reference_fused_and_unfused(src):
    """Every cast to and from the storage dtypes in a kernel (fused with the casts of its result with
    fusion on; the core sources with fusion off too): the reference's bits, in bytes with only the
    value's bits set (a Cast of x to its own dtype is x itself: its bytes are made canonical first)."""
    x = canonical(edges(src))
    graph = cast_graph(src, len(x))
    want = interpret(graph, [x])
    for opts in (CompileOptions(), options()) if src in CORE_SOURCES else (options(),):
        compiled = compile_graph(graph, opts, eager=True)
        casts = [k for k in compiled.kernels if "Cast" in k.op_types]   # (an output twice is a Copy)
        assert casts and all(k.variant == "elementwise" for k in casts), compiled.kernels
        if opts.enable_graph_kernel and src not in (DType.bool, *STORAGE):
            # each cast to a sub-byte dtype in one kernel with the casts of its result
            assert all(len(k.op_types) >= 3 for k in casts), compiled.kernels
        for k, (got, ref) in enumerate(zip(compiled.run_arrays([x]), want)):
            assert_same_bits(got, ref, f"{src} output {k} fused={opts.enable_graph_kernel}")
            if got.dtype in (d.np for d in STORAGE):
                assert not (got.view(np.uint8) >> as_dtype(got.dtype).bits).any()


@pytest.mark.parametrize("src", STORAGE, ids=str)
def test_kernels_read_only_the_low_bits(src):
    """A byte's bits above the value's (ml_dtypes ignores them) do not change what a kernel reads."""
    x = edges(src)
    assert (x.view(np.uint8) >> src.bits).any()
    b = GraphBuilder(TensorType(x.shape, src))
    dsts = (DType.float32, DType.int8, DType.int32)
    graph = b.graph(*[b.op("Cast", b.inputs[0], dtype=d) for d in dsts])
    want = [ml_dtypes_cast(canonical(x), d) for d in dsts]
    for opts in (CompileOptions(), options()):
        for got, ref in zip(compile_graph(graph, opts, eager=True).run_arrays([x]), want):
            assert_same_bits(got, ref, f"fused={opts.enable_graph_kernel}")


# --- where they go: tensors, Parameters, data movement, ONNX graphs ---------------------------------

def test_tensors_and_parameters_hold_them(setting):
    x = Tensor(np.array([-9.0, -1.5, 7.5, 100.0], np.float32))
    q, back = Call(lambda x: (ops.Cast()(x, DType.int4), ops.Cast()(ops.Cast()(x, "int4"), ms.float32) * 2.0))(x)
    assert q.dtype == DType.int4 and q.asnumpy().dtype == ml_dtypes.int4
    np.testing.assert_array_equal(q.asnumpy().astype(np.int8), [7, -1, 7, 4])
    assert_close(back.asnumpy(), np.float32([14.0, -2.0, 14.0, 8.0]), bitwise=True)
    w = Parameter(Tensor(np.array([1, -2, 7]).astype(ml_dtypes.int4)), name="w")

    class Dequant(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = w

        def construct(self, s):
            return ops.Cast()(self.w, ms.float32) * s

    assert_close(Dequant()(Tensor(np.float32(0.5))).asnumpy(), np.float32([0.5, -1.0, 3.5]), bitwise=True)
    assert w.dtype == DType.int4


def run_everywhere(m, feeds):
    """The model's outputs on every target, each equal to onnx.reference's bit for bit."""
    with np.errstate(invalid="ignore"):   # NaN and infinities cast to integers: 0, as ml_dtypes casts them
        want = ReferenceEvaluator(m).run(None, feeds)
    for target, fuse in TARGETS:
        context.set_context(device_target=target, enable_graph_kernel=fuse)
        got = gx.load(m)(*[Tensor(feeds[i.name]) for i in m.graph.input])
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_same_bits(g.asnumpy(), w, f"output {k} on {target} fused={fuse}")


@pytest.mark.parametrize("dtype", STORAGE, ids=str)
def test_onnx_casts_to_and_from_it_match_onnx_reference(dtype):
    """ONNX Cast from float32, float16, bfloat16, int8, uint8 and int32 to the type, from it to every one of
    those, float64 and bool, and CastLike, against onnx.reference.ReferenceEvaluator."""
    sources = [DType.float32, DType.float16, DType.bfloat16, DType.int8, DType.uint8, DType.int32]
    n = min(len(edges(s)) for s in sources)
    feeds = {f"x_{s}": edges(s)[:n] for s in sources}
    feeds["q"] = canonical(np.resize(edges(dtype), n))   # as ONNX tensors unpack (ml_dtypes reads a float4's high bits)
    nodes, outputs = [], []
    for s in sources:
        nodes.append(helper.make_node("Cast", [f"x_{s}"], [f"to_{s}"], to=ONNX_OF[dtype]))
        outputs.append(vi(f"to_{s}", ONNX_OF[dtype], [n]))
    for d in sources + [DType.float64, DType.bool]:   # (onnx.reference has no cast between two sub-byte types)
        if dtype == F4 and d.is_unsigned:   # a negative float to an unsigned type: undefined in ONNX, and
            continue                        # numba's kernels differ from numpy there (as from float32)
        nodes.append(helper.make_node("Cast", ["q"], [f"from_{d}"], to=ONNX_OF[d]))
        outputs.append(vi(f"from_{d}", ONNX_OF[d], [n]))
    nodes.append(helper.make_node("CastLike", [f"x_{DType.float16}", "q"], ["like"]))
    outputs.append(vi("like", ONNX_OF[dtype], [n]))
    inputs = [vi(name, ONNX_OF[as_dtype(a.dtype)], [n]) for name, a in feeds.items()]
    run_everywhere(model(nodes, inputs, outputs, opset=21), feeds)


def test_onnx_data_movement_initializers_and_outputs():
    """An int4 input reshaped, transposed, sliced, concatenated with an int4 initializer and returned, a
    uint2 initializer returned through Identity: on every target, as onnx.reference."""
    from onnx import numpy_helper
    w = numpy_helper.from_array(np.array([[1, -8], [7, 0], [-1, 3]]).astype(ml_dtypes.int4), "w")
    u = numpy_helper.from_array(np.array([0, 3, 2]).astype(ml_dtypes.uint2), "u")
    shape = numpy_helper.from_array(np.array([3, 2], np.int64), "shape")
    starts, ends = (numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("starts", 1), ("ends", 3)))
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
             helper.make_node("Slice", ["r", "starts", "ends"], ["s"]),
             helper.make_node("Concat", ["r", "w"], ["c"], axis=0),
             helper.make_node("Identity", ["u"], ["y"])]
    m = model(nodes, [vi("x", TensorProto.INT4, [6])],
              [vi("t", TensorProto.INT4, [2, 3]), vi("s", TensorProto.INT4, [2, 2]), vi("c", TensorProto.INT4, [6, 2]),
               vi("y", TensorProto.UINT2, [3])], [w, u, shape, starts, ends])
    run_everywhere(m, {"x": np.array([-8, -1, 0, 1, 6, 7]).astype(ml_dtypes.int4)})


# --- the ops that compute refuse them, naming themselves and the dtype ----------------------------------

def test_an_op_that_computes_refuses_them_naming_op_and_dtype(cpu):
    b = GraphBuilder(TensorType((4,), DType.int4))
    with pytest.raises(DTypeError, match=r"^Add: dtype int4 is a storage dtype: no op computes in it; Cast converts "
                                         r"it .*\(.*Reshape.*Transpose\); Cast it to int8 or float32 first"):
        b.op("Add", b.inputs[0], b.inputs[0])
    with pytest.raises(DTypeError, match=r"^ReduceSum: dtype uint2 is a storage dtype"):
        b.op("ReduceSum", b.op("Cast", b.inputs[0], dtype=DType.uint2), axis=(0,), keep_dims=False)
    with pytest.raises(DTypeError, match=r"^BroadcastTo: dtype int4 is a storage dtype"):
        b.op("BroadcastTo", b.inputs[0], shape=(2, 4))
    with pytest.raises(DTypeError, match=r"^Exp: dtype float4_e2m1fn is a storage dtype"):
        b.op("Exp", b.op("Cast", b.inputs[0], dtype=F4))
    q = Tensor(np.array([1, 2]).astype(ml_dtypes.uint4))
    with pytest.raises(GraphKernelError, match=r"Mul .*dtype uint4 is a storage dtype: no op computes in it"):
        Call(lambda a: a * a)(q)
    m = model([helper.make_node("Relu", ["x"], ["y"], name="act")], [vi("x", TensorProto.INT4, [2])],
              [vi("y", TensorProto.INT4, [2])], opset=14)
    with pytest.raises(gx.OnnxImportError, match=r"Relu node 'act' .*dtype int4 is a storage dtype"):
        gx.load(m)(Tensor(np.array([1, -1]).astype(ml_dtypes.int4)))
