"""Square(x) -> Mul(x, x): the same single rounding as the reference `x * x`, for every numeric dtype."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("Square")
def expand_square(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    return (b.op("Mul", x, x),)
