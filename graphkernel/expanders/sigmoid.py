"""Sigmoid(x) -> 1 / (1 + exp(-x)), in the reference's order of operations (so the same roundings).

For very negative x, exp(-x) overflows to inf and the result is 1 / inf = 0, as in the reference.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("Sigmoid")
def expand_sigmoid(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    one = b.scalar(1, x)
    denominator = b.op("Add", one, b.op("Exp", b.op("Neg", x)))
    return (b.op("RealDiv", one, denominator),)
