"""ONNX models built with onnx.helper, as torch.onnx writes them: the tests' and the benchmarks' workloads.

    bert_layer_model(hidden=1024, heads=16, seq=128, batch=1)    one BERT encoder layer (BERT-large size)
    quantized_mlp_model(n_in=64, hidden=128, batch=8)            two int8 linear layers in the QDQ form
                                                                 quantization tools write
    int4_matmul_model(n_in=256, n_out=128, batch=8, block=32)    a linear layer of an int4 weight-only
                                                                 quantized model (blocked, as LLM tools)

The layer, post-LN as in BERT:
    q, k, v  = x @ Wq + bq, ...          -> Reshape [0, 0, heads, dh] (0 copies a dim) -> Transpose
    probs    = Softmax(q @ k^T / sqrt(dh) + mask)     mask: additive, [batch, 1, 1, seq] (0 or -10000)
    context  = probs @ v -> Transpose -> Reshape to Concat(Slice(Shape(x), 0, 2), [hidden]) (folds)
    h        = LayerNormalization(context @ Wo + bo + x)
    y        = LayerNormalization(GeLU(h @ W1 + b1) @ W2 + b2 + h)
GeLU in three spellings: "erf" (x * 0.5 * (1 + Erf(x / sqrt 2)), the exact form torch exports),
"tanh" (0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3))))), or "op" (the Gelu op, opset 20).
Weights are seeded normal * 0.02, as BERT initializes them.
"""
from __future__ import annotations

import math

import numpy as np

GELU_FORMS = ("erf", "tanh", "op")


