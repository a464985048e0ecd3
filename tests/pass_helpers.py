"""Helpers for the expander and simplify tests: build graphs with make_node, run them on the reference.

    g = GraphBuilder(f32(4, 8)); x, = g.inputs
    y = g.op("Mul", x, g.const(2.0)); graph = g.graph(y)
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.graph import Graph, Literal, TensorType, Value
from ir.ops import evaluate, make_node

F16, F32, F64, I32, I64 = DType.float16, DType.float32, DType.float64, DType.int32, DType.int64


def tt(dtype: DType, *shape: int) -> TensorType:
    return TensorType(tuple(shape), dtype)


class GraphBuilder:
    def __init__(self, *types: TensorType):
        self.inputs = Graph.with_inputs(types)
        self.nodes = []

    def op(self, name: str, *inputs: Value, **attrs):
        node = make_node(name, inputs, attrs)
        self.nodes.append(node)
        return node.outputs[0] if len(node.outputs) == 1 else node.outputs

    def const(self, value, dtype: DType = F32) -> Value:
        return self.op("Const", value=Literal(np.asarray(value, dtype=dtype.np)))

    def graph(self, *outputs: Value) -> Graph:
        return Graph(self.inputs, self.nodes, outputs)


def interpret(graph: Graph, arrays) -> list[np.ndarray]:
    """ir.interpret once it exists; until then a loop over the registry's references."""
    try:
        from ir.interpret import interpret as ir_interpret
    except ImportError:
        ir_interpret = None
    if ir_interpret is not None:
        return list(ir_interpret(graph, list(arrays)))
    env = dict(zip(graph.inputs, arrays))
    for node in graph.nodes:
        args = [env[v] for v in node.inputs]
        results = interpret(node.subgraph, args) if node.subgraph is not None else evaluate(node, args)
        env.update(zip(node.outputs, results))
    return [env[v] for v in graph.outputs]


def verify(graph: Graph) -> None:
    """ir.verify once it exists; until then the checks a rewrite can break: use before def, types."""
    try:
        from ir.verify import verify as ir_verify
    except ImportError:
        ir_verify = None
    if ir_verify is not None:
        ir_verify(graph)
        return
    defined = set(graph.inputs)
    for node in graph.nodes:
        assert all(v in defined for v in node.inputs), f"{node} reads a value not yet defined"
        if node.subgraph is None and node.op != "Input":
            remade = make_node(node.op, node.inputs, node.attr_dict)
            assert remade.types == node.types, f"{node}: types {node.types} != inferred {remade.types}"
        defined.update(node.outputs)
    assert all(v in defined for v in graph.outputs), "an output is not defined"


def random_inputs(graph: Graph, seed: int = 0, positive: bool = False) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for v in graph.inputs:
        a = rng.standard_normal(v.shape)
        arrays.append((np.abs(a) + 0.5 if positive else a).astype(v.dtype.np))
    return arrays


def ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]
