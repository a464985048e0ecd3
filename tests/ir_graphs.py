"""Graphs for the IR tests (printer, parser, verifier, .dot, interpreter).

    op_graph("Add")        one node of each registered op, on sample inputs
    seed_graphs()          the seed's nets, unfused and fused, LayerNorm, literals, hostile names
    random_graphs()        a hypothesis strategy: random DAGs of primitives, sometimes in a composite
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ir.dtypes import DType
from ir.errors import IRError
from ir.graph import Graph, Node, TensorType, Value
from ir.ops import OPS, make_node
from op_samples import comparisons, float_ops, kernel_ops

F16, F32, F64, I32, I64, BOOL = (DType.float16, DType.float32, DType.float64, DType.int32, DType.int64,
                                 DType.bool)


def tt(dtype: DType, *shape: int) -> TensorType:
    return TensorType(tuple(shape), dtype)


def _operand(op: str, shape) -> TensorType:
    return tt(BOOL if OPS[op].domain == "bool" else F32, *shape)


# op -> (input types, attrs) for one valid node of that op: the elementwise ops from the op table
SAMPLES = {
    **{op: ([_operand(op, (2, 3)), _operand(op, (3,))], {}) for op in kernel_ops(2)},
    **{op: ([_operand(op, (2, 3))], {}) for op in float_ops(1) + kernel_ops(1)},
    "Select": ([tt(BOOL, 2, 3), tt(F32, 2, 3), tt(F32, 1, 3)], {}),
    "Cast": ([tt(F32, 2, 3)], {"dtype": F16}),
    "ReduceSum": ([tt(F32, 2, 3, 4)], {"axis": (1,), "keep_dims": True}),
    "ReduceMax": ([tt(F32, 2, 3, 4)], {"axis": (-1, 0)}),
    "ReduceMin": ([tt(I32, 2, 3)], {}),
    "ReduceMean": ([tt(F32, 2, 3)], {"axis": -1}),
    "Reshape": ([tt(F32, 2, 3)], {"shape": (3, -1)}),
    "Transpose": ([tt(F32, 2, 3, 4)], {"perm": (2, 0, 1)}),
    "BroadcastTo": ([tt(F32, 3)], {"shape": (2, 3)}),
    "Const": ([], {"value": np.arange(6, dtype=np.float32).reshape(2, 3)}),
    "MatMul": ([tt(F32, 2, 3), tt(F32, 4, 3)], {"transpose_b": True}),
    "BatchMatMul": ([tt(F32, 2, 2, 3), tt(F32, 2, 3, 4)], {}),
    "BiasAdd": ([tt(F32, 2, 3, 4), tt(F32, 3)], {}),
    "Softmax": ([tt(F32, 2, 3)], {"axis": -1}),
    "LogSoftmax": ([tt(F32, 2, 3)], {"axis": 0}),
    "LayerNorm": ([tt(F32, 2, 4), tt(F32, 4), tt(F32, 4)], {"begin_norm_axis": -1, "begin_params_axis": -1}),
    "Slice": ([tt(F32, 4, 6)], {"begin": (1, 0), "end": (3, 6), "strides": (1, 2)}),
    "Concat": ([tt(F32, 2, 3), tt(F32, 2, 1)], {"axis": -1}),
    "Split": ([tt(F32, 4, 3)], {"axis": 0, "sizes": (1, 3)}),
    "Gather": ([tt(F32, 4, 3), tt(I64, 2)], {"axis": 0}),
    "PyFunc": ([tt(F32, 2, 3)], {"fn": np.negative, "in_types": (F32,), "in_shapes": ((2, 3),),
                                 "out_types": (F32,), "out_shapes": ((2, 3),)}),
    "HostCall": ([tt(F32, 2, 3), tt(F32, 3)], {"host_op": "Add"}),
}

# Ops whose printed text cannot be parsed back: a PyFunc's fn is a Python function, with no text form.
NO_TEXT_FORM = frozenset({"PyFunc"})


def op_graph(op: str) -> Graph | None:
    """A graph of one `op` node reading fresh inputs, all its results outputs; None if no sample fits."""
    candidates = [SAMPLES[op]] if op in SAMPLES else [([tt(F32, 2, 3)] * n, {}) for n in range(4)]
    for types, attrs in candidates:
        inputs = Graph.with_inputs(types, [f"in{i}" for i in range(len(types))])
        try:
            node = make_node(op, inputs, attrs, name=f"Default/{op}-op0")
        except IRError:
            continue
        return Graph(inputs, [node], node.outputs)
    return None


def composite(name: str, outer: list[Value], build) -> Node:
    """A Composite node over `outer`; `build(inner_inputs) -> (nodes, outputs)` makes its subgraph."""
    inner = Graph.with_inputs([v.type for v in outer])
    nodes, outputs = build(inner)
    return Node("Composite", outer, (), [v.type for v in outputs], name, Graph(inner, nodes, outputs))


def const(value, dtype: DType = F32, name: str = "") -> Node:
    return make_node("Const", [], {"value": np.asarray(value, dtype=dtype.np)}, name=name)


def net_basic_fuse() -> Graph:
    """The seed's NetBasicFuse: x * 2.0 + 1.0."""
    x, = Graph.with_inputs([tt(F32, 4, 4)], ["x"])
    two, one = const(2.0), const(1.0)
    mul = make_node("Mul", [x, two.out], name="Default/Mul-op0")
    add = make_node("Add", [mul.out, one.out], name="Default/TensorAdd-op1")
    return Graph([x], [two, one, mul, add], [add.out])


