"""SigmoidCrossEntropyWithLogits(x, label) -> max(x, 0) - x * label + log(1 + exp(-|x|)), float16 computed
in float32 (the stable form: exp of a non-positive number)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("SigmoidCrossEntropyWithLogits")
def expand_sigmoid_cross_entropy(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    x, label = b.wide(*inputs)
    zero, one = b.scalar(0, x), b.scalar(1, x)
    soft = b.op("Log", b.op("Add", one, b.op("Exp", b.op("Neg", b.op("Abs", x)))))
    loss = b.op("Add", b.op("Sub", b.op("Maximum", x, zero), b.op("Mul", x, label)), soft)
    return (b.cast(loss, inputs[0].dtype),)
