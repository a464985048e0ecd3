"""`interpret(graph, arrays)`: the numpy reference interpreter, the oracle every kernel is checked against.

Runs the nodes in order with each op's numpy reference (`ir.ops.evaluate`); a composite runs by
interpreting its subgraph, an If by interpreting the branch its condition selects; Gradient nodes are
differentiated away first (ir/autodiff.py). The last use of every value is computed once up front and a
value is dropped right after it, so peak memory follows the graph's live set, not its size. The caller's
arrays are never written (nodes see read-only views of them) and the results are always fresh,
writable arrays, even when an output is an input or a constant. numpy floating-point warnings are
silenced: NaN and Inf propagate as numpy computes them. A failing node raises ExecutionError,
"While executing <op> (<name>): ...", chained to the original error.

`interpret(graph, arrays, observer)` shows each node it runs, as it completes, to
`observer.node(node, inputs, outputs, seconds)` (as kernels.Program.run shows its launches to
`observer.kernel(...)`): the nodes of the graph and of the branch each If takes, an If itself not (its
branch's nodes are shown), a composite as one node. The arrays are the ones the run holds (inputs
read-only): an observer reads or copies them while it is called. graphkernel's profiler, data dump and
overflow check see the CPU target's launches this way.

`reference_values(graph, arrays, wanted)` runs the same way and also hands back the arrays of chosen
values at any depth, inside composites included: what each kernel of a lowered graph should compute
(graphkernel.tools.debug.compare).
"""
from __future__ import annotations

import time
from typing import Iterable, Sequence

import numpy as np

from ir.autodiff import differentiate, needs_autodiff
from ir.errors import DTypeError, ExecutionError, IRError, ShapeError
from ir.graph import Graph, Value
from ir.ops import branches, evaluate
from ir.ops.control import IF
from ir.printer import describe, quote


def _check_arrays(graph: Graph, arrays: Sequence, where: str = "") -> list[np.ndarray]:
    """The arrays as read-only views, after checking their number, shapes and dtypes."""
    if len(arrays) != len(graph.inputs):
        raise IRError(f"{where}graph takes {len(graph.inputs)} input(s), got {len(arrays)}")
    views = []
    for i, (v, a) in enumerate(zip(graph.inputs, arrays)):
        arr = np.asarray(a)
        label = f"{where}input {i}" + (f" ({quote(v.node.name)[1:-1][:200]})" if v.node.name else "")
        if arr.dtype != v.dtype.np:
            raise DTypeError(f"{label}: expected {v.type} ({v.dtype}), got an array of dtype {arr.dtype}")
        if arr.shape != v.shape:
            raise ShapeError(f"{label}: expected {v.type}, got an array of shape {arr.shape}")
        view = arr.view()
        view.flags.writeable = False
        views.append(view)
    return views


def _last_uses(graph: Graph) -> list[list[Value]]:
    """For each node position, the values to drop after it runs (graph outputs are kept)."""
    last: dict[Value, int] = {}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            last[v] = i
    drops: list[list[Value]] = [[] for _ in graph.nodes]
    keep = set(graph.outputs)
    for v, i in last.items():
        if v not in keep:
            drops[i].append(v)
    return drops


def _run(graph: Graph, arrays: list[np.ndarray], record: dict | None = None, observer=None) -> list[np.ndarray]:
    """The outputs of `graph`; with `record` ({value: None} for the values asked for), every asked-for
    value of `graph` and of its composites' subgraphs is stored into it as it is computed; with
    `observer`, each node of `graph` and of the branches taken is shown to it (module docstring)."""
    drops = _last_uses(graph)
    wanted = {v for node in graph.nodes for v in node.inputs} | set(graph.outputs)
    if record is not None:
        record.update((v, a) for v, a in zip(graph.inputs, arrays) if v in record)
    env: dict[Value, np.ndarray] = {v: a for v, a in zip(graph.inputs, arrays) if v in wanted}
    del arrays
    for i, node in enumerate(graph.nodes):
        try:
            args = [env[v] for v in node.inputs]
        except KeyError:
            raise ExecutionError(f"While executing {describe(node)}: it reads a value not computed before it "
                                 "(ir.verify tells which)") from None
        start = time.perf_counter() if observer is not None else 0.0
        try:
            if node.subgraph is not None:
                results = _run(node.subgraph, _check_arrays(node.subgraph, args, "subgraph "), record)
            elif node.op == IF:   # only the branch taken runs
                branch = branches(node)[0 if args[0].reshape(-1)[0] else 1]
                results = _run(branch, _check_arrays(branch, args[1:], "branch "), record, observer)
            else:
                results = evaluate(node, args)
            if len(results) != len(node.outputs):
                raise IRError(f"gave {len(results)} result(s), the node has {len(node.outputs)}")
        except Exception as e:
            cause = str(e) if isinstance(e, ExecutionError) else f"{type(e).__name__}: {e}"
            raise ExecutionError(f"While executing {describe(node)}: {cause}") from e
        if observer is not None and node.op != IF:
            observer.node(node, args, results, time.perf_counter() - start)
        del args
        for v, r in zip(node.outputs, results):
            if v in wanted:
                env[v] = r
            if record is not None and v in record:
                record[v] = _read_only(r)
        del results
        for v in drops[i]:
            env.pop(v, None)
    try:
        return [env[v] for v in graph.outputs]
    except KeyError:
        raise ExecutionError("a graph output is not computed by the graph (ir.verify tells which)") from None


def interpret(graph: Graph, arrays: Sequence, observer=None) -> list[np.ndarray]:
    """The graph's outputs for the given input arrays, computed by the numpy references (a graph that
    asks for gradients is differentiated first, as the pipeline does); `observer` is shown every node
    run (module docstring)."""
    if needs_autodiff(graph):
        graph = differentiate(graph)
    views = _check_arrays(graph, list(arrays))
    with np.errstate(all="ignore"):
        results = _run(graph, views, None, observer)
    del views
    out, seen = [], set()
    for r in results:
        if not (r.flags.writeable and r.flags.owndata) or id(r) in seen:
            r = r.copy()
        seen.add(id(r))
        out.append(r)
    return out


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


def reference_values(graph: Graph, arrays: Sequence, wanted: Iterable[Value]) -> dict[Value, np.ndarray]:
    """The reference arrays of the `wanted` values: inputs of `graph`, results of its nodes, or values
    inside the subgraphs of its composites, computed as `interpret` computes them. The arrays are
    read-only (the caller's inputs are handed back as read-only views). All of them are alive at once:
    peak memory is their sum. A value `graph` does not compute raises IRError."""
    record: dict[Value, np.ndarray | None] = dict.fromkeys(wanted)
    views = _check_arrays(graph, list(arrays))
    with np.errstate(all="ignore"):
        _run(graph, views, record)
    missing = [v for v, a in record.items() if a is None]
    if missing:
        raise IRError(f"{len(missing)} wanted value(s) are not computed by the graph (the first comes from "
                      f"{describe(missing[0].node)})")
    return record
