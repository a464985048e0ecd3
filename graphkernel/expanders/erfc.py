"""Erfc(x) -> 1 - erf(x), float16 computed in float32 (MindSpore's erfc expander)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("Erfc")
def expand_erfc(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = b.wide(*inputs)
    return (b.cast(b.op("Sub", b.scalar(1, x), b.op("Erf", x)), inputs[0].dtype),)
