"""OnesLike(x) -> a 1 of x's dtype broadcast to x's shape (no data read from x)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("OnesLike")
def expand_ones_like(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    return (b.fill(1, inputs[0].type),)
