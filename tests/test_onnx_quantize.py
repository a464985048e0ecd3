"""ONNX QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (graphkernel/onnx/ops_quantize.py):
per tensor, per axis and blocked; rounding half to even and saturation at both ends of int8, uint8,
int16, uint16 and the sub-byte int4, uint4, int2, uint2; float4e2m1 (rounding to the type, saturation,
NaN); float16, bfloat16 and int32 inputs; a quantized model's Dequantize -> ops -> Quantize chain fused
into one kernel (int4 too); an int4 weight-only quantized MatMul. Every result is compared with onnx.reference.ReferenceEvaluator, the
implementation whose outputs ONNX's backend node tests ship (tests/test_onnx_node_conformance.py runs
those), on the reference target and on the kernels, fused and unfused."""
import ml_dtypes
import numpy as np
import pytest

from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphkernel.onnx as gx
from graphkernel import Tensor, context
from graphkernel.onnx import OnnxImportError

F, F16, BF16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16
I8, U8, I16, U16, I32 = TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16, TensorProto.INT32
I4, U4, I2, U2 = TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2, TensorProto.UINT2
F4 = TensorProto.FLOAT4E2M1
NP = {F: np.float32, F16: np.float16, BF16: ml_dtypes.bfloat16, I8: np.int8, U8: np.uint8, I16: np.int16,
      U16: np.uint16, I32: np.int32, I4: ml_dtypes.int4, U4: ml_dtypes.uint4, I2: ml_dtypes.int2, U2: ml_dtypes.uint2,
      F4: ml_dtypes.float4_e2m1fn}
SUBBYTE = [I4, U4, I2, U2]
RANGE = {I8: (-128, 127), U8: (0, 255), I16: (-32768, 32767), U16: (0, 65535), I4: (-8, 7), U4: (0, 15), I2: (-2, 1),
         U2: (0, 3)}


def bits(a: np.ndarray) -> np.ndarray:
    """What is compared bit for bit: a bfloat16's uint16 bits, a one-byte dtype's bytes (for the sub-byte
    types: their value's bits, nothing above them), another dtype's values."""
    if a.dtype == ml_dtypes.bfloat16:
        return a.view(np.uint16)
    return a.view(np.uint8) if a.dtype.itemsize == 1 and a.dtype != np.bool_ else a
TARGETS = [("CPU", True), ("Ascend", True), ("Ascend", False)]


def model(nodes, inputs, outputs, inits=(), opset=21):
    graph = helper.make_graph(nodes, "q", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def check(m, feeds, targets=TARGETS):
    """The model's outputs on each target equal onnx.reference's, bit for bit."""
    want = ReferenceEvaluator(m).run(None, feeds)
    for target, fuse in targets:
        context.set_context(device_target=target, enable_graph_kernel=fuse)
        cell = gx.load(m)
        got = cell(*[Tensor(feeds[i.name]) for i in m.graph.input])
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want):
            g = g.asnumpy()
            assert g.dtype == w.dtype and g.shape == w.shape, (target, fuse, g.dtype, w.dtype)
            np.testing.assert_array_equal(bits(g), bits(w), err_msg=f"{target} fused={fuse}")
    return cell


def ties_and_ends(n: int, scale: float) -> np.ndarray:
    """Values whose quotient by `scale` is a tie (k + 0.5, both signs), near a tie, and far beyond both
    ends of every quantized range (saturation), then random ones."""
    ties = (np.arange(-8, 8) + 0.5) * scale
    ends = np.array([-1e6, -70000, -32769, -129, 128, 256, 32768, 65536, 1e6]) * scale
    rest = np.random.default_rng(0).uniform(-300, 300, max(n - len(ties) - len(ends), 0)) * scale
    return np.concatenate([ties, np.nextafter(ties, 0), ends, rest])[:n].astype(np.float32)


@pytest.mark.grid
@pytest.mark.parametrize("qtype", [I8, U8, I16, U16] + SUBBYTE)
def test_per_tensor_rounds_half_to_even_and_saturates(qtype):
    x = ties_and_ends(64, 0.25)
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], [vi("x", F, [64])],
              [vi("y", qtype, [64])], [init("s", np.float32(0.25)), init("z", NP[qtype](3))])
    check(m, {"x": x})


