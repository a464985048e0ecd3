"""ReluGrad(dy, x) -> Select(x > 0, dy, 0): exact in any dtype."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("ReluGrad")
def expand_relu_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    dy, x = inputs
    zero = b.scalar(0, x)
    return (b.op("Select", b.op("Greater", x, zero), dy, b.scalar(0, dy)),)