def net_composite_fused() -> Graph:
    """NetCompositeFuse after composite fusion: one Fused_Mul_Add_Pow_0 holding the scalar consts."""
    x, = Graph.with_inputs([tt(F32, 4, 4)], ["x"])

    def body(inner):
        two, one, three = const(2.0), const(1.0), const(3.0)
        mul = make_node("Mul", [inner[0], two.out], name="Default/Mul-op0")
        add = make_node("Add", [mul.out, one.out], name="Default/TensorAdd-op1")
        pw = make_node("Pow", [add.out, three.out], name="Default/Pow-op2")
        return [two, one, three, mul, add, pw], [pw.out]
    fused = composite("Fused_Mul_Add_Pow_0", [x], body)
    return Graph([x], [fused], fused.outputs)


def two_composites() -> Graph:
    """A multi-output composite feeding a second composite and a primitive, plus a broadcast input."""
    x, b = Graph.with_inputs([tt(F32, 2, 3), tt(F32, 3)], ["x", "bias"])

    def first(inner):
        add = make_node("Add", [inner[0], inner[1]], name="Default/Add-op0")
        ex = make_node("Exp", [add.out], name="Default/Exp-op1")
        return [add, ex], [ex.out, add.out]

    def second(inner):
        s = make_node("ReduceSum", [inner[0]], {"axis": (1,), "keep_dims": True}, name="Default/ReduceSum-op2")
        d = make_node("RealDiv", [inner[0], s.out], name="Default/RealDiv-op3")
        m = make_node("Mul", [d.out, inner[1]], name="Default/Mul-op4")
        return [s, d, m], [m.out]
    c0 = composite("Fused_Add_Exp_0", [x, b], first)
    c1 = composite("Fused_ReduceSum_RealDiv_Mul_1", [c0.outputs[0], c0.outputs[1]], second)
    neg = make_node("Neg", [c0.outputs[1]], name="Default/Neg-op5")
    return Graph([x, b], [c0, c1, neg], [c1.out, neg.out, c0.outputs[0]])


def layer_norm_graph() -> Graph:
    x, g, b = Graph.with_inputs([tt(F32, 4, 4), tt(F32, 4), tt(F32, 4)], ["x", "gamma", "beta"])
    ln = make_node("LayerNorm", [x, g, b], {"begin_norm_axis": 1, "begin_params_axis": 1, "epsilon": 1e-5},
                   name="Default/LayerNorm-op0")
    y = make_node("Mul", [ln.outputs[0], ln.outputs[2]], name="Default/Mul-op1")
    return Graph([x, g, b], [ln, y], [y.out, ln.outputs[1]])


def literal_graph() -> Graph:
    """Consts of every dtype with the values that are hard to print exactly."""
    nan_neg = np.array([0.0], np.float32).view(np.uint32) | np.uint32(0xFFC00001)  # a negative NaN with payload
    values = [
        np.array([np.nan, np.inf, -np.inf, -0.0, 0.1, 65504, 6e-8, 1 / 3], np.float16),
        np.concatenate([np.array([np.nan, np.inf, -np.inf, -0.0, 0.1, 3.4028235e38, 1e-45, 16777217], np.float32),
                        nan_neg.view(np.float32)]),
        np.array([np.nan, np.inf, -0.0, 0.1, 5e-324, 1.7976931348623157e308, 1 / 3], np.float64),
        np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1], np.int64),
        np.array([[np.iinfo(np.int32).min], [np.iinfo(np.int32).max]], np.int32),
        np.array([[True, False, True]], np.bool_),
        np.zeros((0, 3), np.float32),
        np.array(np.float16(-2.5)),
    ]
    nodes = [make_node("Const", [], {"value": v}, name=f"c{i}") for i, v in enumerate(values)]
    return Graph([], nodes, [n.out for n in nodes])


HOSTILE_NAMES = [
    'has "quotes"', "new\nline", "carriage\rreturn\ttab", "back\\slash\\", "<>{}|[]", 'loc("x")',
    "}\n  return %0\n}", "%0", "line\u2028separator\u0085next", "\x00nul\x1bescape\x7fdel", "名字/算子",
    "emoji 😀", "lone \ud800 surrogate", "\ud83d\ude00 pair of surrogates", "\\u0041 not an escape",
    "nbsp\u00a0space", "x" * 10_000, "'single'", "# not a comment", "&amp; entity", "trailing backslash \\",
]


