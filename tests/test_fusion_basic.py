"""Basic and composite fusion on the fusion example's nets and small graphs: what is fused, names, dumps' clusters."""
import importlib

import numpy as np
import pytest

from ir import GraphBuilder
from fusion_helpers import (fusion_log, composites, fuse_all, interpret, kernel_count, ops_of, options,
                            random_inputs, t)
from tolerance import assert_close
from graphkernel.passes.basic_fusion import basic_fusion
from kernels import DeviceConfig, KernelBuildWarning, lower


def net_basic_fuse():
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    return g.graph(g.op("Add", g.op("Mul", x, g.const(2.0)), g.const(1.0)))


def net_composite_fuse():
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    return g.graph(g.op("Pow", g.op("Add", g.op("Mul", x, g.const(2.0)), g.const(1.0)), g.const(3.0)))


def test_net_basic_fuse_is_one_composite_after_basic_fusion():
    basic, final = fuse_all(net_basic_fuse(), options())
    (comp,) = composites(basic)
    assert ops_of(comp) == ["Mul", "Add"]
    assert comp.name == "Fused_Mul_Add_0"
    assert kernel_count(basic) == kernel_count(final) == 1
    # the scalar Consts went into the composite
    assert [n.op for n in basic.nodes] == ["Composite"]
    assert sorted(n.op for n in comp.subgraph.nodes) == ["Add", "Const", "Const", "Mul"]


def test_net_composite_fuse_pow_joins_in_composite_fusion():
    basic, final = fuse_all(net_composite_fuse(), options())
    assert [ops_of(c) for c in composites(basic)] == [["Mul", "Add"]]
    assert [n.op for n in basic.nodes if n.op != "Const"] == ["Composite", "Pow"]
    (comp,) = composites(final)
    assert ops_of(comp) == ["Mul", "Add", "Pow"]
    assert comp.name == "Fused_Mul_Add_Pow_0"
    assert kernel_count(final) == 1


@pytest.mark.parametrize("make", [net_basic_fuse, net_composite_fuse])
def test_fused_equals_unfused(make):
    graph = make()
    _, final = fuse_all(graph, options())
    arrays = random_inputs(graph)
    for fused, ref in zip(interpret(final, arrays), interpret(graph, arrays)):
        assert_close(fused, ref, bitwise=True)


def test_basic_fusion_leaves_non_basic_ops_alone_and_logs_why():
    g = GraphBuilder(t(8, 8))
    (x,) = g.inputs
    y = g.op("Exp", g.op("Neg", x))
    opts = options()
    out = basic_fusion(g.graph(y), opts)
    assert [n.op for n in out.nodes] == ["Neg", "Exp"]
    (record,) = fusion_log()
    assert not record.accepted and "Exp is not an op of basic fusion" in record.reason


def test_multi_output_composite_when_a_value_is_used_outside():
    g = GraphBuilder(t(8, 8))
    (x,) = g.inputs
    a = g.op("Mul", x, g.const(2.0))
    b = g.op("Add", a, g.const(1.0))
    graph = g.graph(b, g.op("Exp", a))
    basic, final = fuse_all(graph, options())
    (comp,) = composites(basic)
    assert len(comp.outputs) == 2  # a is read by Exp outside, b is a graph output
    arrays = random_inputs(graph)
    for fused, ref in zip(interpret(final, arrays), interpret(graph, arrays)):
        assert_close(fused, ref)


def test_diamond_through_matmul_is_split_not_cyclic():
    # a -> MatMul -> c and a -> c: putting a and c together would need the MatMul inside
    g = GraphBuilder(t(16, 16), t(16, 16))
    x, w = g.inputs
    a = g.op("Mul", x, g.const(2.0))
    m = g.op("MatMul", a, w)
    c = g.op("Add", m, a)
    graph = g.graph(c)
    opts = options()
    basic, final = fuse_all(graph, opts)
    assert [n.op for n in final.nodes if n.op != "Const"] == ["Mul", "MatMul", "Add"]
    reasons = [r.reason for r in fusion_log() if not r.accepted]
    assert any("cycle" in r for r in reasons)
    assert any("MatMul is OPAQUE" in r for r in reasons)
    arrays = random_inputs(graph)
    assert_close(interpret(final, arrays)[0], interpret(graph, arrays)[0])


def test_a_composite_whose_kernel_fails_to_build_runs_as_its_primitives(monkeypatch):
    """The lowering inlines such a composite back into single-op kernels (kernels/lower.py): the same
    kernels, so the same bits, as the unfused graph."""
    graph = net_composite_fuse()
    _, final = fuse_all(graph, options())
    (comp,) = composites(final)
    lowering = importlib.import_module("kernels.launch")   # where every generated kernel is rendered
    real = lowering.render

    def render(spec, variant):
        if len(spec.op_names) > 1:
            raise RuntimeError("injected build failure")
        return real(spec, variant)
    monkeypatch.setattr(lowering, "render", render)
    with pytest.warns(KernelBuildWarning, match=f"kernel of {comp.name} .*inlined into single-op kernels"):
        program = lower(final, DeviceConfig(cache_mode="disable"))
    assert [k.op_types for k in program.kernels] == [("Mul",), ("Add",), ("Pow",)]
    arrays = random_inputs(graph)
    unfused = lower(graph, DeviceConfig(cache_mode="disable")).run(arrays)
    assert_close(program.run(arrays)[0], unfused[0], bitwise=True)


def test_composites_numbered_in_graph_order():
    g = GraphBuilder(t(8, 8), t(8, 8))
    x, y = g.inputs
    a = g.op("Add", g.op("Mul", x, g.const(2.0)), g.const(1.0))
    b = g.op("Sub", g.op("Mul", y, g.const(3.0)), g.const(1.0))
    graph = g.graph(a, b)
    basic = basic_fusion(graph, options())
    assert [c.name for c in composites(basic)] == ["Fused_Mul_Add_0", "Fused_Mul_Sub_1"]


def test_fusion_is_deterministic():
    graph = net_composite_fuse()
    one = fuse_all(graph, options())[1]
    two = fuse_all(graph, options())[1]
    assert one == two and [n.name for n in one.nodes] == [n.name for n in two.nodes]


def test_non_scalar_consts_stay_outside_as_inputs():
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    table = g.op("Const", value=np.arange(4, dtype=np.float32))
    graph = g.graph(g.op("Add", g.op("Mul", x, table), g.const(1.0)))
    basic, _ = fuse_all(graph, options())
    (comp,) = composites(basic)
    assert comp.inputs[1].node.op == "Const" and comp.inputs[1].shape == (4,)
    assert all(n.out.type.size == 1 for n in comp.subgraph.nodes if n.op == "Const")
    arrays = random_inputs(graph)
    assert_close(interpret(basic, arrays)[0], interpret(graph, arrays)[0], bitwise=True)
