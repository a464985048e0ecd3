"""Graphs for the IR tests (printer, parser, verifier, .dot, interpreter).

    op_graph("Add")        one node of each registered op, on sample inputs
    seed_graphs()          the fusion example's nets, unfused and fused, LayerNorm, literals, hostile names
    random_graphs()        a hypothesis strategy: random DAGs of primitives, sometimes in a composite
    subgraph(outer, body)  the graph body(f) builds on a GraphBuilder f of outer's types (for composites)

All are built with ir.GraphBuilder (names given explicitly, as a trace would have named the nodes).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ir.builder import GraphBuilder
from ir.dtypes import DType
from ir.errors import IRError
from ir.graph import Branch, Graph, Node, TensorType, Value
from ir.ops import OPS, make_node
from ir.symbolic import Dim
from ir.dtypes import as_dtype
from op_cases import CASES as OP_CASES
from op_samples import comparisons, float_ops, kernel_ops

F16, F32, F64, I32, I64, BOOL = (DType.float16, DType.float32, DType.float64, DType.int32, DType.int64,
                                 DType.bool)


def tt(dtype: DType, *shape: int) -> TensorType:
    return TensorType(tuple(shape), dtype)


def _operand(op: str, shape) -> TensorType:
    return tt(BOOL if OPS[op].domain == "bool" else F32, *shape)


# op -> (input types, attrs) for one valid node of that op: the elementwise ops from the op table
def _identity_bprop():
    """A bprop graph (x, out, dout) -> dout: the gradient of the identity."""
    from ir.ops.gradient import BpropGraph
    inputs = Graph.with_inputs([tt(F32, 2, 3)] * 3)
    return BpropGraph(Graph(inputs, [], [inputs[2]]), "Identity")


def _branches():
    """An If's branches on (f32[2,3]): the identity, and its negation."""
    x, = Graph.with_inputs([tt(F32, 2, 3)])
    y, = Graph.with_inputs([tt(F32, 2, 3)])
    neg = make_node("Neg", [y])
    return {"then": Branch(Graph([x], [], [x])), "else": Branch(Graph([y], [neg], [neg.out]))}


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
    "SizeValue": ([], {"size": Dim.symbol("s0", 3) * 2 + 1, "dtype": F32}),   # a symbolic size (ir/symbolic.py)
    "SizeRange": ([], {"start": 1, "limit": Dim.symbol("s0", 5) * 2, "delta": 2, "dtype": I32}),
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
    "Gradient": ([tt(F32), tt(F32, 2, 3), tt(F32, 3)], {"seeds": 1}),
    "LayerNormGrad": ([tt(F32, 2, 4), tt(F32, 2, 4), tt(F32, 2, 1), tt(F32, 2, 1), tt(F32, 4)], {}),
    "BatchNorm": ([tt(F32, 2, 3, 4), tt(F32, 3), tt(F32, 3), tt(F32, 3), tt(F32, 3)], {"is_training": True}),
    "BatchNormGrad": ([tt(F32, 2, 3, 4)] * 2 + [tt(F32, 3)] * 4, {"is_training": True}),
    "UnsortedSegmentSum": ([tt(F32, 4, 3), tt(I32, 4)], {"num_segments": 3}),
    "SparseSoftmaxCrossEntropyWithLogits": ([tt(F32, 4, 3), tt(I32, 4)], {}),
    "Dropout": ([tt(F32, 4, 3), tt(I32, 1)], {"keep_prob": 0.9, "seed": 3, "op_id": 7}),
    "StopGradient": ([tt(F32, 2, 3)], {}),
    "Bprop": ([tt(F32, 2, 3), tt(F32, 2, 3)], {"inputs": 1, "outputs": 1, "bprop": _identity_bprop()}),
    "If": ([tt(BOOL), tt(F32, 2, 3)], _branches()),
    "AllReduceStart": ([tt(F32, 2, 3), tt(F16, 3)], {"bucket": "r0b1", "op": "sum"}),
    "AllReduceWait": ([tt(I32)], {"bucket": "r0b1", "shapes": ((2, 3), (3,)), "dtypes": (F32, F32)}),
    "AdaptiveAvgPool2D": ([tt(F32, 2, 3, 5, 4)], {"output_size": (2, None)}),
}

# Ops whose printed text cannot be parsed back: a PyFunc's fn is a Python function, a Bprop's bprop a
# traced graph of a Cell's method, with no text form; an If's branches print below it but do not parse.
NO_TEXT_FORM = frozenset({"PyFunc", "Bprop", "If"})


