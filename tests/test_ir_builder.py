"""ir.GraphBuilder: types inferred, scalar constants in the dtype they meet, scoped names, the graph it builds
equal to the one make_node builds by hand, the registry's errors, emit callbacks, means as ReduceMean rounds."""
import re

import numpy as np
import pytest

import ir.builder
from ir import (AttrError, DType, DTypeError, Graph, GraphBuilder, IRError, Literal, ShapeError, TensorType,
                UnknownOpError, interpret, make_node, print_graph, verify)
from ir.builder import constant_array
from ir.ops import evaluate
from tolerance import assert_close

F16, F32, F64, I32, I64, BOOL = (DType.float16, DType.float32, DType.float64, DType.int32, DType.int64,
                                 DType.bool)


def tt(dtype, *shape):
    return TensorType(tuple(shape), dtype)


def test_the_module_docstring_example_runs():
    example = ir.builder.__doc__.split("\n\n")[1]
    namespace = {"GraphBuilder": GraphBuilder, "TensorType": TensorType, "DType": DType}
    exec(re.sub(r"(?m)^    ", "", example), namespace)
    graph = verify(namespace["graph"])
    assert [str(v.type) for v in graph.outputs] == ["f32[4,8]", "f32[4,1]", "f32[4,1]", "f32[4,8]"]
    assert [v.node.name for v in graph.inputs] == ["x", "gamma"]


def test_types_are_inferred_by_the_registry():
    b = GraphBuilder(tt(F32, 4, 8), tt(F32, 8))
    x, bias = b.inputs
    y = b.op("Add", x, bias)
    s = b.op("ReduceSum", y, axis=(1,))
    c = b.op("Cast", s, dtype=F16)
    t = b.op("Transpose", x, perm=(1, 0))
    assert [str(v.type) for v in (y, s, c, t)] == ["f32[4,8]", "f32[4]", "f16[4]", "f32[8,4]"]
    assert b.reduce("ReduceMax", x, (-1,)).shape == (4, 1)
    assert b.reduce("ReduceMax", x, 0, keep_dims=False).shape == (8,)
    assert [v.type for v in b.ops("Split", x, axis=1, sizes=(3, 5))] == [tt(F32, 4, 3), tt(F32, 4, 5)]
    verify(b.graph(y, s, c, t))


def test_inputs_by_type_and_by_shape():
    b = GraphBuilder(tt(I32, 2), names=["a"], dtype="float16")
    x = b.input((3, 4), name="x")
    y = b.input([5], F64)
    assert [v.type for v in b.inputs] == [tt(I32, 2), tt(F16, 3, 4), tt(F64, 5)]
    assert [v.node.attr("index") for v in b.inputs] == [0, 1, 2]
    assert [v.node.name for v in b.inputs] == ["a", "x", ""]
    assert b.graph(x, y).inputs == tuple(b.inputs)


@pytest.mark.parametrize("dtype", [F16, F32, F64, I32, I64, BOOL], ids=str)
def test_scalar_constants_take_the_dtype_they_meet(dtype):
    b = GraphBuilder(tt(dtype, 2, 3))
    (x,) = b.inputs
    one = b.scalar(1, x)
    assert one.type == tt(dtype) and one.node.op == "Const"
    assert one.node.attr("value") == Literal(np.ones((), dtype.np))
    assert b.scalar(True, dtype).dtype == dtype


def test_scalar_floats_round_as_a_cast_and_integers_must_be_exact():
    b = GraphBuilder(tt(F16, 2), tt(I32, 2))
    h, i = b.inputs
    assert b.scalar(0.1, h).node.attr("value").array == np.float16(0.1)
    assert np.isposinf(b.scalar(1e6, h).node.attr("value").array)        # beyond float16: inf, as a cast
    assert b.scalar(-7.0, i).node.attr("value").array == np.int32(-7)   # an exact integer, spelled as a float
    for value, like, message in [(0.5, i, "0.5 has no exact int32 value"), (2**31, i, "no exact int32"),
                                 (float("nan"), i, "nan has no exact int32"), (2, BOOL, "2 has no exact bool"),
                                 ("two", h, "'two' cannot be made float16")]:
        with pytest.raises(DTypeError, match=message):
            b.scalar(value, like)
    with pytest.raises(ShapeError, match=r"scalar\(\) takes a number"):
        b.scalar([1.0, 2.0], h)
    assert len(b.nodes) == 3  # a refused constant adds nothing


