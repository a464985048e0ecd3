"""ReduceMean(x, axis, keep_dims) -> ReduceSum(keep_dims=True) / count, then a Reshape when keep_dims=False.

    mean = RealDiv(ReduceSum(x, axis, keep_dims=True), Const(count))     # float16: in float32, one rounding
    out  = mean                               if keep_dims
           Reshape(mean, shape=out.shape)     otherwise (the reduced axes dropped; a Reshape is a view)

Dividing by the count (not multiplying by its reciprocal) rounds as numpy's mean does; arith_simplify turns
the divide into a multiply when the count is a power of two, where that is exact.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("ReduceMean")
def expand_reduce_mean(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    mean = b.mean(x, node.attr("axis"))
    if not node.attr("keep_dims"):
        mean = b.op("Reshape", mean, shape=node.out.shape)
    return (mean,)
