"""Common subexpression elimination: two nodes computing the same thing become one.

    key(node) = (op, inputs after merging, attrs, result types, subgraph's structural key)
    walking in order, a node whose key was seen is dropped and its results map to the first node's

Exact: nodes are pure and deterministic, so equal op, equal inputs and equal attributes give equal results.
Consts merge when their literals are equal (dtype, shape and bytes: 0.0 and -0.0 stay apart). Two composites
merge only when their subgraphs are structurally equal. Host ops (Pattern.HOST) are never merged: running on
the host they may be there for their effect (a print, a data dump), not only their value.
"""
from __future__ import annotations

from ir.graph import Graph, Node, Value
from ir.ops import Pattern, pattern_of
from graphkernel.settings.options import CompileOptions


def cse_key(node: Node, inputs: tuple[Value, ...]) -> tuple | None:
    """What makes two nodes interchangeable, or None when the node must never be merged."""
    if node.op == "Input" or pattern_of(node) == Pattern.HOST:
        return None
    sub = node.subgraph.key() if node.subgraph is not None else None
    return (node.op, inputs, node.attrs, node.types, sub)


def cse(graph: Graph, opts: CompileOptions) -> Graph:
    """The graph with each distinct computation done once (the first occurrence keeps its name)."""
    seen: dict[tuple, Node] = {}

    def visit(node: Node, inputs: tuple[Value, ...], emit):
        key = cse_key(node, inputs)
        if key is None:
            return None
        first = seen.get(key)
        if first is not None:
            return first.outputs
        kept = node if inputs == node.inputs else node.replace(inputs=inputs)
        seen[key] = kept
        return kept

    return graph.rewrite(visit)