@pytest.mark.parametrize("qtype", [I8, I4, U2])
def test_infinities_saturate_and_nan_gives_the_low_end(qtype):
    """onnx.reference casts rint(inf) to int32 (undefined in C; INT_MIN on x86, so +inf gave the low end);
    graphkernel saturates: +inf to the high end, -inf to the low end, as ONNX Runtime's clamp does; NaN
    to the low end, what the reference gives on x86."""
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], [vi("x", F, [3])], [vi("y", qtype, [3])],
              [init("s", np.float32(0.5)), init("z", np.array(1).astype(NP[qtype]))])
    low, high = RANGE[qtype]
    for target, fuse in TARGETS:
        context.set_context(device_target=target, enable_graph_kernel=fuse)
        got = gx.load(m)(Tensor(np.array([np.inf, -np.inf, np.nan], np.float32))).asnumpy()
        assert got.dtype == NP[qtype]
        np.testing.assert_array_equal(bits(got), bits(np.array([high, low, low]).astype(NP[qtype])),
                                      err_msg=f"{target} {fuse}")


def test_per_axis_with_a_negative_axis_and_dequantize_back():
    x = ties_and_ends(24, 0.5).reshape(2, 3, 4)
    scale, zero = np.array([0.5, 0.25, 2.0, 1.0], np.float32), np.array([0, -3, 7, 127], np.int8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=-1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=-1)]
    m = model(nodes, [vi("x", F, [2, 3, 4])], [vi("q", I8, [2, 3, 4]), vi("y", F, [2, 3, 4])],
              [init("s", scale), init("z", zero)])
    check(m, {"x": x})


def test_blocked_with_a_shorter_last_block():
    """block_size 2 along an axis of 5: scales of shape (3, 3), the last block one element long."""
    x = ties_and_ends(15, 0.1).reshape(5, 3)
    scale = np.array([[0.1, 0.2, 0.4], [1.0, 0.5, 0.25], [2.0, 3.0, 0.3]], np.float32)
    zero = np.array([[0, 1, 2], [250, 3, 4], [5, 6, 128]], np.uint8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0, block_size=2),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0, block_size=2)]
    m = model(nodes, [vi("x", F, [5, 3])], [vi("q", U8, [5, 3]), vi("y", F, [5, 3])],
              [init("s", scale), init("z", zero)])
    check(m, {"x": x})


@pytest.mark.parametrize("qtype", SUBBYTE)
def test_subbyte_types_per_tensor_per_axis_and_blocked(qtype):
    """Quantize to int4, uint4, int2, uint2 and dequantize back: ties rounding half to even and values
    far beyond the type's range saturating, zero points at both ends of its range, per tensor, per axis
    and blocked with a shorter last block, on the reference and the kernels, fused and unfused."""
    low, high = RANGE[qtype]
    zero = np.array([low, high, 0, low + 1]).astype(NP[qtype])
    x = ties_and_ends(60, 0.5).reshape(5, 3, 4)
    per_axis = np.array([0.5, 0.25, 2.0, 1.0], np.float32)
    # blocks of 3 along axis 0 (of 5): scales and zero points of shape [2, 3, 4], the second block shorter
    blocked = np.random.default_rng(6).choice(np.float32([0.125, 0.25, 0.5, 1.0, 4.0]), (2, 3, 4))
    zero_blocked = np.resize(zero, (2, 3, 4))
    nodes = [helper.make_node("QuantizeLinear", ["x", "s0", "z0"], ["q0"]),
             helper.make_node("DequantizeLinear", ["q0", "s0", "z0"], ["y0"]),
             helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["q1"], axis=-1),
             helper.make_node("DequantizeLinear", ["q1", "s1", "z1"], ["y1"], axis=-1),
             helper.make_node("QuantizeLinear", ["x", "s2", "z2"], ["q2"], axis=0, block_size=3),
             helper.make_node("DequantizeLinear", ["q2", "s2", "z2"], ["y2"], axis=0, block_size=3)]
    outputs = [vi(f"{name}{k}", qtype if name == "q" else F, [5, 3, 4]) for k in range(3) for name in "qy"]
    m = model(nodes, [vi("x", F, [5, 3, 4])], outputs,
              [init("s0", np.float32(0.5)), init("z0", zero[1:2].reshape(())), init("s1", per_axis), init("z1", zero),
               init("s2", blocked), init("z2", zero_blocked)])
    check(m, {"x": x})


