"""The cost model: its figures, and the fusions it must refuse, each with the reason it logs."""
import pytest

from ir import GraphBuilder
from fusion_helpers import fusion_log, F16, composites, fuse_all, kernel_count, options, softmax, t
from graphkernel.passes.cost_model import estimate, score
from graphkernel.passes.fusion_utils import build_composite
from kernels import aicore


def subgraph_of(graph):
    node, _ = build_composite(list(graph.nodes), set(graph.outputs))
    return node.subgraph


def _chain(*shape):
    g = GraphBuilder(t(*shape))
    (x,) = g.inputs
    return g.graph(g.op("Add", g.op("Mul", x, g.const(2.0)), g.const(1.0)))


def test_estimate_of_an_elementwise_kernel():
    g = GraphBuilder(t(256, 1024))
    (x,) = g.inputs
    sub = subgraph_of(g.graph(g.op("Add", g.op("Mul", x, g.const(2.0)), g.const(1.0))))
    est = estimate(sub, 32)
    assert est.bytes == 2 * 256 * 1024 * 4          # read x once, write the result once
    assert est.ops == 2 * 256 * 1024
    assert est.block_dim == aicore.block_dim_for(256 * 1024, 32)
    assert est.block_dim > 1 and est.threads == 1  # 256K points: the blocks run in turn on one thread
    big = estimate(subgraph_of(_chain(4096, 1024)), 32)
    assert big.threads == min(big.block_dim, aicore.host_threads())
    assert est.ub_bytes <= aicore.UB_BYTES and est.fits_ub
    assert est.seconds > aicore.LAUNCH_SECONDS


def test_launch_cost_dominates_tiny_kernels_so_fusing_them_pays():
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    mul = g.op("Mul", x, g.const(2.0))
    graph = g.graph(g.op("Add", mul, g.const(1.0)))
    fused = estimate(subgraph_of(graph), 32)
    a, _ = build_composite([graph.nodes[1]], {mul})
    b, _ = build_composite([graph.nodes[3]], set(graph.outputs))
    parts = [estimate(a.subgraph, 32), estimate(b.subgraph, 32)]
    assert score(parts, fused) == pytest.approx(aicore.LAUNCH_SECONDS, rel=0.2)


def test_fewer_cores_give_fewer_blocks():
    g = GraphBuilder(t(1024, 1024))
    (x,) = g.inputs
    sub = subgraph_of(g.graph(g.op("Neg", x)))
    assert estimate(sub, 32).block_dim == 32
    assert estimate(sub, 4).block_dim == 4


def test_float16_reduce_sum_runs_with_block_dim_1():
    g = GraphBuilder(t(256, 1024, dtype=F16))
    (x,) = g.inputs
    est = estimate(subgraph_of(g.graph(g.op("ReduceSum", x, axis=(1,), keep_dims=True))), 32)
    assert est.block_dim == 1 and est.single_core and est.threads == 1


def test_refuses_multi_core_elementwise_into_a_float16_reduce_sum():
    # 2M points: the elementwise part is worth a launch over every host thread (aicore.launch_threads)
    g = GraphBuilder(t(2048, 1024, dtype=F16))
    (x,) = g.inputs
    y = g.op("Exp", g.op("Mul", x, g.const(0.5, F16)))
    graph = g.graph(g.op("ReduceSum", y, axis=(1,), keep_dims=True))
    opts = options()
    _, final = fuse_all(graph, opts)
    assert [n.op for n in final.nodes] == ["Composite", "ReduceSum"]
    (record,) = [r for r in fusion_log() if r.stage == "composite" and not r.accepted]
    assert "block_dim 1" in record.reason and "float16 ReduceSum" in record.reason
    assert record.figures["fused_block_dim"] == 1 and record.figures["saved_us"] < 0
    # the same graph in float32 fuses into one kernel
    g = GraphBuilder(t(2048, 1024))
    (x,) = g.inputs
    y = g.op("Exp", g.op("Mul", x, g.const(0.5)))
    assert kernel_count(fuse_all(g.graph(g.op("ReduceSum", y, axis=(1,), keep_dims=True)), options())[1]) == 1


def test_refuses_a_reduce_then_broadcast_row_larger_than_the_ub():
    g = GraphBuilder(t(2, 100000))
    graph = g.graph(softmax(g, g.inputs[0]))
    opts = options()
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) > 1
    overflow = [r for r in fusion_log() if "UB" in r.reason and not r.accepted]
    assert overflow
    assert all(r.figures["fused_ub_bytes"] > aicore.UB_BYTES for r in overflow)
    assert "stitch fusion is off" in overflow[0].reason
    # a 1024 row fits: one kernel
    g = GraphBuilder(t(2, 1024))
    assert kernel_count(fuse_all(g.graph(softmax(g, g.inputs[0])), options())[1]) == 1


def test_refuses_a_fusion_past_composite_op_limit_size():
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    y = g.op("Neg", g.op("Abs", g.op("Neg", x)))
    opts = options("--composite_op_limit_size=2")
    _, final = fuse_all(g.graph(y), opts)
    assert kernel_count(final) == 2
    assert any(not r.accepted and r.reason == "3 ops exceed composite_op_limit_size=2" for r in fusion_log())


def test_refuses_a_broadcast_into_a_reduction_that_recomputes_a_large_input():
    g = GraphBuilder(t(64, 1, 1024), t(64, 128, 1024))
    x, z = g.inputs
    big = g.op("BroadcastTo", g.op("Exp", g.op("Tanh", g.op("Exp", x))), shape=(64, 128, 1024))
    graph = g.graph(g.op("ReduceSum", g.op("Mul", big, z), axis=(2,), keep_dims=True))
    opts = options()
    _, final = fuse_all(graph, opts)
    # the producer stays apart; the BroadcastTo went into the reduction
    assert [n.op for n in final.nodes] == ["Composite", "Composite"]
    assert [n.op for n in final.nodes[1].subgraph.nodes if n.op != "Const"] == ["BroadcastTo", "Mul", "ReduceSum"]
    refused = [r for r in fusion_log() if not r.accepted and r.stage == "composite"]
    assert refused and all("recomputes its producer x128" in r.reason for r in refused)
    assert all(r.figures["saved_us"] < 0 for r in refused)


def test_stitch_fusion_allows_rows_larger_than_the_ub_and_counts_the_rereads():
    g = GraphBuilder(t(2, 100000))
    (x,) = g.inputs
    graph = g.graph(g.op("Sub", x, g.op("ReduceMax", x, axis=(1,), keep_dims=True)))
    opts = options()
    assert kernel_count(fuse_all(graph, opts)[1]) == 2
    stitched = options("--enable_stitch_fusion")
    _, final = fuse_all(graph, stitched)
    assert kernel_count(final) == 1
    (comp,) = composites(final)
    est = estimate(comp.subgraph, 32)
    assert not est.fits_ub and est.bytes == 3 * 2 * 100000 * 4  # x read in both phases, out written
    assert kernel_count(fuse_all(graph, options(opt_level=3))[1]) == 1


def test_fusion_log_carries_the_figures():
    g = GraphBuilder(t(8, 8))
    (x,) = g.inputs
    opts = options()
    fuse_all(g.graph(g.op("Add", g.op("Mul", x, g.const(2.0)), g.const(1.0))), opts)
    (record,) = fusion_log()
    assert record.accepted
    for key in ("fused_us", "fused_bytes", "fused_ops", "fused_block_dim", "fused_ub_bytes", "parts_us",
                "saved_us"):
        assert key in record.figures
    assert "saved_us=" in str(record)