class _Graph:
    """Nodes and initializers under construction; every name unique."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.count = rng, [], [], 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def node(self, op: str, inputs, **attrs) -> str:
        from onnx import helper
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=f"/{out}/{op}", **attrs))
        return out

    def const(self, array, stem: str = "const") -> str:
        from onnx import numpy_helper
        name = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, shape, stem: str, scale: float = 0.02, value: float | None = None) -> str:
        arr = np.full(shape, value, np.float32) if value is not None else \
            (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return self.const(arr, stem)

    def linear(self, x: str, n_in: int, n_out: int, stem: str) -> str:
        y = self.node("MatMul", [x, self.weight((n_in, n_out), f"{stem}.weight")])
        return self.node("Add", [y, self.weight((n_out,), f"{stem}.bias")])

    def layer_norm(self, x: str, hidden: int, stem: str) -> str:
        return self.node("LayerNormalization", [x, self.weight((hidden,), f"{stem}.gamma", value=1.0),
                                                self.weight((hidden,), f"{stem}.beta", value=0.0)],
                         axis=-1, epsilon=1e-12)

    def gelu(self, x: str, form: str) -> str:
        f32 = np.float32
        if form == "op":
            return self.node("Gelu", [x])
        if form == "erf":
            inner = self.node("Erf", [self.node("Div", [x, self.const(f32(math.sqrt(2)))])])
            phi = self.node("Add", [inner, self.const(f32(1))])
            return self.node("Mul", [self.node("Mul", [x, phi]), self.const(f32(0.5))])
        cube = self.node("Pow", [x, self.const(f32(3))])
        inner = self.node("Add", [x, self.node("Mul", [self.const(f32(0.044715)), cube])])
        t = self.node("Tanh", [self.node("Mul", [self.const(f32(math.sqrt(2 / math.pi))), inner])])
        half_x = self.node("Mul", [self.const(f32(0.5)), x])
        return self.node("Mul", [half_x, self.node("Add", [self.const(f32(1)), t])])


def bert_layer_model(hidden: int = 1024, heads: int = 16, seq: int = 128, batch: int = 1,
                     gelu: str = "erf", seed: int = 0):
    """One BERT encoder layer as an ONNX ModelProto: inputs x [batch, seq, hidden] and mask
    [batch, 1, 1, seq] (float32, additive), output y [batch, seq, hidden]."""
    from onnx import TensorProto, helper
    if gelu not in GELU_FORMS:
        raise ValueError(f"gelu={gelu!r}; expected one of {', '.join(GELU_FORMS)}")
    if hidden % heads:
        raise ValueError(f"hidden={hidden} is not a multiple of heads={heads}")
    dh = hidden // heads
    g = _Graph(np.random.default_rng(seed))
    x, mask = "x", "mask"

    def heads_of(t: str, perm) -> str:
        split = g.node("Reshape", [t, g.const(np.array([0, 0, heads, dh], np.int64), "heads_shape")])
        return g.node("Transpose", [split], perm=list(perm))

    q = heads_of(g.linear(x, hidden, hidden, "attention.query"), (0, 2, 1, 3))
    k_t = heads_of(g.linear(x, hidden, hidden, "attention.key"), (0, 2, 3, 1))
    v = heads_of(g.linear(x, hidden, hidden, "attention.value"), (0, 2, 1, 3))
    scores = g.node("Div", [g.node("MatMul", [q, k_t]), g.const(np.float32(math.sqrt(dh)))])
    probs = g.node("Softmax", [g.node("Add", [scores, mask])], axis=-1)
    context = g.node("Transpose", [g.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    batch_seq = g.node("Slice", [g.node("Shape", [x]), g.const(np.array([0], np.int64)),
                                 g.const(np.array([2], np.int64))])
    merged = g.node("Concat", [batch_seq, g.const(np.array([hidden], np.int64))], axis=0)
    context = g.node("Reshape", [context, merged])
    attn = g.linear(context, hidden, hidden, "attention.output")
    h = g.layer_norm(g.node("Add", [attn, x]), hidden, "attention.ln")
    inter = g.gelu(g.linear(h, hidden, 4 * hidden, "intermediate"), gelu)
    out = g.linear(inter, 4 * hidden, hidden, "output")
    y = g.layer_norm(g.node("Add", [out, h]), hidden, "output.ln")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="/output/Identity"))
    graph = helper.make_graph(
        g.nodes, "bert_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, [batch, 1, 1, seq])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, hidden])], g.inits)
    opset = 20 if gelu == "op" else 17
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             producer_name="graphkernel.onnx.examples")


def bert_layer_inputs(model, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for bert_layer_model: x normal, mask hiding the last quarter of each sequence."""
    dims = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in model.graph.input}
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(dims["x"]).astype(np.float32)
    mask = np.zeros(dims["mask"], np.float32)
    seq = dims["mask"][-1]
    mask[..., seq - seq // 4:] = -10000.0
    return {"x": x, "mask": mask}


def quantized_mlp_model(n_in: int = 64, hidden: int = 128, batch: int = 8, seed: int = 0):
    """Two linear layers quantized in the QDQ form (as ONNX Runtime's quantization tools write them):
    x -> QuantizeLinear/DequantizeLinear (uint8, per tensor) -> MatMul with a DequantizeLinear'd int8
    weight (per output channel) -> Add bias -> Relu -> QuantizeLinear/DequantizeLinear -> the second
    layer the same way -> y float32 [batch, n_in]. The Q/DQ pairs around each MatMul fuse with the
    bias and the Relu into one kernel."""
    from onnx import TensorProto, helper
    g = _Graph(np.random.default_rng(seed))

    def qdq(t: str, scale: float, zero: int) -> str:
        s, z = g.const(np.float32(scale), "scale"), g.const(np.uint8(zero), "zero_point")
        return g.node("DequantizeLinear", [g.node("QuantizeLinear", [t, s, z]), s, z])

    def qlinear(t: str, n: int, m: int, stem: str, relu: bool) -> str:
        w = g.rng.standard_normal((n, m)).astype(np.float32) / math.sqrt(n)
        w_scale = (np.abs(w).max(axis=0) / 127).astype(np.float32)
        w_q = np.clip(np.rint(w / w_scale), -127, 127).astype(np.int8)
        w_dq = g.node("DequantizeLinear", [g.const(w_q, f"{stem}.weight"), g.const(w_scale, f"{stem}.scale"),
                                           g.const(np.zeros(m, np.int8), f"{stem}.zero_point")], axis=1)
        y = g.node("Add", [g.node("MatMul", [t, w_dq]), g.weight((m,), f"{stem}.bias", scale=0.1)])
        return g.node("Relu", [y]) if relu else y

    h = qdq(qlinear(qdq("x", 4 / 255, 128), n_in, hidden, "fc1", relu=True), 4 / 255, 0)
    y = qlinear(h, hidden, n_in, "fc2", relu=False)
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="/output/Identity"))
    graph = helper.make_graph(g.nodes, "quantized_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, n_in])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, n_in])], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             producer_name="graphkernel.onnx.examples")


def int4_matmul_model(n_in: int = 256, n_out: int = 128, batch: int = 8, block: int = 32, seed: int = 0):
    """A linear layer with an int4 weight, as weight-only quantization writes it for a large language
    model: the [n_in, n_out] weight quantized in blocks of `block` rows (a float32 scale and an int4 zero
    point per block and column, the last block shorter when `block` does not divide n_in), and x [batch,
    n_in] -> MatMul(x, DequantizeLinear(weight, scale, zero point, axis 0, block_size)) -> Add bias -> y.
    The weight, its scales and zero points are initializers: Parameters of int4 and float32."""
    import ml_dtypes
    from onnx import TensorProto, helper
    g = _Graph(np.random.default_rng(seed))
    blocks = -(-n_in // block)
    w = g.rng.standard_normal((n_in, n_out)).astype(np.float32) / math.sqrt(n_in)
    padded = np.concatenate([w, np.full((blocks * block - n_in, n_out), np.nan, np.float32)]).reshape(blocks, block, n_out)
    low, high = np.nanmin(padded, axis=1), np.nanmax(padded, axis=1)
    scale = np.maximum((high - low) / 15, 1e-8).astype(np.float32)
    zero = np.clip(np.rint(-8 - low / scale), -8, 7)
    spread = np.repeat(scale, block, axis=0)[:n_in], np.repeat(zero, block, axis=0)[:n_in]
    w_q = np.clip(np.rint(w / spread[0]) + spread[1], -8, 7).astype(ml_dtypes.int4)
    w_dq = g.node("DequantizeLinear", [g.const(w_q, "fc.weight"), g.const(scale, "fc.scale"),
                                       g.const(zero.astype(ml_dtypes.int4), "fc.zero_point")], axis=0, block_size=block)
    y = g.node("Add", [g.node("MatMul", ["x", w_dq]), g.weight((n_out,), "fc.bias", scale=0.1)])
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="/output/Identity"))
    graph = helper.make_graph(g.nodes, "int4_matmul", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, n_in])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, n_out])], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             producer_name="graphkernel.onnx.examples")
