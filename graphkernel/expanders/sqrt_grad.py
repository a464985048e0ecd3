"""SqrtGrad(y, dy) -> dy / (2 * y) (y is Sqrt's result), float16 computed in float32."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("SqrtGrad")
def expand_sqrt_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    y, dy = b.wide(*inputs)
    return (b.cast(b.op("RealDiv", dy, b.op("Mul", b.scalar(2, y), y)), inputs[0].dtype),)
