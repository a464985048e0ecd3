"""Square(x) -> Mul(x, x): the same single rounding as the reference `x * x`, for every numeric dtype."""
from __future__ import annotations

from ir.graph import Node, Value
from graphkernel.expanders.emitter import Emitter


def expand_square(node: Node, inputs: tuple[Value, ...], emit) -> tuple[Value, ...]:
    b = Emitter(node, emit)
    (x,) = inputs
    return (b.op("Mul", x, x),)
