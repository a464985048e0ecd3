"""SquaredDifference(x, y) -> (x - y) * (x - y), numpy broadcasting."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("SquaredDifference")
def expand_squared_difference(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    x, y = inputs
    d = b.op("Sub", x, y)
    return (b.op("Mul", d, d),)
