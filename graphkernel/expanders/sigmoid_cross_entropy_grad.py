"""SigmoidCrossEntropyWithLogitsGrad(x, label, dout) -> (sigmoid(x) - label) * dout, float16 computed in
float32 (sigmoid as the Sigmoid expander writes it: 1 / (1 + exp(-x)))."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("SigmoidCrossEntropyWithLogitsGrad")
def expand_sigmoid_cross_entropy_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    x, label, dout = b.wide(*inputs)
    one = b.scalar(1, x)
    sigmoid = b.op("RealDiv", one, b.op("Add", one, b.op("Exp", b.op("Neg", x))))
    return (b.cast(b.op("Mul", b.op("Sub", sigmoid, label), dout), inputs[0].dtype),)