def test_float4e2m1_per_tensor_per_axis_and_blocked():
    """Quantize to float4e2m1: x / scale + zero point cast to the type (rounding to nearest even at the
    midpoints between its values, +-6 beyond, infinities too; NaN to a zero), per tensor, per axis and
    blocked with a shorter last block, and dequantize back, as onnx.reference on every target."""
    midpoints = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 100.0])
    q = np.concatenate([midpoints, np.nextafter(midpoints, 0), -midpoints, np.array([np.inf, -np.inf, np.nan]),
                        np.random.default_rng(8).uniform(-8, 8, 30)])
    scale1 = np.array([0.5, 0.25, 2.0, 1.0], np.float32)
    x = (q.reshape(15, 4) * scale1).astype(np.float32)
    zero = np.array([0.0, 0.5, -1.0, 0.0], np.float32).astype(ml_dtypes.float4_e2m1fn)
    blocked = np.random.default_rng(9).choice(np.float32([0.25, 0.5, 1.0, 3.0]), (4, 4))
    nodes = [helper.make_node("QuantizeLinear", ["x", "s0", "z0"], ["q0"]),
             helper.make_node("DequantizeLinear", ["q0", "s0", "z0"], ["y0"]),
             helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["q1"], axis=1),
             helper.make_node("DequantizeLinear", ["q1", "s1"], ["y1"], axis=1),
             helper.make_node("QuantizeLinear", ["x", "s2"], ["q2"], axis=0, block_size=4,
                              output_dtype=F4)]
    outputs = [vi("q0", F4, [15, 4]), vi("y0", F, [15, 4]), vi("q1", F4, [15, 4]), vi("y1", F, [15, 4]),
               vi("q2", F4, [15, 4])]
    m = model(nodes, [vi("x", F, [15, 4])], outputs,
              [init("s0", np.float32(0.5)), init("z0", np.zeros((), ml_dtypes.float4_e2m1fn)), init("s1", scale1),
               init("z1", zero), init("s2", blocked)], opset=23)
    check(m, {"x": x})


def test_a_float4e2m1_zero_point_is_subtracted_as_the_formula_says():
    """DequantizeLinear's y = (x - x_zero_point) * x_scale holds for float4e2m1 too (ONNX's operator text);
    onnx.reference leaves a float4 zero point out, which only a nonzero one shows."""
    x = np.array([0.0, 0.5, -1.0, 6.0, -6.0, 3.0], np.float32).astype(ml_dtypes.float4_e2m1fn)
    m = model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])], [vi("x", F4, [6])], [vi("y", F, [6])],
              [init("s", np.float32(2.0)), init("z", np.array(1.5, np.float32).astype(ml_dtypes.float4_e2m1fn))])
    for target, fuse in TARGETS:
        context.set_context(device_target=target, enable_graph_kernel=fuse)
        got = gx.load(m)(Tensor(x)).asnumpy()
        np.testing.assert_array_equal(got, (x.astype(np.float32) - 1.5) * 2.0, err_msg=f"{target} {fuse}")


def dequantize_add_relu_quantize(a_type, b_type, y_type, inits):
    """y = Quantize(Relu(Dequantize(a) + Dequantize(b))) over [16, 32], scales and zero points `inits`
    (sa, za, sb, zb, sy, zy)."""
    nodes = [helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["fa"]),
             helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["fb"]),
             helper.make_node("Add", ["fa", "fb"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["act"]),
             helper.make_node("QuantizeLinear", ["act", "sy", "zy"], ["y"])]
    return model(nodes, [vi("a", a_type, [16, 32]), vi("b", b_type, [16, 32])], [vi("y", y_type, [16, 32])], inits)


