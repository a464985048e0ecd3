"""Softsign(x) -> x / (1 + |x|), float16 computed in float32."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("Softsign")
def expand_softsign(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = b.wide(*inputs)
    return (b.cast(b.op("RealDiv", x, b.op("Add", b.scalar(1, x), b.op("Abs", x))), inputs[0].dtype),)
