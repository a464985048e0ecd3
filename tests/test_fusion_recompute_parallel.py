"""Recompute fusion (opt_level >= 2) and parallel fusion (opt_level 3): what they change, what they refuse."""

from ir import GraphBuilder
from fusion_helpers import (fusion_log, composites, fuse_all, interpret, kernel_count, ops_of, options,
                            random_inputs, t, verify)
from tolerance import assert_close
from graphkernel.passes.parallel_fusion import parallel_fusion
from graphkernel.passes.recompute import recompute
from kernels import aicore


def two_reductions(producer_op: str, shape=(256, 1024)):
    """h = producer(x), read by reductions over different axes (they cannot share a kernel)."""
    g = GraphBuilder(t(*shape))
    (x,) = g.inputs
    h = g.op(producer_op, x, g.const(2.0)) if producer_op == "Mul" else g.op(producer_op, x)
    return g.graph(g.op("ReduceSum", h, axis=(0,)), g.op("ReduceSum", h, axis=(1,)))


def same_values(graph, fused):
    arrays = random_inputs(graph)
    for got, want in zip(interpret(fused, arrays), interpret(graph, arrays)):
        assert_close(got, want)


def test_composite_fusion_makes_the_shared_value_an_extra_output():
    graph = two_reductions("Mul")
    _, final = fuse_all(graph, options())
    first = composites(final)[0]
    assert ops_of(first) == ["Mul", "ReduceSum"] and len(first.outputs) == 2
    same_values(graph, final)


def test_recompute_duplicates_a_cheap_producer_when_memory_bound(monkeypatch):
    monkeypatch.setattr(aicore, "OPS_PER_SECOND_PER_THREAD", 48e9)  # compute faster than memory
    graph = two_reductions("Mul")
    opts = options()
    _, final = fuse_all(graph, opts)
    out = recompute(final, opts)
    verify(out)
    assert kernel_count(out) == 2
    assert [ops_of(c) for c in composites(out)] == [["Mul", "ReduceSum"], ["Mul", "ReduceSum"]]
    assert all(len(c.outputs) == 1 for c in composites(out))
    (record,) = [r for r in fusion_log() if "recompute" in r.reason]
    assert record.accepted and record.figures["saved_us"] > 0
    same_values(graph, out)


def test_recompute_duplicates_the_same_slice_in_every_layer(monkeypatch):
    """Layers of one structure each get the recompute (a refusal is remembered by structure, an
    acceptance is not), all in one round: the acceptances touch disjoint nodes."""
    monkeypatch.setattr(aicore, "OPS_PER_SECOND_PER_THREAD", 48e9)  # compute faster than memory
    layers = 3
    g = GraphBuilder(*[t(256, 1024) for _ in range(layers)])
    outs = []
    for x in g.inputs:
        h = g.op("Mul", x, g.const(2.0))
        outs += [g.op("ReduceSum", h, axis=(0,)), g.op("ReduceSum", h, axis=(1,))]
    graph = g.graph(*outs)
    opts = options()
    _, final = fuse_all(graph, opts)
    out = recompute(final, opts)
    verify(out)
    assert kernel_count(out) == 2 * layers
    assert all(len(c.outputs) == 1 for c in composites(out))
    records = [r for r in fusion_log() if "recompute" in r.reason]
    assert len(records) == layers and all(r.accepted for r in records)
    assert len({c for r in records for c in r.composites}) == layers   # each names its own reader
    same_values(graph, out)


def test_recompute_refuses_an_expensive_slice_and_logs_why():
    graph = two_reductions("Exp")
    opts = options()
    _, final = fuse_all(graph, opts)
    out = recompute(final, opts)
    assert out == final
    (record,) = [r for r in fusion_log() if "recompute" in r.reason]
    assert not record.accepted and record.figures["saved_us"] < 0
    assert "costs more than the write and reads it saves" in record.reason


def test_recompute_never_duplicates_a_reduction():
    g = GraphBuilder(t(8, 64))
    (x,) = g.inputs
    s = g.op("ReduceSum", x, axis=(1,), keep_dims=True)
    graph = g.graph(g.op("Mul", s, g.const(2.0)), g.op("ReduceMax", g.op("Sub", x, s), axis=(0,)))
    opts = options()
    _, final = fuse_all(graph, opts)
    out = recompute(final, opts)
    verify(out)
    assert kernel_count(out) == kernel_count(final)
    same_values(graph, out)


def small_independent_pair():
    g = GraphBuilder(t(16, 64))
    (x,) = g.inputs
    y1 = g.op("Add", g.op("Mul", x, g.const(2.0)), g.const(1.0))
    y2 = g.op("Mul", g.op("Exp", x), g.const(3.0))
    return g.graph(y1, y2)


