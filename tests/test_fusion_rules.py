"""Fusion decisions on their own: can_fuse's early returns (legality, the cycle check, the cost model),
each with its one-line reason, logged as it is returned; the flat fast path decides as the built kernel."""
import pytest

from ir import GraphBuilder
from fusion_helpers import fusion_log, F16, fuse_all, kernel_count, options, softmax, t
from graphkernel.passes import fusion_driver
from graphkernel.passes.basic_fusion import is_basic
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.pass_context import PassContext
from graphkernel.passes.fusion_driver import Search
from graphkernel.passes.fusion_rules import CYCLE, SAVING, can_fuse, reduce_depth
from graphkernel.passes.fusion_utils import build_composite


def decide(graph, a, b, opts=None, in_pass=is_fusible, pass_name="composite fusion"):
    """can_fuse of the clusters of top-level nodes a and b of `graph` (each its own cluster): the
    decision, checked to be the one record in the fusion log."""
    opts = opts or options()
    search = Search(graph, opts, "composite", in_pass, pass_name)
    with PassContext() as passes:
        decision = can_fuse(a, b, search)
    (record,) = passes.log
    assert record is decision
    return decision


def computing(graph):
    return [n for n in graph.nodes if n.op != "Const"]


def chain(op1, op2, shape=(8, 8), **attrs):
    g = GraphBuilder(t(*shape), t(*shape))
    x, w = g.inputs
    first = g.op(op1, x, w) if op1 in ("MatMul", "Add") else g.op(op1, x)
    return g.graph(g.op(op2, first, **attrs) if op2 != "Add" else g.op(op2, first, w))


@pytest.mark.parametrize("op1, op2, in_pass, expected", [
    ("MatMul", "Add", is_fusible, "MatMul is OPAQUE (a library call), never fused"),
    ("Exp", "Add", is_basic, "Exp is not an op of basic fusion"),
    ("Softmax", "Add", is_fusible, "Softmax is an unexpanded composite op (OPAQUE), never fused"),
    ("Neg", "Transpose", is_fusible, "Transpose is INJECTIVE and stays out of composites"),
])
def test_admission_reasons(op1, op2, in_pass, expected):
    attrs = {"perm": (1, 0)} if op2 == "Transpose" else {}
    graph = chain(op1, op2, **attrs)
    pass_name = "basic fusion" if in_pass is is_basic else "composite fusion"
    decision = decide(graph, *graph.nodes, in_pass=in_pass, pass_name=pass_name)
    assert not decision.accepted and decision.reason.startswith(expected)
    assert decision.figures == {}    # refused before any kernel is built


def test_a_legal_profitable_pair_is_accepted_with_its_figures():
    graph = chain("Exp", "Add")
    decision = decide(graph, *graph.nodes)
    assert decision.accepted and decision.reason == SAVING
    assert decision.figures["saved_us"] > 0 and decision.figures["parts_us"] > decision.figures["fused_us"]


def test_cluster_flags_reason():
    graph = chain("Exp", "Add")
    decision = decide(graph, *graph.nodes, opts=options("--disable_cluster_ops=Exp"))
    assert not decision.accepted and decision.reason == "Exp is disabled by the *_cluster_ops flags"


def test_op_limit_is_judged_from_the_op_counts():
    graph = chain("Exp", "Add")
    decision = decide(graph, *graph.nodes, opts=options("--composite_op_limit_size=1"))
    assert not decision.accepted and decision.reason == "2 ops exceed composite_op_limit_size=1"
    assert decision.figures == {}


def test_kernel_contract_reason():
    g = GraphBuilder(t(8, 8))
    (x,) = g.inputs
    s = g.op("ReduceSum", x, axis=(1,))
    graph = g.graph(g.op("Neg", s))
    decision = decide(graph, *graph.nodes)
    assert not decision.accepted and decision.reason.startswith("not one kernel:") and "keep_dims" in decision.reason


def diamond(first="Mul", last="Add"):
    """a -> MatMul -> c and a -> c: a and c together would need the MatMul inside."""
    g = GraphBuilder(t(16, 16), t(16, 16))
    x, w = g.inputs
    a = g.op(first, x, g.const(2.0)) if first == "Mul" else g.op(first, x)
    return g.graph(g.op(last, g.op("MatMul", a, w), a))


