"""SigmoidGrad(y, dy) -> dy * y * (1 - y) (y is Sigmoid's result), float16 computed in float32."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("SigmoidGrad")
def expand_sigmoid_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    y, dy = b.wide(*inputs)
    return (b.cast(b.op("Mul", b.op("Mul", dy, y), b.op("Sub", b.scalar(1, y), y)), inputs[0].dtype),)