def test_a_quantized_int4_block_is_one_kernel():
    """Dequantize (int4, uint4) -> Add -> Relu -> Quantize (int4): one fused kernel reading and writing the
    sub-byte types, equal to the unfused kernels and to onnx.reference bit for bit."""
    m = dequantize_add_relu_quantize(
        I4, U4, I4, [init("sa", np.float32(0.25)), init("za", np.array(-2).astype(ml_dtypes.int4)),
                     init("sb", np.float32(0.125)), init("zb", np.array(8).astype(ml_dtypes.uint4)),
                     init("sy", np.float32(0.375)), init("zy", np.array(-8).astype(ml_dtypes.int4))])
    rng = np.random.default_rng(4)
    feeds = {"a": rng.integers(-8, 8, (16, 32)).astype(ml_dtypes.int4),
             "b": rng.integers(0, 16, (16, 32)).astype(ml_dtypes.uint4)}
    cell = check(m, feeds)
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    compiled = cell.compile(*[Tensor(feeds[k]) for k in ("a", "b")])
    assert [k.variant for k in compiled.kernels] == ["elementwise"]
    assert [str(t) for t in compiled.kernels[0].inputs] == ["i4[16,32]", "u4[16,32]"]


def test_an_int4_weight_only_quantized_matmul():
    """graphkernel.onnx.examples.int4_matmul_model: an int4 weight (a Parameter) dequantized in blocks of 32
    rows (the last one shorter), with int4 zero points, feeding a MatMul: onnx.reference's result within
    float32's tolerance on every target (a MatMul's summation order may differ), the int4 weight converted
    in a kernel."""
    from graphkernel.onnx.examples import int4_matmul_model
    from tolerance import assert_close
    m = int4_matmul_model(n_in=100, n_out=48, batch=4, block=32)
    x = np.random.default_rng(5).standard_normal((4, 100)).astype(np.float32)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    for target, fuse in TARGETS:
        context.set_context(device_target=target, enable_graph_kernel=fuse)
        cell = gx.load(m)
        assert_close(cell(Tensor(x)).asnumpy(), want, err_msg=f"{target} fused={fuse}")
    params = {name: p.dtype for name, p in cell.parameters_and_names()}
    assert sorted(str(d) for d in params.values()) == ["float32", "int4", "int4"], params
    kernels = cell.compile(Tensor(x)).kernels
    assert any(k.variant == "elementwise" and "Cast" in k.op_types and str(k.inputs[0]) == "i4[100,48]"
               for k in kernels), kernels


@pytest.mark.parametrize("xtype", [F16, BF16, I32])
def test_half_float_and_int32_inputs(xtype):
    """The division runs in x's and the scale's common dtype (float16, bfloat16; an int32 x divides in
    float64, as numpy promotes it); DequantizeLinear gives the scale's dtype."""
    x = (ties_and_ends(32, 1.0) if xtype != I32 else np.arange(-16, 16) * 37).astype(NP[xtype])
    stype = F if xtype == I32 else xtype
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    m = model(nodes, [vi("x", xtype, [32])], [vi("q", I16, [32]), vi("y", stype, [32])],
              [init("s", np.array(0.75, NP[stype])), init("z", np.int16(-5))])
    check(m, {"x": x}, targets=[("CPU", True), ("Ascend", True)])


def test_precision_and_output_dtype_attributes():
    """opset 23's precision (the division in float16 here) and output_dtype without a zero point."""
    x = ties_and_ends(32, 0.3)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s"], ["q"], precision=F16, output_dtype=I8),
             helper.make_node("DequantizeLinear", ["q", "s"], ["y"], output_dtype=F16)]
    m = model(nodes, [vi("x", F, [32])], [vi("q", I8, [32]), vi("y", F16, [32])],
              [init("s", np.float32(0.3))], opset=23)
    check(m, {"x": x}, targets=[("CPU", True), ("Ascend", True)])


