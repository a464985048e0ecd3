"""The reference interpreter: agrees with numpy written by hand, frees values after their last use, names
the failing node, never writes its inputs, stays quiet about NaN and Inf."""
import importlib
import math
import subprocess
import sys
import warnings
import weakref

import numpy as np
import pytest
from hypothesis import given, settings

from ir import (DTypeError, ExecutionError, Graph, GraphBuilder, IRError, Node, ShapeError, interpret, make_node,
                parse_graph, print_graph)
from ir.graph import Branch
from ir_graphs import (BOOL, F16, F32, I32, composite, layer_norm_graph, literal_graph, net_basic_fuse,
                       net_composite_fused, random_graphs, random_inputs, seed_graphs, tt, two_composites)

interpreter = importlib.import_module("ir.interpret")  # `ir.interpret` is the function


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_seed_nets_match_numpy():
    x = rand(4, 4)
    np.testing.assert_array_equal(interpret(net_basic_fuse(), [x])[0], x * np.float32(2) + np.float32(1))
    np.testing.assert_allclose(interpret(net_composite_fused(), [x])[0], (x * 2 + 1) ** 3, rtol=1e-6)


def test_broadcasts_reductions_and_composites_match_numpy():
    x, b = rand(2, 3), rand(3, seed=1)
    fused, neg, ex = interpret(two_composites(), [x, b])
    e = np.exp(x + b)
    np.testing.assert_allclose(ex, e, rtol=1e-6)
    np.testing.assert_allclose(fused, e / e.sum(axis=1, keepdims=True) * (x + b), rtol=1e-6)
    np.testing.assert_array_equal(neg, -(x + b))


