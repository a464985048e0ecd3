"""SoftmaxGrad(y, dy, axis) -> y * (dy - ReduceSum(y * dy, axis)), float16 computed in float32:

    dot = ReduceSum(y * dy, axis)       # keep_dims=True: one value per row
    dx  = y * (dy - dot)

One row reduction broadcast back over the row: composite fusion makes it one kernel (the rows variant).
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("SoftmaxGrad")
def expand_softmax_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    y, dy = b.wide(*inputs)
    dot = b.reduce("ReduceSum", b.op("Mul", y, dy), node.attr("axis"))
    return (b.cast(b.op("Mul", y, b.op("Sub", dy, dot)), inputs[0].dtype),)