def test_const_takes_the_builders_dtype_unless_told():
    b = GraphBuilder(dtype=F16)
    assert b.const(2.0).type == tt(F16)
    assert b.const(np.arange(6.0).reshape(2, 3)).type == tt(F16, 2, 3)   # an array's dtype is not kept
    assert b.const(np.arange(3), I64).type == tt(I64, 3)
    assert b.const(Literal(np.ones(2, np.float64)), F64).type == tt(F64, 2)
    with pytest.raises(DTypeError, match="no exact int32"):
        b.const([1, 2, 2.5], I32)
    big = np.array([2**62 + 1, -3], np.int64)
    assert constant_array(big, I64) is big                       # already in the dtype: neither copied nor cast
    with pytest.raises(DTypeError, match="no exact int32"):
        constant_array(big, I32)


def test_names_are_scoped_counted_and_explicit_names_win():
    b = GraphBuilder(tt(F32, 4), scope="Default/net/GeLU-op3")
    (x,) = b.inputs
    y = b.op("Mul", x, b.scalar(0.5, x))
    z = b.op("Neg", y, name="exact")
    w = b.op("Exp", b.op("Abs", z, name=""))
    assert [n.name for n in b.nodes] == ["Default/net/GeLU-op3/Const-0", "Default/net/GeLU-op3/Mul-1", "exact",
                                         "", "Default/net/GeLU-op3/Exp-2"]
    assert w.node is b.nodes[-1]
    plain = GraphBuilder(tt(F32, 4))
    plain.op("Neg", plain.inputs[0])
    assert plain.nodes[0].name == ""


def test_a_namer_names_every_node():
    count = iter(range(100))
    b = GraphBuilder(tt(F32, 4), namer=lambda op: f"Default/{op}-op{next(count)}")
    (x,) = b.inputs
    b.op("Add", x, b.const(1.0, name=""))
    b.op("Neg", x)
    assert [n.name for n in b.nodes] == ["", "Default/Add-op0", "Default/Neg-op1"]
    with pytest.raises(ValueError, match="not both"):
        GraphBuilder(scope="s", namer=str)


def softmax_by_builder(b, x):
    shifted = b.op("Sub", x, b.reduce("ReduceMax", x, (1,)))
    e = b.op("Exp", shifted)
    return b.op("RealDiv", b.op("Mul", e, b.scalar(2.0, x)), b.reduce("ReduceSum", e, (1,)))


def test_a_built_graph_equals_the_graph_made_node_by_node():
    b = GraphBuilder(tt(F32, 3, 5), scope="Default/Softmax-op0")
    built = b.graph(softmax_by_builder(b, b.inputs[0]))

    (x,) = Graph.with_inputs([tt(F32, 3, 5)])
    mx = make_node("ReduceMax", [x], {"axis": (1,), "keep_dims": True})
    sub = make_node("Sub", [x, mx.out])
    exp = make_node("Exp", [sub.out])
    two = make_node("Const", [], {"value": np.float32(2.0)})
    mul = make_node("Mul", [exp.out, two.out])
    total = make_node("ReduceSum", [exp.out], {"axis": (1,), "keep_dims": True})
    div = make_node("RealDiv", [mul.out, total.out])
    by_hand = Graph([x], [mx, sub, exp, two, mul, total, div], [div.out])

    assert built == by_hand and hash(built) == hash(by_hand)
    assert print_graph(built) != print_graph(by_hand)      # the names differ: metadata, not structure
    other = GraphBuilder(tt(F32, 3, 5))
    assert other.graph(softmax_by_builder(other, other.inputs[0])) == by_hand
    other = GraphBuilder(tt(F32, 3, 5))
    changed = other.graph(softmax_by_builder(other, other.op("Neg", other.inputs[0])))
    assert changed != by_hand


