"""Property: random ONNX graphs of elementwise ops, broadcasts, reductions and Softmax give, through
graphkernel with fusion on, what onnx.reference.ReferenceEvaluator gives."""
import numpy as np
from hypothesis import given, settings, strategies as st

import onnx

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from graphkernel import Tensor, context  # noqa: E402
import graphkernel.onnx as gx  # noqa: E402
from tolerance import assert_close  # noqa: E402

UNARY = ("Abs", "Neg", "Tanh", "Sigmoid", "Relu", "Erf", "Softsign", "Exp")
BINARY = ("Add", "Sub", "Mul", "Max", "Min")


@st.composite
def graphs(draw):
    rank = draw(st.integers(1, 3))
    x_shape = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    y_shape = [d if draw(st.booleans()) else 1 for d in x_shape][draw(st.integers(0, rank - 1)):]
    values = ["x", "y"]
    nodes = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "softmax"]))
        out = f"v{i}"
        a = draw(st.sampled_from(values))
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            src = f"t{i}"  # squash first so Exp cannot overflow
            nodes += [helper.make_node("Tanh", [a], [src]), helper.make_node(op, [src], [out])]
        elif kind == "binary":
            nodes.append(helper.make_node(draw(st.sampled_from(BINARY)), [a, draw(st.sampled_from(values))],
                                          [out]))
        elif kind == "reduce":
            nodes.append(helper.make_node("ReduceSum", [a], [out], keepdims=1))  # every axis, kept as 1
        else:
            nodes.append(helper.make_node("Softmax", [a], [out], axis=-1))
        values.append(out)
    outputs = [values[-1]] + ([values[-2]] if len(values) > 3 and draw(st.booleans()) else [])
    return x_shape, y_shape, nodes, outputs


@settings(max_examples=40, deadline=None)
@given(graphs(), st.integers(0, 2**16))
def test_random_onnx_graphs_match_the_reference(graph, seed):
    x_shape, y_shape, nodes, outputs = graph
    context.reset_context()
    context.set_context(device_target="CPU", enable_graph_kernel=True)
    model = helper.make_model(
        helper.make_graph(nodes, "random",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]),
        opset_imports=[helper.make_opsetid("", 17)])
    for vi in model.graph.output:  # shapes unknown to the builder: let onnx infer them
        vi.type.tensor_type.ClearField("shape")
    model = onnx.shape_inference.infer_shapes(model)
    rng = np.random.default_rng(seed)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32),
             "y": rng.standard_normal(y_shape).astype(np.float32)}
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = gx.load(model)(Tensor(feeds["x"]), Tensor(feeds["y"]))
    got = got if isinstance(got, tuple) else (got,)
    for g, e in zip(got, expected):
        assert_close(g.asnumpy(), e)
