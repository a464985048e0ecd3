"""Fusion legality on its own: can_fuse's early returns, each with its one-line reason."""
import pytest

from ir import GraphBuilder
from fusion_helpers import fuse_all, kernel_count, options, softmax, t
from graphkernel.passes.basic_fusion import is_basic
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.fusion_rules import can_fuse, reduce_depth
from graphkernel.passes.fusion_utils import build_composite


def pair(graph, i, j):
    a, b = [graph.nodes[i]], [graph.nodes[j]]
    merged, _ = build_composite(a + b, set(graph.outputs) | set(a[0].outputs))
    return a, b, merged.subgraph


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
    a, b, merged = pair(graph, 0, 1) if op2 != "Transpose" else (graph.nodes[:1], graph.nodes[1:], None)
    if merged is None:
        reason = can_fuse(a, b, graph, options(), in_pass, "composite fusion")
    else:
        reason = can_fuse(a, b, merged, options(), in_pass, "basic fusion")
    assert reason is not None and reason.startswith(expected)


def test_legal_pair_has_no_reason():
    graph = chain("Exp", "Add")
    assert can_fuse(*pair(graph, 0, 1), options(), is_fusible, "composite fusion") is None


def test_cluster_flags_reason():
    graph = chain("Exp", "Add")
    reason = can_fuse(*pair(graph, 0, 1), options("--disable_cluster_ops=Exp"), is_fusible, "composite fusion")
    assert reason == "Exp is disabled by the *_cluster_ops flags"


def test_kernel_contract_reason():
    g = GraphBuilder(t(8, 8))
    (x,) = g.inputs
    s = g.op("ReduceSum", x, axis=(1,))
    graph = g.graph(g.op("Neg", s))
    reason = can_fuse(*pair(graph, 0, 1), options(), is_fusible, "composite fusion")
    assert reason.startswith("not one kernel:") and "keep_dims" in reason


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
    assert any("reduce_fusion is off" in r.reason for r in opts.log)


def test_broadcast_fusion_off_keeps_broadcasting_ops_out():
    g = GraphBuilder(t(4, 64), t(64))
    x, b = g.inputs
    graph = g.graph(g.op("Mul", g.op("Add", x, b), g.const(2.0)))
    assert kernel_count(fuse_all(graph, options())[1]) == 1
    opts = options(switched_off=("broadcast_fusion",))
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 2
    assert any("Add broadcasts an input: broadcast_fusion is off" in r.reason for r in opts.log)


@pytest.mark.parametrize("off", [dict(switched_off=("stitch_fusion",)),
                                 dict(flags="--disable_pass=composite.stitch_fusion")],
                         ids=["fusion_switch_file", "--disable_pass"])
def test_stitch_fusion_off_even_at_opt_level_3(off):
    graph = softmax_graph(row=100000)
    assert kernel_count(fuse_all(graph, options(opt_level=3))[1]) < 5
    opts = options(opt_level=3, **off)
    _, final = fuse_all(graph, opts)
    assert any("stitch fusion is off" in r.reason for r in opts.log)
    assert kernel_count(final) == kernel_count(fuse_all(graph, options(opt_level=2))[1])