def test_a_legal_pair_with_a_path_through_another_kernel_is_refused_as_a_cycle():
    graph = diamond()
    a, _, c = computing(graph)
    decision = decide(graph, a, c)
    assert not decision.accepted and decision.reason == CYCLE
    assert "fused_us" in decision.figures and "saved_us" not in decision.figures   # before the profit


def test_legality_is_asked_before_the_cycle_check():
    graph = diamond(first="Exp")
    a, _, c = computing(graph)
    decision = decide(graph, a, c, in_pass=is_basic, pass_name="basic fusion")
    assert decision.reason == "Exp is not an op of basic fusion"


def test_the_cost_models_refusal_comes_last_with_every_figure():
    # 2M float16 points: multi-core elementwise work into a single-core float16 ReduceSum
    g = GraphBuilder(t(2048, 1024, dtype=F16))
    (x,) = g.inputs
    graph = g.graph(g.op("ReduceSum", g.op("Exp", x), axis=(1,), keep_dims=True))
    decision = decide(graph, *graph.nodes)
    assert not decision.accepted and "float16 ReduceSum" in decision.reason
    assert decision.figures["saved_us"] < 0 and decision.figures["fused_block_dim"] == 1


@pytest.mark.parametrize("shape", [(8, 8), (2048, 1024)], ids=["launch-bound", "multi-core"])
def test_the_flat_fast_path_decides_and_logs_as_the_built_kernel(shape, monkeypatch):
    g = GraphBuilder(t(*shape), t(*shape))
    x, w = g.inputs
    m = g.op("Mul", x, g.const(2.0))
    graph = g.graph(g.op("Add", m, w), g.op("Exp", m))
    mul, add, _ = computing(graph)
    search = Search(graph, options(), "composite", is_fusible, "composite fusion")
    assert search.facts(mul).flat is not None and search.facts(add).flat is not None
    fast = decide(graph, mul, add)
    monkeypatch.setattr(fusion_driver, "flat_of", lambda node, escaping: None)   # no summaries
    built = decide(graph, mul, add)
    assert (fast.accepted, fast.reason, fast.figures) == (built.accepted, built.reason, built.figures)


def test_reduce_depth_counts_ops_before_the_deepest_reduction():
    g = GraphBuilder(t(8, 8))
    (x,) = g.inputs
    y = g.op("Neg", g.op("Abs", x))
    s = g.op("ReduceSum", y, axis=(1,), keep_dims=True)
    s2 = g.op("ReduceMax", g.op("Sub", y, s), axis=(1,), keep_dims=True)
    node, _ = build_composite(list(g.graph(s2).nodes), {s2})
    assert reduce_depth(node.subgraph) == 4  # Abs, Neg, ReduceSum, Sub before ReduceMax


# --- fusion_switch_file's UBFusion names ---

def softmax_graph(row=64):
    g = GraphBuilder(t(4, row))
    return g.graph(softmax(g, g.inputs[0]))


def test_reduce_fusion_off_keeps_reductions_in_kernels_of_their_own():
    graph = softmax_graph()
    assert kernel_count(fuse_all(graph, options())[1]) == 1
    opts = options(switched_off=("reduce_fusion",))
    _, final = fuse_all(graph, opts)
    assert [n.op for n in final.nodes if n.op != "Const"] == ["ReduceMax", "Composite", "ReduceSum", "RealDiv"]
    assert any("reduce_fusion is off" in r.reason for r in fusion_log())


def test_broadcast_fusion_off_keeps_broadcasting_ops_out():
    g = GraphBuilder(t(4, 64), t(64))
    x, b = g.inputs
    graph = g.graph(g.op("Mul", g.op("Add", x, b), g.const(2.0)))
    assert kernel_count(fuse_all(graph, options())[1]) == 1
    opts = options(switched_off=("broadcast_fusion",))
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 2
    assert any("Add broadcasts an input: broadcast_fusion is off" in r.reason for r in fusion_log())


@pytest.mark.parametrize("off", [dict(switched_off=("stitch_fusion",)),
                                 dict(flags="--disable_pass=composite.stitch_fusion")],
                         ids=["fusion_switch_file", "--disable_pass"])
def test_stitch_fusion_off_even_at_opt_level_3(off):
    graph = softmax_graph(row=100000)
    assert kernel_count(fuse_all(graph, options(opt_level=3))[1]) < 5
    opts = options(opt_level=3, **off)
    _, final = fuse_all(graph, opts)
    assert any("stitch fusion is off" in r.reason for r in fusion_log())
    assert kernel_count(final) == kernel_count(fuse_all(graph, options(opt_level=2))[1])
