"""W1..W6 as ONNX models (onnx.helper), for ONNX Runtime to run the same computation as the Cells; and two
models as torch.onnx (opset 17) writes them, which graphkernel loads through graphkernel.onnx.load:

    masked_softmax      softmax(a * 0.125 + m, -1): Mul, Add, Softmax (BERT attention's scores)
    residual_layer_norm LayerNormalization(x + r), gamma and beta initializers: Add, LayerNormalization

Each model's inputs are named in the Cell's order (x, then bias / gamma, beta); float32; opset 17.
LayerNorm and Softmax use the ONNX ops (LayerNormalization, Softmax), as an exporter writes them and as
ONNX Runtime runs them best; GeLU is written out in its tanh form (ONNX Runtime's optimizer may fuse it).
"""
from __future__ import annotations

import math

import numpy as np

OPSET = 17


class _Model:
    def __init__(self):
        self.nodes, self.inits, self.inputs = [], [], []

    def input(self, name: str, shape) -> str:
        from onnx import TensorProto, helper
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def const(self, value) -> str:
        from onnx import numpy_helper
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def op(self, op: str, *inputs: str, **attrs) -> str:
        from onnx import helper
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, list(inputs), [out], **attrs))
        return out

    def model(self, out: str, shape):
        from onnx import TensorProto, helper
        self.nodes.append(helper.make_node("Identity", [out], ["y"]))
        graph = helper.make_graph(self.nodes, "workload", self.inputs,
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
                                  self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def scale_shift(shape):
    m = _Model()
    x = m.input("x", shape)
    return m.model(m.op("Add", m.op("Mul", x, m.const(2.0)), m.const(1.0)), shape)


def scale_shift_cube(shape):
    m = _Model()
    x = m.input("x", shape)
    y = m.op("Add", m.op("Mul", x, m.const(2.0)), m.const(1.0))
    return m.model(m.op("Pow", y, m.const(3.0)), shape)


def bias_gelu(shape):
    m = _Model()
    h = m.op("Add", m.input("x", shape), m.input("bias", shape[-1:]))
    cube = m.op("Pow", h, m.const(3.0))
    inner = m.op("Mul", m.op("Add", h, m.op("Mul", cube, m.const(0.044715))), m.const(math.sqrt(2 / math.pi)))
    y = m.op("Mul", m.op("Mul", h, m.const(0.5)), m.op("Add", m.op("Tanh", inner), m.const(1.0)))
    return m.model(y, shape)


def layer_norm(shape, epsilon: float):
    m = _Model()
    x, gamma, beta = m.input("x", shape), m.input("gamma", shape[-1:]), m.input("beta", shape[-1:])
    return m.model(m.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=epsilon), shape)


def softmax(shape):
    m = _Model()
    return m.model(m.op("Softmax", m.input("x", shape), axis=-1), shape)


def sum_of_squares(shape):
    m = _Model()
    x = m.input("x", shape)
    return m.model(m.op("ReduceSum", m.op("Mul", x, x), keepdims=0), ())


def masked_softmax(scores_shape, mask_shape, scale: float = 0.125):
    m = _Model()
    a, mask = m.input("a", scores_shape), m.input("m", mask_shape)
    return m.model(m.op("Softmax", m.op("Add", m.op("Mul", a, m.const(scale)), mask), axis=-1), scores_shape)


def residual_layer_norm(shape, gamma, beta, epsilon: float):
    m = _Model()
    h = m.op("Add", m.input("x", shape), m.input("r", shape))
    return m.model(m.op("LayerNormalization", h, m.const(gamma), m.const(beta), axis=-1, epsilon=epsilon), shape)
