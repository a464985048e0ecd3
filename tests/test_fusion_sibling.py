"""Sibling fusion: independent kernels reducing the same axes of the same shape become one multi-output
kernel (LayerNormGrad's dgamma and dbeta, bias gradients of one width); anything else is left alone."""
import numpy as np

from fusion_helpers import (composites, fuse_all, fusion_log, interpret, kernel_count, options,
                            random_inputs, t, verify)
from tolerance import assert_close
from graphkernel.passes.sibling_fusion import signature, sibling_fusion
from ir import GraphBuilder
from kernels import DeviceConfig, lower


def same_values(before, after):
    arrays = random_inputs(before, seed=3)
    for got, want in zip(interpret(after, arrays), interpret(before, arrays)):
        assert_close(got, want)
    program = lower(after, DeviceConfig())
    for got, want in zip(program.run(arrays), interpret(before, arrays)):
        assert_close(got, want)


def column_siblings(rows=256, cols=64):
    g = GraphBuilder(t(rows, cols), t(rows, cols))
    dy, xhat = g.inputs
    dgamma = g.op("ReduceSum", g.op("Mul", dy, xhat), axis=(0,), keep_dims=True)
    dbeta = g.op("ReduceSum", dy, axis=(0,), keep_dims=True)
    return g.graph(dgamma, dbeta)


def test_sibling_reductions_become_one_multi_output_kernel():
    graph = column_siblings()
    opts = options()
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 2
    out = sibling_fusion(final, opts)
    verify(out)
    assert kernel_count(out) == 1
    (comp,) = composites(out)
    assert len(comp.outputs) == 2
    assert any(r.accepted and r.reason.startswith("sibling") for r in fusion_log())
    same_values(graph, out)
    assert [k.variant for k in lower(out, DeviceConfig()).kernels] == ["columns"]


def test_different_axes_or_shapes_are_not_siblings():
    g = GraphBuilder(t(16, 64), t(16, 32))
    x, y = g.inputs
    rows = g.op("ReduceSum", x, axis=(1,), keep_dims=True)
    cols = g.op("ReduceSum", x, axis=(0,), keep_dims=True)
    other = g.op("ReduceSum", y, axis=(0,), keep_dims=True)
    graph = g.graph(rows, cols, other)
    opts = options()
    out = sibling_fusion(graph, opts)
    assert kernel_count(out) == 3 and not fusion_log()
    assert signature(rows.node) == ((16, 64), (1,)) and signature(cols.node) == ((16, 64), (0,))


def test_dependent_reductions_are_refused():
    g = GraphBuilder(t(16, 64))
    (x,) = g.inputs
    first = g.op("ReduceSum", x, axis=(0,), keep_dims=True)
    second = g.op("ReduceSum", g.op("Mul", x, first), axis=(0,), keep_dims=True)
    graph = g.graph(first, second)
    opts = options("--disable_pass=composite.composite_fusion")
    out = sibling_fusion(graph, opts)
    verify(out)
    (record,) = fusion_log()
    assert not record.accepted and "cycle" in record.reason   # first -> Mul -> second: merging would loop
    assert kernel_count(out) == 3
    same_values(graph, out)


def test_the_pipeline_runs_it_at_opt_level_2_and_not_at_1():
    from graphkernel.compiler import compile_graph
    graph = column_siblings()
    assert compile_graph(graph, options(), eager=True).kernel_count == 1
    assert compile_graph(graph, options(opt_level=1), eager=True).kernel_count == 2
    assert compile_graph(graph, options("--disable_pass=composite.sibling_fusion"), eager=True).kernel_count == 2