def hostile_graph() -> Graph:
    """Every node, input and composite named with something a parser or Graphviz could choke on."""
    names = HOSTILE_NAMES
    x, y = Graph.with_inputs([tt(F32, 2, 2), tt(F32, 2, 2)], [names[0], names[1]])
    nodes, v = [], x
    for i, name in enumerate(names):
        node = make_node("Add" if i % 2 else "Mul", [v, y], name=name)
        nodes.append(node)
        v = node.out

    def body(inner):
        n = make_node("Sub", [inner[0], inner[1]], name=names[6])
        return [n], [n.out]
    comp = composite(names[2], [v, x], body)
    return Graph([x, y], nodes + [comp], [comp.out, v])


def seed_graphs() -> dict[str, Graph]:
    return {"basic": net_basic_fuse(), "composite": net_composite_fused(), "two_composites": two_composites(),
            "layer_norm": layer_norm_graph(), "literals": literal_graph(), "hostile": hostile_graph()}


def all_names(graph: Graph) -> list[str]:
    """Every name in the graph (inputs, nodes, subgraphs), in printing order."""
    out = [v.node.name for v in graph.inputs]
    for node in graph.nodes:
        out.append(node.name)
        if node.subgraph is not None:
            out += all_names(node.subgraph)
    return out


def registered_ops() -> list[str]:
    return sorted(OPS)


# -- random DAGs ---------------------------------------------------------------------------------------

SHAPES = [(2, 3), (1, 3), (2, 1), (3,), ()]
UNARY = float_ops(1)      # from the op table (tests/op_samples.py)
BINARY = float_ops(2)
COMPARE = comparisons()
# characters that stress quoting (a fixed alphabet: hypothesis' full-unicode charmap takes seconds to build)
NAME_CHARS = list('aZ0_/- "\\\n\r\t%{}()<>|#&;=,') + ["é", "名", "😀", "\u2028", "\x00", "\x85", "\ud800", "\udfff"]
names = st.one_of(st.just(""), st.text(st.sampled_from(NAME_CHARS), max_size=10))


@st.composite
def random_graphs(draw, max_nodes: int = 12) -> Graph:
    n_inputs = draw(st.integers(1, 3))
    types = [TensorType(draw(st.sampled_from(SHAPES)), draw(st.sampled_from([F32, F32, F16])))
             for _ in range(n_inputs)]
    inputs = Graph.with_inputs(types, [draw(names) for _ in types])
    values: list[Value] = list(inputs)
    nodes: list[Node] = []
    for _ in range(draw(st.integers(1, max_nodes))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "const", "broadcast", "cast",
                                     "select"]))
        a, b, c = (draw(st.sampled_from(values)) for _ in range(3))
        name = draw(names)
        try:
            if kind == "unary":
                node = make_node(draw(st.sampled_from(UNARY)), [a], name=name)
            elif kind == "binary":
                node = make_node(draw(st.sampled_from(BINARY)), [a, b], name=name)
            elif kind == "reduce":
                # no explicit axis on a 0-d tensor: the IR accepts axis 0 there but numpy's reference fails
                rank = a.type.rank
                axes = draw(st.lists(st.integers(-rank, rank - 1), max_size=2, unique=True)) if rank else []
                node = make_node(draw(st.sampled_from(["ReduceSum", "ReduceMax", "ReduceMin"])), [a],
                                 {"axis": tuple(axes), "keep_dims": draw(st.booleans())}, name=name)
            elif kind == "const":
                dtype = draw(st.sampled_from([F32, F16, F64]))
                value = draw(st.lists(st.floats(width=16 if dtype is F16 else 32), min_size=1, max_size=3))
                node = make_node("Const", [], {"value": np.array(value if len(value) > 1 else value[0], dtype.np)},
                                 name=name)
            elif kind == "broadcast":
                node = make_node("BroadcastTo", [a], {"shape": (2, 3)}, name=name)
            elif kind == "cast":
                node = make_node("Cast", [a], {"dtype": draw(st.sampled_from([F32, F16]))}, name=name)
            else:
                cond = make_node(draw(st.sampled_from(COMPARE)), [a, b])
                node = make_node("Select", [cond.out, b, c], name=name)
                nodes.append(cond)
        except IRError:
            continue
        nodes.append(node)
        values.extend(node.outputs)
    outputs = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
    graph = Graph(inputs, nodes, outputs)
    if nodes and draw(st.booleans()):  # the same computation inside one composite
        outer = Graph.with_inputs(types, [v.node.name for v in inputs])
        fused = Node("Composite", outer, (), [v.type for v in outputs], draw(names), graph)
        graph = Graph(outer, [fused], fused.outputs)
    return graph


def random_inputs(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.shape).astype(v.dtype.np) for v in graph.inputs]
