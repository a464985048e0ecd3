"""LogSoftmaxGrad(y, dy, axis) -> dy - Exp(y) * ReduceSum(dy, axis) (y is LogSoftmax's result, so Exp(y) is
the softmax), float16 computed in float32. One row reduction broadcast back: one kernel when fused.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("LogSoftmaxGrad")
def expand_log_softmax_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    y, dy = b.wide(*inputs)
    total = b.reduce("ReduceSum", dy, node.attr("axis"))
    return (b.cast(b.op("Sub", dy, b.op("Mul", b.op("Exp", y), total)), inputs[0].dtype),)
