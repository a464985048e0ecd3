"""The verifier: accepts every well-formed graph, names the node of every malformed one."""
import re

import numpy as np
import pytest

from ir import Graph, Node, TensorType, VerifyError, make_node, parse_graph, print_graph, verify
from ir.graph import input_node
from ir_graphs import F16, F32, bucket_graph, composite, op_graph, registered_ops, seed_graphs, tt


@pytest.mark.parametrize("key", sorted(seed_graphs()))
def test_well_formed_graphs_pass(key):
    graph = seed_graphs()[key]
    assert verify(graph) is graph


@pytest.mark.parametrize("op", registered_ops())
def test_every_op_sample_passes(op):
    graph = op_graph(op)
    assert graph is not None, f"no sample inputs for {op}; add one to tests/ir_graphs.py SAMPLES"
    assert verify(graph) is graph


def two_neg():
    x, = Graph.with_inputs([tt(F32, 2, 3)])
    a = make_node("Neg", [x], name="first")
    b = make_node("Abs", [a.out], name="second")
    return x, a, b


def rejects(graph, *fragments):
    with pytest.raises(VerifyError) as info:
        verify(graph)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return str(info.value)


def test_use_before_def():
    x, a, b = two_neg()
    rejects(Graph([x], [b, a], [b.out]), "node 0 Abs (second): input 0 is result 0 of node 1 Neg (first)",
            "use before def")


def test_foreign_value():
    x, a, b = two_neg()
    y, = Graph.with_inputs([tt(F32, 2, 3)])  # an input of some other graph
    c = make_node("Add", [b.out, y], name="uses/foreign")
    rejects(Graph([x], [a, b, c], [c.out]), "node 2 Add (uses/foreign): input 1 is a value from another graph")


def test_undefined_output_and_missing_result():
    x, a, b = two_neg()
    rejects(Graph([x], [a], [b.out]), "graph output 0 is a value from another graph", "Abs (second)")
    from ir.graph import Value
    rejects(Graph([x], [a, b], [Value(b, 3)]), "graph output 0 refers to result 3 of node 1, which has no such result")


def test_node_listed_twice_and_input_node_among_nodes():
    x, a, b = two_neg()
    rejects(Graph([x], [a, b, a], [b.out]), "node 2 Neg (first): the same node already appears as node 0")
    rejects(Graph([x], [x.node, a], [a.out]), "node 0 Input: Input nodes belong in graph.inputs")
    rejects(Graph([x, x], [a], [a.out]), "graph input 1 appears twice")
    rejects(Graph([a.out], [], [a.out]), "graph input 0 is a result of Neg (first), not of an Input node")


def test_shape_lie():
    x, a, b = two_neg()
    liar = b.replace(types=(tt(F32, 3, 2),))
    rejects(Graph([x], [a, liar], [liar.out]), "node 1 Abs (second): result types (f32[3,2]) differ from the "
            "inferred (f32[2,3])")


def test_dtype_lie_and_result_count_lie():
    x, a, b = two_neg()
    rejects(Graph([x], [a.replace(types=(tt(F16, 2, 3),))], [x]), "result types (f16[2,3])")
    rejects(Graph([x], [a.replace(types=(tt(F32, 2, 3),) * 2)], [x]), "result types (f32[2,3], f32[2,3])")


def test_attr_lies():
    x, = Graph.with_inputs([tt(F32, 2, 3)])
    good = make_node("ReduceSum", [x], {"axis": -1}, name="sum")
    assert good.attr("axis") == (1,)
    not_canonical = good.replace(attrs={"axis": (-1,), "keep_dims": False})
    rejects(Graph([x], [not_canonical], [not_canonical.out]), "node 0 ReduceSum (sum): attrs",
            "{'axis': (-1,), 'keep_dims': False}", "{'axis': (1,), 'keep_dims': False}")
    missing_default = good.replace(attrs={"axis": (1,)})
    rejects(Graph([x], [missing_default], [missing_default.out]), "are not what the op makes of them")
    unknown = good.replace(attrs={**good.attr_dict, "colour": "red"})
    rejects(Graph([x], [unknown], [unknown.out]), "AttrError", "unknown attribute(s) colour")
    bad_type = good.replace(attrs={"axis": "one", "keep_dims": False})
    rejects(Graph([x], [bad_type], [bad_type.out]), "node 0 ReduceSum (sum)", "axis='one'")


def test_unknown_op_and_alias():
    x, = Graph.with_inputs([tt(F32, 2)])
    mystery = Node("Frobnicate", [x], (), [tt(F32, 2)], "m")
    rejects(Graph([x], [mystery], [mystery.out]), "node 0 Frobnicate (m)", "unknown op 'Frobnicate'")
    alias = Node("TensorAdd", [x, x], (), [tt(F32, 2)])
    rejects(Graph([x], [alias], [alias.out]), "op TensorAdd is an alias; the IR spells it Add")
    primitive_with_subgraph = make_node("Neg", [x]).replace(subgraph=Graph([], [], []))
    rejects(Graph([x], [primitive_with_subgraph], [x]), "only a Composite node may hold a subgraph")


