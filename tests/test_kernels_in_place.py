"""Parameter updates written in place (kernels/in_place.py): the plan, the kernels that store a result
through the input they read, and every case the plan tells apart, each against the numpy reference.

The plan distinguishes: whether the producer reads the Parameter (directly or through a Reshape view),
whether anything reads the old value after it, whether the Parameter or the new value is also a graph
output, whether the new value is another Assign's (a swap), and what computes it (a composite, a
single-op kernel, a reduction, a MatMul). The kernel distinguishes the dtype (float16 as uint16 bits),
broadcast inputs and how many results are stored through inputs. The grid below crosses them all.
"""
from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest

from ir.builder import GraphBuilder
from ir.dtypes import DType
from ir.graph import Graph
from ir.interpret import interpret
from kernels import DeviceConfig, KernelBuildWarning, lower
from kernels.in_place import plan_in_place
from kernel_graphs import random_array
from tolerance import assert_close

pytestmark = pytest.mark.filterwarnings("error::kernels.KernelBuildWarning")

SHAPE = (6, 10)
PRODUCERS = ("composite", "single", "reduce", "matmul")


def build(producer="composite", dtype="float32", reads=True, view=False, later=False, ref_out=False,
          value_out=False, swap=False, params=2, broadcast=True, fuse=True):
    """Parameters p0..p{params-1} updated from x (and a broadcast row r): returns (graph, expected set of
    parameter indices written in place)."""
    dt = DType[dtype]
    b = GraphBuilder()
    shape = (10, 10) if producer == "matmul" else ((6, 1) if producer == "reduce" else SHAPE)
    ps = [b.input(shape, dtype=dt, name=f"p{j}") for j in range(params)]
    x = b.input(SHAPE if producer != "matmul" else (10, 10), dtype=dt, name="x")
    row = b.input((1, shape[1]), dtype=dt, name="r")
    old_read = [b.op("Reshape", p, shape=shape) if view else p for p in ps]
    if producer == "matmul":
        news = [b.op("MatMul", x, old_read[j] if reads else x) for j in range(params)]
    elif producer == "reduce":   # a reduction kernel: reading the Parameter, it cannot write it in place
        news = [_reduce(b, x, old_read[j] if reads else None) for j in range(params)]
    else:
        news = _elementwise(b, old_read, x, row, reads, broadcast, fuse and producer == "composite")
    outputs = []
    if later:
        outputs += [b.reduce("ReduceSum", p, (0, 1), keep_dims=False) for p in ps]
    if ref_out:
        outputs.append(ps[0])
    if value_out:
        outputs.append(news[0])
    if swap:
        news = [ps[1], ps[0]] + list(news[2:])
    outputs.append(b.reduce("ReduceSum", x, (0, 1), keep_dims=False))
    assigns = [b.op("Assign", p, n) for p, n in zip(ps, news)]
    graph = b.graph(*outputs, *assigns)
    refused = later or swap or (reads and producer in ("reduce", "matmul"))
    expected = {j for j in range(params) if not refused and not (ref_out and j == 0)
                and not (value_out and j == 0)}
    return graph, expected


def _reduce(b, x, old):
    """ReduceSum(x * old, axis 1) fused into one reduction kernel; ReduceSum(x * 0.5) without old."""
    if old is None:
        return b.reduce("ReduceSum", b.op("Mul", x, b.scalar(0.5, x)), (1,))
    inner = GraphBuilder(x.type, old.type)
    ix, iold = inner.inputs
    (out,) = b.composite(inner.graph(inner.reduce("ReduceSum", inner.op("Mul", ix, iold), (1,))), x, old,
                         name="Fused_Mul_ReduceSum_0")
    return out


def _elementwise(b, olds, x, row, reads, broadcast, fuse):
    """new_j = [old_j +] (x * (j+1) [+ r]): one composite for all, or single ops (whose last, the Add of
    old_j, is then the single-op kernel that reads the Parameter)."""
    def update(builder, old, x_, row_, j):
        t = builder.op("Mul", x_, builder.scalar(j + 1.0, x_))
        t = builder.op("Add", t, row_) if broadcast else t
        return builder.op("Add", old, t) if reads else t
    if not fuse:
        return [update(b, old, x, row, j) for j, old in enumerate(olds)]
    count = len(olds)
    olds = olds if reads else []      # a composite reads what it computes with, nothing more
    inner = GraphBuilder(*(v.type for v in [*olds, x, row]))
    *iolds, ix, irow = inner.inputs
    results = [update(inner, iolds[j] if reads else None, ix, irow, j) for j in range(count)]
    return list(b.composite(inner.graph(*results), *olds, x, row, name="Fused_update_0"))


def arrays_for(graph, seed=0):
    return [random_array(v.shape, v.dtype.np, seed=seed + k) for k, v in enumerate(graph.inputs)]


