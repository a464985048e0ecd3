"""LogSoftmax(x, axis) -> shifted - log(sum(exp(shifted))), shifted = x - max(x): stable for large x.

    shifted = x - ReduceMax(x, axis)                 # keep_dims=True reductions throughout
    out     = shifted - Log(ReduceSum(Exp(shifted), axis))
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("LogSoftmax")
def expand_log_softmax(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    axes = node.attr("axis")
    shifted = b.op("Sub", x, b.reduce("ReduceMax", x, axes))
    log_sum = b.op("Log", b.reduce("ReduceSum", b.op("Exp", shifted), axes))
    return (b.op("Sub", shifted, log_sum),)
