"""Softmax(x, axis) -> the numerically stable form, each reduction keep_dims=True:

    shifted = x - ReduceMax(x, axis)        # the largest exponent becomes exp(0) = 1: no overflow
    e       = Exp(shifted)
    out     = e / ReduceSum(e, axis)        # float16: the sum accumulates in float32 (registry ReduceSum)

The "reduce then broadcast back" shape composite fusion fuses when a row fits the UB.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("Softmax")
def expand_softmax(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    axes = node.attr("axis")
    shifted = b.op("Sub", x, b.reduce("ReduceMax", x, axes))
    e = b.op("Exp", shifted)
    return (b.op("RealDiv", e, b.reduce("ReduceSum", e, axes)),)
