"""Sigmoid(x) -> 1 / (1 + exp(-x)), in the reference's order of operations (so the same roundings).

For very negative x, exp(-x) overflows to inf and the result is 1 / inf = 0, as in the reference.
"""
from __future__ import annotations

from ir.graph import Node, Value
from graphkernel.expanders.emitter import Emitter


def expand_sigmoid(node: Node, inputs: tuple[Value, ...], emit) -> tuple[Value, ...]:
    b = Emitter(node, emit)
    (x,) = inputs
    one = b.scalar(1, x)
    denominator = b.op("Add", one, b.op("Exp", b.op("Neg", x)))
    return (b.op("RealDiv", one, denominator),)