def op_graph(op: str) -> Graph | None:
    """A graph of one `op` node reading fresh inputs, all its results outputs; None if no sample fits."""
    cases = [([TensorType(a.shape, as_dtype(a.dtype)) for a in c.arrays], c.attrs) for c in OP_CASES if c.op == op]
    candidates = [SAMPLES[op]] if op in SAMPLES else cases[:1] or [([tt(F32, 2, 3)] * n, {}) for n in range(4)]
    for types, attrs in candidates:
        b = GraphBuilder(*types, names=[f"in{i}" for i in range(len(types))])
        try:
            outputs = b.ops(op, *b.inputs, name=f"Default/{op}-op0", **attrs)
        except IRError:
            continue
        return b.graph(*outputs)
    return None


def subgraph(outer: list[Value], body) -> Graph:
    """The graph `body(f) -> outputs` builds on f, a GraphBuilder with inputs of the types of `outer`."""
    f = GraphBuilder(*(v.type for v in outer))
    return f.graph(*body(f))


def composite(name: str, outer: list[Value], body) -> Node:
    """A Composite node running `subgraph(outer, body)` on `outer`, added to no graph (for graphs put
    together node by node, as the verifier's tests do)."""
    return GraphBuilder().composite(subgraph(outer, body), *outer, name=name)[0].node


def net_basic_fuse() -> Graph:
    """The fusion example's NetBasicFuse: x * 2.0 + 1.0."""
    b = GraphBuilder(tt(F32, 4, 4), names=["x"])
    two, one = b.const(2.0), b.const(1.0)
    mul = b.op("Mul", b.inputs[0], two, name="Default/Mul-op0")
    return b.graph(b.op("Add", mul, one, name="Default/TensorAdd-op1"))


def net_composite_fused() -> Graph:
    """NetCompositeFuse after composite fusion: one Fused_Mul_Add_Pow_0 holding the scalar consts."""
    def body(f):
        two, one, three = f.const(2.0), f.const(1.0), f.const(3.0)
        mul = f.op("Mul", f.inputs[0], two, name="Default/Mul-op0")
        add = f.op("Add", mul, one, name="Default/TensorAdd-op1")
        return [f.op("Pow", add, three, name="Default/Pow-op2")]
    b = GraphBuilder(tt(F32, 4, 4), names=["x"])
    return b.graph(*b.composite(subgraph(b.inputs, body), *b.inputs, name="Fused_Mul_Add_Pow_0"))


def two_composites() -> Graph:
    """A multi-output composite feeding a second composite and a primitive, plus a broadcast input."""
    b = GraphBuilder(tt(F32, 2, 3), tt(F32, 3), names=["x", "bias"])

    def first(f):
        add = f.op("Add", f.inputs[0], f.inputs[1], name="Default/Add-op0")
        return [f.op("Exp", add, name="Default/Exp-op1"), add]

    def second(f):
        s = f.op("ReduceSum", f.inputs[0], axis=(1,), keep_dims=True, name="Default/ReduceSum-op2")
        d = f.op("RealDiv", f.inputs[0], s, name="Default/RealDiv-op3")
        return [f.op("Mul", d, f.inputs[1], name="Default/Mul-op4")]
    ex, add = b.composite(subgraph(b.inputs, first), *b.inputs, name="Fused_Add_Exp_0")
    (fused,) = b.composite(subgraph([ex, add], second), ex, add, name="Fused_ReduceSum_RealDiv_Mul_1")
    neg = b.op("Neg", add, name="Default/Neg-op5")
    return b.graph(fused, neg, ex)


def layer_norm_graph() -> Graph:
    b = GraphBuilder(tt(F32, 4, 4), tt(F32, 4), tt(F32, 4), names=["x", "gamma", "beta"])
    y, mean, variance = b.ops("LayerNorm", *b.inputs, begin_norm_axis=1, begin_params_axis=1, epsilon=1e-5,
                              name="Default/LayerNorm-op0")
    return b.graph(b.op("Mul", y, variance, name="Default/Mul-op1"), mean)


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
    b = GraphBuilder()
    return b.graph(*(b.const(v, v.dtype, name=f"c{i}") for i, v in enumerate(values)))