def test_layer_norm_matches_the_textbook_formula():
    x, g, b = rand(4, 4), rand(4, seed=1), rand(4, seed=2)
    y, mean = interpret(layer_norm_graph(), [x, g, b])
    m = x.mean(axis=1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(mean, m, rtol=1e-6)
    np.testing.assert_allclose(y, ((x - m) / np.sqrt(v + 1e-5) * g + b) * v, rtol=1e-5, atol=1e-6)


def test_results_have_the_graph_dtypes_and_broadcast_shapes():
    x, y = Graph.with_inputs([tt(F16, 2, 1), tt(F16, 3)])
    add = make_node("Add", [x, y])
    cast = make_node("Cast", [add.out], {"dtype": I32})
    s = make_node("ReduceSum", [add.out], {"axis": 0})
    out = interpret(Graph([x, y], [add, cast, s], [add.out, cast.out, s.out]),
                    [np.array([[1], [2]], np.float16), np.array([0.5, 1, 2], np.float16)])
    assert [(o.dtype, o.shape) for o in out] == [(np.float16, (2, 3)), (np.int32, (2, 3)), (np.float16, (3,))]
    np.testing.assert_array_equal(out[0], [[1.5, 2, 3], [2.5, 3, 4]])


def test_literals_come_out_bit_exact_and_writable():
    outs = interpret(literal_graph(), [])
    for node, out in zip(literal_graph().nodes, outs):
        assert out.tobytes() == node.attr("value").array.tobytes() and out.flags.writeable


def test_inputs_never_modified_and_outputs_are_fresh_arrays():
    x, = Graph.with_inputs([tt(F32, 2, 3)])
    shape = make_node("Reshape", [x], {"shape": (3, 2)})
    same = make_node("Transpose", [x], {"perm": (0, 1)})
    neg = make_node("Neg", [x])
    graph = Graph([x], [shape, same, neg], [x, shape.out, same.out, x, neg.out, neg.out])
    data = rand(2, 3)
    keep = data.copy()
    outs = interpret(graph, [data])
    for out in outs:
        assert out.flags.writeable and not np.shares_memory(out, data)
    assert not np.shares_memory(outs[0], outs[3]) and not np.shares_memory(outs[4], outs[5])
    for out in outs:
        out[...] = 99
    np.testing.assert_array_equal(data, keep)


def test_a_reference_that_writes_its_input_cannot_touch_the_callers_array(monkeypatch):
    def vandal(node, arrays):
        arrays[0][...] = 0
        return (arrays[0],)
    monkeypatch.setattr(interpreter, "evaluate", vandal)
    x, = Graph.with_inputs([tt(F32, 2)])
    neg = make_node("Neg", [x])
    data = np.ones(2, np.float32)
    with pytest.raises(ExecutionError, match="read-only"):
        interpret(Graph([x], [neg], [neg.out]), [data])
    assert data.tolist() == [1, 1]


def test_values_are_freed_after_their_last_use(monkeypatch):
    x, = Graph.with_inputs([tt(F32, 64)])
    nodes, v = [], x
    for op in ("Exp", "Neg", "Abs", "Tanh", "Sqrt", "Neg"):
        nodes.append(make_node(op, [v], name=op))
        v = nodes[-1].out
    keep = make_node("Add", [nodes[0].out, v], name="late use of Exp")  # Exp's result lives to the end
    graph = Graph([x], nodes + [keep], [keep.out])
    produced: list[tuple[str, weakref.ref]] = []
    alive_at: dict[str, list[str]] = {}
    real = interpreter.evaluate

    def spy(node, arrays):
        alive_at[node.name] = [name for name, ref in produced if ref() is not None]
        results = real(node, arrays)
        produced.append((node.name, weakref.ref(results[0])))
        return results
    monkeypatch.setattr(interpreter, "evaluate", spy)
    interpret(graph, [rand(64)])
    # while Sqrt runs only its input (Tanh's) and the long-lived Exp are alive; the rest are gone
    assert alive_at["Sqrt"] == ["Exp", "Tanh"]
    assert alive_at["late use of Exp"] == ["Exp", "Neg"]


class Shown:
    """An interpreter observer that keeps what it is shown: (name, inputs, outputs, seconds) per node."""

    def __init__(self):
        self.nodes = []

    def node(self, node, inputs, outputs, seconds):
        self.nodes.append((node.name or node.op, [a.copy() for a in inputs], [a.copy() for a in outputs], seconds))


def test_an_observer_sees_each_node_with_its_arrays_and_composites_as_one():
    x, b = rand(2, 3), rand(3, seed=1)
    shown = Shown()
    got = interpret(two_composites(), [x, b], shown)
    assert [name for name, *_ in shown.nodes] == ["Fused_Add_Exp_0", "Fused_ReduceSum_RealDiv_Mul_1",
                                                  "Default/Neg-op5"]
    for r, want in zip(got, interpret(two_composites(), [x, b])):
        np.testing.assert_array_equal(r, want)   # observed or not, the same bits
    (_, ins, outs, seconds), (_, _, fused, _), (_, _, neg, _) = shown.nodes
    np.testing.assert_array_equal(ins[0], x)
    np.testing.assert_array_equal(outs[0], got[2])
    np.testing.assert_array_equal(fused[0], got[0])
    np.testing.assert_array_equal(neg[0], got[1])
    assert all(s >= 0 for *_, s in shown.nodes)


@pytest.mark.parametrize("cond, seen", [(True, ["Exp"]), (False, ["Exp", "Neg"])])
def test_an_observer_sees_the_nodes_of_the_branch_taken_not_the_if(cond, seen):
    y, = Graph.with_inputs([tt(F32, 2, 3)])
    neg = make_node("Neg", [y])
    then, else_ = GraphBuilder(tt(F32, 2, 3)), Graph([y], [neg], [neg.out])   # the identity, the negation
    b = GraphBuilder(tt(BOOL), tt(F32, 2, 3))
    e = b.op("Exp", b.inputs[1], name="Exp")
    graph = b.graph(*b.ops("If", b.inputs[0], e, then=Branch(then.graph(*then.inputs)), **{"else": Branch(else_)}))
    x = rand(2, 3)
    shown = Shown()
    out, = interpret(graph, [np.array(cond), x], shown)
    assert [name for name, *_ in shown.nodes] == seen
    np.testing.assert_array_equal(shown.nodes[-1][2][0], out)
    np.testing.assert_array_equal(out, np.exp(x) if cond else -np.exp(x))


def test_an_error_names_the_node_and_chains_the_cause():
    x, = Graph.with_inputs([tt(F32, 2)])
    liar = Node("Add", [x, x], (), [tt(F32, 5)], "Default/net/Add-op7")
    with pytest.raises(ExecutionError) as info:
        interpret(Graph([x], [liar], [liar.out]), [rand(2)])
    assert str(info.value).startswith("While executing Add (Default/net/Add-op7): IRError: reference of Add gave "
                                      "shape (2,)")
    assert isinstance(info.value.__cause__, IRError)


def test_an_error_inside_a_composite_names_both(monkeypatch):
    x, = Graph.with_inputs([tt(F32, 2)])
    fused = composite("Fused_Neg_Exp_0", [x], lambda f: [f.op("Exp", f.op("Neg", f.inputs[0], name="inner/Neg"),
                                                               name="inner/Exp")])
    real = interpreter.evaluate

    def failing(node, arrays):
        if node.op == "Exp":
            raise ZeroDivisionError("boom")
        return real(node, arrays)
    monkeypatch.setattr(interpreter, "evaluate", failing)
    with pytest.raises(ExecutionError) as info:
        interpret(Graph([x], [fused], fused.outputs), [rand(2)])
    assert str(info.value) == ("While executing Composite (Fused_Neg_Exp_0): While executing Exp (inner/Exp): "
                               "ZeroDivisionError: boom")
    assert isinstance(info.value.__cause__.__cause__, ZeroDivisionError)


def test_hostile_names_are_escaped_in_messages():
    x, = Graph.with_inputs([tt(F32, 2)])
    liar = Node("Neg", [x], (), [tt(F32, 3)], "two\nlines")
    with pytest.raises(ExecutionError, match=r"While executing Neg \(two\\nlines\)"):
        interpret(Graph([x], [liar], [liar.out]), [rand(2)])


@pytest.mark.parametrize("arrays, error, message", [
    ([], IRError, "graph takes 2 input(s), got 0"),
    ([np.zeros((2, 3), np.float32), np.zeros(4, np.float32)], ShapeError,
     "input 1 (bias): expected f32[3], got an array of shape (4,)"),
    ([np.zeros((2, 3), np.float64), np.zeros(3, np.float32)], DTypeError,
     "input 0 (x): expected f32[2,3] (float32), got an array of dtype float64"),
])
def test_inputs_are_checked(arrays, error, message):
    with pytest.raises(error) as info:
        interpret(two_composites(), arrays)
    assert message in str(info.value)


def test_nan_and_inf_propagate_without_warnings():
    x, = Graph.with_inputs([tt(F32, 4)])
    log = make_node("Log", [x])
    div = make_node("RealDiv", [make_node("Exp", [x]).out, x])
    exp = div.inputs[0].node
    cast = make_node("Cast", [log.out], {"dtype": I32})
    big = make_node("Mul", [exp.out, exp.out])  # overflows: numpy warns unless told not to
    inf_minus_inf = make_node("Sub", [big.out, big.out])
    graph = Graph([x], [log, exp, div, cast, big, inf_minus_inf], [log.out, div.out, cast.out, inf_minus_inf.out])
    data = np.array([-1, 0, 1000, np.nan], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lg, dv, _, nan = interpret(graph, [data])
    assert np.isnan(lg[0]) and lg[1] == -np.inf and np.isnan(lg[3])
    assert dv[1] == np.inf and dv[2] == np.inf and np.isnan(dv[3])
    assert np.isnan(nan[2])


@pytest.mark.parametrize("key", sorted(seed_graphs()))
def test_parsed_text_computes_the_same_bits(key):
    graph = seed_graphs()[key]
    arrays = random_inputs(graph)
    a = interpret(graph, arrays)
    b = interpret(parse_graph(print_graph(graph)), arrays)
    assert [x.tobytes() for x in a] == [y.tobytes() for y in b]


@settings(max_examples=30, deadline=None)
@given(random_graphs(max_nodes=8))
def test_random_graphs_run_and_round_trip_bit_exactly(graph):
    arrays = random_inputs(graph)
    keep = [a.copy() for a in arrays]
    a = interpret(graph, arrays)
    b = interpret(parse_graph(print_graph(graph)), arrays)
    assert [x.tobytes() for x in a] == [y.tobytes() for y in b]
    assert all(x.tobytes() == y.tobytes() for x, y in zip(arrays, keep))
    assert [(x.shape, x.dtype) for x in a] == [(v.shape, v.dtype.np) for v in graph.outputs]


def test_importing_ir_loads_neither_numba_nor_the_other_packages():
    code = ("import sys, ir; bad = [m for m in ('numba', 'graphkernel', 'kernels') if m in sys.modules]; "
            "print(','.join(bad))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == ""


def test_const_scalar_graph_and_math_consistency():
    b = GraphBuilder()
    out, = interpret(b.graph(b.const(math.pi)), [])
    assert out.dtype == np.float32 and out.shape == () and out == np.float32(math.pi)