def test_wrong_arity_is_reported_not_raised_as_something_else():
    x, = Graph.with_inputs([tt(F32, 2)])
    node = Node("Add", [x], (), [tt(F32, 2)], "one_arg")
    rejects(Graph([x], [node], [node.out]), "node 0 Add (one_arg)", "takes 2 tensor input(s), got 1")


def fused_neg(outer):
    return composite("Fused_Neg_0", outer, lambda f: [f.op("Neg", f.inputs[0])])


def test_composite_checks():
    x, = Graph.with_inputs([tt(F32, 2, 3)])
    good = fused_neg([x])
    verify(Graph([x], [good], good.outputs))

    wrong_inputs = good.replace(inputs=[make_node("Cast", [x], {"dtype": F16}).out])
    cast = wrong_inputs.inputs[0].node
    rejects(Graph([x], [cast, wrong_inputs], wrong_inputs.outputs),
            "node 1 Composite (Fused_Neg_0): input types (f16[2,3]) differ from its subgraph's input types (f32[2,3])")

    wrong_results = good.replace(types=(tt(F32, 3, 2),))
    rejects(Graph([x], [wrong_results], wrong_results.outputs), "result types (f32[3,2]) differ from its "
            "subgraph's output types (f32[2,3])")

    inner_lie = good.subgraph.nodes[0].replace(types=(tt(F16, 2, 3),))
    sub = Graph(good.subgraph.inputs, [inner_lie], inner_lie.outputs)
    bad_inner = good.replace(subgraph=sub, types=(tt(F16, 2, 3),))
    rejects(Graph([x], [bad_inner], bad_inner.outputs),
            "node 0 Composite (Fused_Neg_0): in its subgraph: node 0 Neg: result types (f16[2,3])")

    nested = composite("Fused_Outer_1", [x], lambda f: f.composite(fused_neg(f.inputs).subgraph, *f.inputs,
                                                                   name="Fused_Neg_0"))
    rejects(Graph([x], [nested], nested.outputs), "in its subgraph: node 0 Composite (Fused_Neg_0): a Composite "
            "may not be nested")

    no_subgraph = Node("Composite", [x], (), [tt(F32, 2, 3)], "Fused_Nothing_2")
    rejects(Graph([x], [no_subgraph], no_subgraph.outputs), "needs a subgraph")

    reads_outer = composite("Fused_Leak_3", [x], lambda f: [f.op("Neg", x)])
    rejects(Graph([x], [reads_outer], reads_outer.outputs), "in its subgraph: node 0 Neg: input 0 is a value "
            "from another graph")


def test_verify_of_parsed_text():
    verify(parse_graph("graph(%0: f32[4]) {\n  %1 = Neg(%0) : f32[4]\n  return %1\n}"))
    msg = rejects(parse_graph('graph(%0: f32[4]) {\n  %1 = Neg(%0) : f32[5] loc("bad\\nname")\n  return %1\n}'),
                  "node 0 Neg (bad\\nname)")
    assert "\n" not in msg  # names are escaped in messages


def test_long_graph_is_checked_without_recursion():
    x, = Graph.with_inputs([tt(F32, 2)])
    nodes, v = [], x
    for i in range(5000):
        nodes.append(make_node("Neg", [v]))
        v = nodes[-1].out
    verify(Graph([x], nodes, [v]))
    lie = nodes[-1].replace(types=(tt(F32, 3),))
    rejects(Graph([x], nodes[:-1] + [lie], [lie.out]), "node 4999 Neg")


def test_input_node_type_must_be_a_tensor_type():
    bogus = input_node(0, "f32[2]").out
    rejects(Graph([bogus], [], [bogus]), "graph input 0 has type 'f32[2]', not a TensorType")


def test_literal_const_round_trips_through_verify():
    c = make_node("Const", [], {"value": np.array([1, 2], np.int64)})
    verify(Graph([], [c], c.outputs))
    lie = c.replace(types=(TensorType((2,), F32),))
    rejects(Graph([], [lie], lie.outputs), "result types (f32[2]) differ from the inferred (i64[2])")


@pytest.mark.parametrize("declared, started", [("[[3, 2], [3]]", "(f32[3,2], f32[3])"),
                                               ("[[3], [2, 3]]", "(f32[3], f32[2,3])")])
def test_an_allreduce_wait_declares_the_gradients_its_start_took(declared, started):
    text = print_graph(bucket_graph())
    bad = text.replace("shapes=[[2, 3], [3]]} : (f32[2,3], f32[3])", f"shapes={declared}}} : {started}")
    assert bad != text
    with pytest.raises(VerifyError, match=re.escape("its AllReduceStart started gradients of shapes [(2, 3), (3,)]")):
        verify(parse_graph(bad))
    verify(parse_graph(text))


def test_an_allreduce_wait_of_float16_gradients_declares_the_buckets_float32():
    from ir import GraphBuilder
    b = GraphBuilder(tt(F16, 3), names=["g0"])
    (token,) = b.ops("AllReduceStart", *b.inputs, bucket="r0b0", op="sum")
    verify(b.graph(*b.ops("AllReduceWait", token, bucket="r0b0", shapes=((3,),), dtypes=(F32,))))
