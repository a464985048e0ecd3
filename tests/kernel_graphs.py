"""Helpers for kernel tests: build IR graphs by hand, wrap them in a composite, run the reference.

    b = Builder()
    x = b.input((4, 4))
    y = b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0))
    g = b.graph(y)            # top level: one kernel per primitive
    f = fused(g)              # the same work as one Composite node
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import as_dtype
from ir.graph import Graph, Node, TensorType, Value
from ir.interpret import interpret
from ir.ops import make_node


class Builder:
    def __init__(self, dtype="float32"):
        self.dtype = as_dtype(dtype)
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []

    def input(self, shape, dtype=None) -> Value:
        (v,) = Graph.with_inputs([TensorType(tuple(shape), as_dtype(dtype or self.dtype))])
        self.inputs.append(v)
        return v

    def const(self, value, dtype=None) -> Value:
        return self.op("Const", value=np.asarray(value, dtype=as_dtype(dtype or self.dtype).np))

    def op(self, name: str, *inputs: Value, **attrs) -> Value:
        node = make_node(name, inputs, attrs)
        self.nodes.append(node)
        return node.out

    def graph(self, *outputs: Value) -> Graph:
        return Graph(self.inputs, self.nodes, outputs)


def fused(graph: Graph, name: str | None = None) -> Graph:
    """`graph` as one Composite node (every node inside)."""
    outer = Graph.with_inputs([v.type for v in graph.inputs])
    ops = [n.op for n in graph.nodes if n.op != "Const"]
    node = Node("Composite", outer, (), tuple(v.type for v in graph.outputs),
                name or "Fused_" + "_".join(dict.fromkeys(ops)) + "_0", graph)
    return Graph(outer, [node], node.outputs)


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
    return rng.uniform(low, high, size=shape).astype(dtype)