def test_parallel_fusion_merges_independent_small_kernels_reading_one_input():
    graph = small_independent_pair()
    opts = options(opt_level=3)
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 2
    out = parallel_fusion(final, opts)
    verify(out)
    assert kernel_count(out) == 1
    (comp,) = composites(out)
    assert len(comp.outputs) == 2
    assert any(r.accepted and r.reason.startswith("parallel") for r in fusion_log())
    same_values(graph, out)


def test_parallel_fusion_refuses_large_kernels():
    g = GraphBuilder(t(1024, 1024))
    (x,) = g.inputs
    graph = g.graph(g.op("ReduceSum", x, axis=(1,)), g.op("ReduceMax", x, axis=(1,)))
    opts = options(opt_level=3)
    out = parallel_fusion(graph, opts)
    assert kernel_count(out) == 2
    (record,) = fusion_log()
    assert not record.accepted and "is not small" in record.reason


def test_parallel_fusion_merges_elementwise_kernels_of_any_size():
    g = GraphBuilder(t(1024, 1024))
    (x,) = g.inputs
    graph = g.graph(g.op("Exp", x), g.op("Tanh", x))
    opts = options(opt_level=3)
    out = parallel_fusion(graph, opts)
    verify(out)
    assert kernel_count(out) == 1
    same_values(graph, out)


def test_parallel_fusion_refuses_kernels_of_different_iteration_shapes():
    """Readers of one value are paired within a result shape; two reductions of one result shape over
    different axes are still not one kernel."""
    g = GraphBuilder(t(16, 16))
    (x,) = g.inputs
    graph = g.graph(g.op("Exp", x), g.op("ReduceSum", x, axis=(1,)), g.op("ReduceSum", x, axis=(0,)))
    opts = options(opt_level=3)
    out = parallel_fusion(graph, opts)
    verify(out)
    assert any(not r.accepted and "not one kernel" in r.reason for r in fusion_log())
    assert not any(r.accepted for r in fusion_log())
    assert kernel_count(out) == 3
    same_values(graph, out)


def test_parallel_fusion_merges_same_shape_readers_past_other_shapes():
    """The first reader of the shared value has another shape: the same-shape readers still merge
    (an optimizer's bias updates, all reading the learning rate after a weight's update)."""
    g = GraphBuilder(t(), t(8, 4), t(4), t(4))
    lr, w, b1, b2 = g.inputs
    graph = g.graph(g.op("Sub", w, g.op("Mul", w, lr)), g.op("Sub", b1, g.op("Mul", b1, lr)),
                    g.op("Sub", b2, g.op("Mul", b2, lr)))
    opts = options(opt_level=3)
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 3
    out = parallel_fusion(final, opts)
    verify(out)
    assert kernel_count(out) == 2
    same_values(graph, out)


def test_parallel_fusion_refuses_dependent_kernels():
    g = GraphBuilder(t(16, 64))
    (x,) = g.inputs
    a = g.op("Exp", x)
    graph = g.graph(g.op("Add", a, x))
    opts = options(opt_level=3)
    out = parallel_fusion(graph, opts)
    assert kernel_count(out) == 2
    assert any("not independent" in r.reason for r in fusion_log())


def test_recompute_leaves_values_read_by_dead_nodes_alone():
    g = GraphBuilder(t(4, 8))
    (x,) = g.inputs
    a = g.op("Neg", x)
    b = g.op("Add", x, a)
    c = g.op("Neg", a)
    g.op("Neg", b)  # dead: no output depends on it
    graph = g.graph(g.op("Neg", b), c)
    opts = options("--composite_op_limit_size=3")
    _, final = fuse_all(graph, opts)
    out = recompute(final, opts)
    verify(out)
    same_values(graph, out)


def test_parallel_parts_are_timed_back_to_back():
    """Each update alone fits the cache (24 MB), the pair does not (48 MB): apart they still stream all
    48 MB one after the other, so merging them is no slower and saves a launch (an optimizer's updates)."""
    g = GraphBuilder(t(), t(2048, 1024), t(2048, 1024), t(2048, 1024), t(2048, 1024))
    s, a1, b1, a2, b2 = g.inputs
    graph = g.graph(g.op("Add", g.op("Mul", a1, s), b1), g.op("Add", g.op("Mul", a2, s), b2))
    opts = options(opt_level=3)
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 2
    out = parallel_fusion(final, opts)
    verify(out)
    assert kernel_count(out) == 1
    same_values(graph, out)