def test_a_quantized_block_is_one_kernel():
    """Dequantize -> Add -> Relu -> Quantize: one fused kernel, equal to the unfused kernels and to
    onnx.reference."""
    m = dequantize_add_relu_quantize(
        U8, U8, U8, [init("sa", np.float32(0.02)), init("za", np.uint8(128)), init("sb", np.float32(0.05)),
                     init("zb", np.uint8(100)), init("sy", np.float32(0.03)), init("zy", np.uint8(0))])
    rng = np.random.default_rng(1)
    feeds = {"a": rng.integers(0, 256, (16, 32), dtype=np.uint8), "b": rng.integers(0, 256, (16, 32), dtype=np.uint8)}
    cell = check(m, feeds)
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    compiled = cell.compile(*[Tensor(feeds[k]) for k in ("a", "b")])
    assert len(compiled.kernels) == 1 and compiled.kernels[0].variant == "elementwise"


def test_the_quantized_example_model():
    """graphkernel.onnx.examples.quantized_mlp_model (docs/onnx.md runs it with `graphkernel run`): each
    Q/DQ pair fuses with the bias and the Relu around it, and the output is onnx.reference's within one
    quantization step (a MatMul's summation order may move a value across a rounding boundary)."""
    from graphkernel.onnx.examples import quantized_mlp_model
    m = quantized_mlp_model(n_in=16, hidden=32, batch=4)
    x = np.random.default_rng(3).uniform(-2, 2, (4, 16)).astype(np.float32)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    cell = gx.load(m)
    np.testing.assert_allclose(cell(Tensor(x)).asnumpy(), want, atol=0.05 * 4 / 255 * 32, rtol=0)
    kernels = [set(k.op_types) for k in cell.compile(Tensor(x)).kernels]
    # bias Add, Relu (Maximum), Quantize (RealDiv, Round, clip, Cast) and Dequantize (Sub, Mul): one kernel
    assert {"Add", "Maximum", "RealDiv", "Round", "Cast", "Mul"} in [k & {"Add", "Maximum", "RealDiv", "Round",
                                                                       "Cast", "Mul"} for k in kernels], kernels


def test_dynamic_quantize_linear():
    """DynamicQuantizeLinear (x's range with 0, uint8) in an opset-13 model (the node tests ship it at
    opset 11), on random data with negative and positive values."""
    m = model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], [vi("x", F, [3, 40])],
              [vi("y", U8, [3, 40]), vi("s", F, []), vi("z", U8, [])], opset=13)
    rng = np.random.default_rng(2)
    for x in (rng.uniform(-3, 5, (3, 40)), rng.uniform(0.5, 2, (3, 40)), rng.uniform(-2, -1, (3, 40)),
              np.zeros((3, 40))):
        check(m, {"x": x.astype(np.float32)}, targets=[("CPU", True), ("Ascend", True)])


@pytest.mark.parametrize("nodes, inits, match", [
    ([helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.FLOAT8E4M3FN)],
     [init("s", np.float32(1))], r"quantizing to FLOAT8E4M3FN is not supported"),
    ([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)],
     [init("s", np.ones(3, np.float32)), init("z", np.zeros(3, np.uint8))],
     r"QuantizeLinear node .*y_scale of shape \[3\] is neither one value nor 1-D of length 4"),
    ([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0, block_size=2)],
     [init("s", np.ones((2, 4), np.float32)), init("z", np.zeros((2, 4), np.uint8))],
     r"blocked y_scale of shape \[2, 4\] with block_size=2 along axis 0: expected shape \[3, 4\]"),
    ([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=2)],
     [init("s", np.ones(4, np.float32)), init("z", np.zeros(4, np.uint8))], r"axis=2 is out of range"),
])
def test_bad_quantization_parameters_name_the_node_and_the_rule(nodes, inits, match):
    m = model(nodes, [vi("x", F, [5, 4])], [vi("y", U8, [5, 4])], inits)
    context.set_context(device_target="CPU")
    with pytest.raises(OnnxImportError, match=match):
        gx.load(m)(Tensor(np.ones((5, 4), np.float32)))