def test_bad_ops_and_attributes_raise_the_registrys_errors_naming_the_op():
    b = GraphBuilder(tt(F32, 2, 3), tt(F32, 4), tt(I32, 2, 3), scope="net")
    x, v, i = b.inputs
    cases = [
        (UnknownOpError, r"unknown op 'Mull' \(did you mean Mul\?\)", lambda: b.op("Mull", x, x)),
        (AttrError, r"^ReduceSum \(net/ReduceSum-\d\): unknown attribute\(s\) axes; ReduceSum accepts axis",
         lambda: b.op("ReduceSum", x, axes=(1,))),
        (AttrError, r"^Cast \(net/Cast-\d\): missing attribute dtype", lambda: b.op("Cast", x)),
        (AttrError, r"^Transpose \(net/Transpose-\d\): attribute perm='01'", lambda: b.op("Transpose", x, perm="01")),
        (AttrError, r"^Neg \(net/Neg-\d\): takes 1 tensor input\(s\), got 2", lambda: b.op("Neg", x, x)),
        (ShapeError, r"^Add \(net/Add-\d\): shapes \(2, 3\), \(4,\) do not broadcast", lambda: b.op("Add", x, v)),
        (DTypeError, r"^Mul \(net/Mul-\d\): operands have different dtypes", lambda: b.op("Mul", x, i)),
        (DTypeError, r"^Sub \(explicit\): operands", lambda: b.op("Sub", x, i, name="explicit")),
        (IRError, r"^Split \(net/Split-\d\) has 2 results: use ops\(\)",
         lambda: b.op("Split", x, axis=1, sizes=(1, 2))),
        (IRError, r"input 1\.0 is not an IR Value", lambda: b.op("Add", x, 1.0)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
    assert b.nodes == []  # nothing failed half-way into the graph


def test_emit_sees_every_node_and_may_replace_it():
    into: list = []
    b = GraphBuilder(tt(F32, 4), emit=into.append)          # append returns None: the node as given
    (x,) = b.inputs
    b.op("Neg", b.op("Exp", x))
    assert into == b.nodes and [n.op for n in into] == ["Exp", "Neg"]

    seen = []

    def renaming(node):
        seen.append(node)
        return node.replace(name="replaced/" + node.op)
    r = GraphBuilder(tt(F32, 4), emit=renaming)
    y = r.op("Abs", r.inputs[0])
    assert y.node is r.nodes[0] is not seen[0] and y.node.name == "replaced/Abs"


def test_expanders_build_with_it_inside_a_rewrite():
    b = GraphBuilder(tt(F32, 2, 3))
    graph = b.graph(b.op("Softmax", b.inputs[0], name="Default/Softmax-op0"))

    def expand(node, inputs, emit):
        if node.op != "Softmax":
            return None
        e = GraphBuilder(scope=node.name, emit=emit)
        return (softmax_by_builder(e, inputs[0]),)
    rewritten = verify(graph.rewrite(expand))
    assert [n.name for n in rewritten.nodes] == [f"Default/Softmax-op0/{op}-{k}" for k, op in enumerate(
        ["ReduceMax", "Sub", "Exp", "Const", "Mul", "ReduceSum", "RealDiv"])]


@pytest.mark.parametrize("dtype", [F16, F32, F64], ids=str)
@pytest.mark.parametrize("axes", [(1,), (-1,), (0, 2), (), 1], ids=str)
def test_mean_rounds_as_the_registrys_reduce_mean(dtype, axes):
    b = GraphBuilder(tt(dtype, 3, 70, 4))
    (x,) = b.inputs
    graph = verify(b.graph(b.mean(x, axes)))
    want_node = make_node("ReduceMean", [x], {"axis": axes, "keep_dims": True})
    assert graph.outputs[0].type == want_node.out.type
    ops = [n.op for n in graph.nodes]
    assert ops == (["Cast", "ReduceSum", "Const", "RealDiv", "Cast"] if dtype == F16
                   else ["ReduceSum", "Const", "RealDiv"])
    data = np.random.default_rng(0).uniform(-2, 2, (3, 70, 4)).astype(dtype.np)
    (got,) = interpret(graph, [data])
    (want,) = evaluate(want_node, [data])
    assert_close(got, want)


def test_mean_refuses_axes_out_of_range():
    b = GraphBuilder(tt(F32, 2, 3))
    with pytest.raises(ShapeError, match=r"mean of f32\[2,3\]: axis 2 out of range for rank 2"):
        b.mean(b.inputs[0], (2,))
    with pytest.raises(ShapeError, match=r"repeated axis"):
        b.mean(b.inputs[0], (1, -1))
    assert b.nodes == []


def test_composite_runs_a_subgraph_and_checks_its_input_types():
    inner = GraphBuilder(tt(F32, 2), tt(F32, 2))
    sub = inner.graph(inner.op("Mul", inner.op("Add", *inner.inputs), inner.scalar(3.0, inner.inputs[0])))
    b = GraphBuilder(tt(F32, 2), tt(F32, 2))
    (out,) = b.composite(sub, *b.inputs, name="Fused_Add_Mul_0")
    graph = verify(b.graph(out))
    assert graph.nodes[0].subgraph is sub and graph.nodes[0].name == "Fused_Add_Mul_0"
    arrays = [np.array([1.0, 2.0], np.float32), np.array([0.5, -4.0], np.float32)]
    assert_close(interpret(graph, arrays)[0], np.array([4.5, -6.0], np.float32), bitwise=True)
    with pytest.raises(IRError, match=r"Composite \(Fused_0\): input types \(f32\[2\]\) differ from its "
                                      r"subgraph's \(f32\[2\], f32\[2\]\)"):
        b.composite(sub, b.inputs[0], name="Fused_0")
