"""Helpers for kernel tests: graphs built by hand with ir.GraphBuilder, wrapped in a composite, run on the
reference.

    b = GraphBuilder()        # inputs and Python-number constants float32 unless told
    x = b.input((4, 4))
    y = b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0))
    g = b.graph(y)            # top level: one kernel per primitive
    f = fused(g)              # the same work as one Composite node
"""
from __future__ import annotations

import numpy as np

from ir.builder import GraphBuilder
from ir.graph import Graph
from ir.interpret import interpret


def fused(graph: Graph, name: str | None = None) -> Graph:
    """`graph` as one Composite node (every node inside)."""
    outer = GraphBuilder(*(v.type for v in graph.inputs))
    ops = [n.op for n in graph.nodes if n.op != "Const"]
    outputs = outer.composite(graph, *outer.inputs, name=name or "Fused_" + "_".join(dict.fromkeys(ops)) + "_0")
    return outer.graph(*outputs)


def reference(graph: Graph, arrays) -> list[np.ndarray]:
    """The numpy reference results (ir.interpret)."""
    return list(interpret(graph, list(arrays)))


def random_array(shape, dtype="float32", seed=0, low=-2.0, high=2.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 100, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)
