"""TanhGrad(y, dy) -> dy * (1 - y * y) (y is Tanh's result), float16 computed in float32."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("TanhGrad")
def expand_tanh_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    y, dy = b.wide(*inputs)
    return (b.cast(b.op("Mul", dy, b.op("Sub", b.scalar(1, y), b.op("Mul", y, y))), inputs[0].dtype),)