def check(graph, expected, steps=2):
    """Run `steps` calls; each call's results and updated inputs equal the reference's; the launches
    stored through an input and the Assign copies are the ones `expected` says."""
    program = lower(graph, DeviceConfig())
    arrays = arrays_for(graph)
    want = [a.copy() for a in arrays]
    pointers = [a.ctypes.data for a in arrays]
    assigned = [(k, i) for k, v in enumerate(graph.outputs) if v.node.op == "Assign"
                for i in [graph.inputs.index(v.node.inputs[0])]]
    n_results = len(graph.outputs) - len(assigned)
    for _ in range(steps):
        ref = interpret(graph, want)
        got = program.run(arrays)
        for k in range(n_results):
            assert_close(got[k], ref[k], rtol_scale=4, err_msg=f"result {k}")
        for k, i in assigned:
            want[i] = ref[k]
            assert_close(arrays[i], ref[k], rtol_scale=4, err_msg=f"input {i} after the call")
    assert [a.ctypes.data for a in arrays] == pointers
    copies = [s for s in program.steps if s.info.op_types == ("Assign",)
              and program.storages[s.outs[0]].kind == "input"]
    assert len(copies) == len(assigned) - len(expected), [s.info.name for s in program.steps]
    return program


GRID = list(itertools.product(PRODUCERS, (True, False), (False, True), (False, True), (False, True),
                              (False, True)))


@pytest.mark.parametrize("producer, reads, view, later, ref_out, value_out", GRID)
def test_plan_and_results_across_the_grid(producer, reads, view, later, ref_out, value_out):
    graph, expected = build(producer, reads=reads, view=view, later=later, ref_out=ref_out,
                            value_out=value_out)
    plan = plan_in_place(graph, _kernel_graph)
    got = {graph.inputs.index(ref) for ref in plan.values()}
    assert got == expected
    program = check(graph, expected)
    for step in program.steps:
        if step.in_place:   # stored through an input: an elementwise kernel reading that Parameter
            assert step.info.variant == "elementwise" and reads and producer in ("composite", "single")
            for k, i in step.in_place:
                assert step.outs[k] == step.ins[i]


@pytest.mark.grid
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("params, broadcast", [(1, False), (1, True), (3, True)])
def test_kernel_storing_through_inputs(dtype, params, broadcast):
    """One composite stores every new value through the Parameter it reads (in_place pairs), for each
    dtype and with a broadcast operand; fused equals unfused bit for bit."""
    graph, expected = build("composite", dtype, params=params, broadcast=broadcast)
    program = check(graph, expected)
    (kernel,) = [s for s in program.steps if len(s.info.op_types) > 1]
    assert sorted(kernel.in_place) == [(j, j) for j in range(params)]
    assert "stored into" in kernel.info.source
    unfused_graph, _ = build("single", dtype, params=params, broadcast=broadcast, fuse=False)
    fused, unfused = lower(graph), lower(unfused_graph)
    a, b = arrays_for(graph), arrays_for(unfused_graph)
    fused.run(a)
    unfused.run(b)
    for k in range(params):
        assert_close(a[k], b[k], bitwise=dtype not in ("float16", "bfloat16"))


def test_swap_of_two_parameters_copies():
    graph, expected = build("composite", swap=True)
    assert expected == set()
    check(graph, expected)


def test_run_step_of_an_in_place_kernel_returns_its_results_and_writes_nothing():
    """Kernel-by-kernel debugging feeds a step copies: the result stored through an input comes back
    as the step's output, the caller's arrays untouched."""
    graph, _ = build("composite", params=2)
    program = lower(graph, DeviceConfig(cache_mode="disable"))
    index, step = next((k, s) for k, s in enumerate(program.steps) if s.in_place)
    inputs = [random_array(v.shape, v.dtype.np, seed=k) for k, v in enumerate(step.values_in)]
    kept = [a.copy() for a in inputs]
    outs = program.run_step(index, inputs)
    node = step.values_out[0].node
    want = interpret(Graph(node.subgraph.inputs, node.subgraph.nodes, node.subgraph.outputs), inputs)
    for o, w in zip(outs, want):
        assert_close(o, w)
    for a, k in zip(inputs, kept):
        assert_close(a, k, bitwise=True)


def test_build_failure_of_an_in_place_composite_runs_the_reference(monkeypatch):
    """Inlined into single-op kernels, the first would overwrite the Parameter the others still read:
    such a composite runs on the reference, which reads everything before it writes."""
    graph, expected = build("composite", params=2)
    lowering = importlib.import_module("kernels.launch")   # where every generated kernel is rendered
    real = lowering.render

    def render(spec, variant):
        if spec.in_place:
            raise RuntimeError("injected build failure")
        return real(spec, variant)
    monkeypatch.setattr(lowering, "render", render)
    with pytest.warns(KernelBuildWarning, match="Fused_update_0 failed to build .*numpy reference"):
        program = check(graph, expected)
    assert [s.info.variant for s in program.steps if s.values_out and s.values_out[0].node.subgraph] == \
        ["reference"]


def _kernel_graph(node):
    return importlib.import_module("kernels.lower")._Builder.kernel_graph(node)