HOSTILE_NAMES = [
    'has "quotes"', "new\nline", "carriage\rreturn\ttab", "back\\slash\\", "<>{}|[]", 'loc("x")',
    "}\n  return %0\n}", "%0", "line\u2028separator\u0085next", "\x00nul\x1bescape\x7fdel", "名字/算子",
    "emoji 😀", "lone \ud800 surrogate", "\ud83d\ude00 pair of surrogates", "\\u0041 not an escape",
    "nbsp\u00a0space", "x" * 10_000, "'single'", "# not a comment", "&amp; entity", "trailing backslash \\",
]


def hostile_graph() -> Graph:
    """Every node, input and composite named with something a parser or Graphviz could choke on."""
    names = HOSTILE_NAMES
    b = GraphBuilder(tt(F32, 2, 2), tt(F32, 2, 2), names=names[:2])
    x, y = b.inputs
    v = x
    for i, name in enumerate(names):
        v = b.op("Add" if i % 2 else "Mul", v, y, name=name)
    sub = subgraph([v, x], lambda f: [f.op("Sub", *f.inputs, name=names[6])])
    (comp,) = b.composite(sub, v, x, name=names[2])
    return b.graph(comp, v)


def bucket_graph() -> Graph:
    """A bucket's AllReduceStart and the AllReduceWait of its token (a group of one gives back the inputs)."""
    b = GraphBuilder(tt(F32, 2, 3), tt(F32, 3), names=["g0", "g1"])
    (token,) = b.ops("AllReduceStart", *b.inputs, bucket="r0b0", op="sum", name="Default/AllReduceStart-op0")
    return b.graph(*b.ops("AllReduceWait", token, bucket="r0b0", shapes=((2, 3), (3,)), dtypes=(F32, F32),
                          name="Default/AllReduceWait-op1"))


# ops whose node cannot run alone: AllReduceWait reads the token of an AllReduceStart (bucket_graph runs both)
NOT_RUN_ALONE = frozenset({"AllReduceWait"})


def seed_graphs() -> dict[str, Graph]:
    return {"basic": net_basic_fuse(), "composite": net_composite_fused(), "two_composites": two_composites(),
            "layer_norm": layer_norm_graph(), "literals": literal_graph(), "hostile": hostile_graph(),
            "bucket": bucket_graph()}


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
    g = GraphBuilder(*types, names=[draw(names) for _ in types])
    values: list[Value] = list(g.inputs)
    for _ in range(draw(st.integers(1, max_nodes))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "const", "broadcast", "cast",
                                     "select"]))
        a, b, c = (draw(st.sampled_from(values)) for _ in range(3))
        name = draw(names)
        try:
            if kind == "unary":
                new = g.ops(draw(st.sampled_from(UNARY)), a, name=name)
            elif kind == "binary":
                new = g.ops(draw(st.sampled_from(BINARY)), a, b, name=name)
            elif kind == "reduce":
                # no explicit axis on a 0-d tensor: the IR accepts axis 0 there but numpy's reference fails
                rank = a.type.rank
                axes = draw(st.lists(st.integers(-rank, rank - 1), max_size=2, unique=True)) if rank else []
                new = g.ops(draw(st.sampled_from(["ReduceSum", "ReduceMax", "ReduceMin"])), a, axis=tuple(axes),
                            keep_dims=draw(st.booleans()), name=name)
            elif kind == "const":
                dtype = draw(st.sampled_from([F32, F16, F64]))
                value = draw(st.lists(st.floats(width=16 if dtype is F16 else 32), min_size=1, max_size=3))
                new = (g.const(value if len(value) > 1 else value[0], dtype, name=name),)
            elif kind == "broadcast":
                new = g.ops("BroadcastTo", a, shape=(2, 3), name=name)
            elif kind == "cast":
                new = g.ops("Cast", a, dtype=draw(st.sampled_from([F32, F16])), name=name)
            else:
                cond = g.node(draw(st.sampled_from(COMPARE)), a, b, name="")
                select = g.node("Select", cond.out, b, c, name=name)
                g.add(cond)
                new = g.add(select).outputs
        except IRError:
            continue
        values.extend(new)
    outputs = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
    graph = g.graph(*outputs)
    if g.nodes and draw(st.booleans()):  # the same computation inside one composite
        outer = GraphBuilder(*types, names=[v.node.name for v in g.inputs])
        graph = outer.graph(*outer.composite(graph, *outer.inputs, name=draw(names)))
    return graph


def random_inputs(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.shape).astype(v.dtype.np) for v in graph.inputs]
