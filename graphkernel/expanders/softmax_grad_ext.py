"""SoftmaxGradExt(x, y, z) {axis} -> (x - ReduceSum(x * y, axis)) * y * z, as MindSpore's expander writes it
(x: the cotangent of a softmax result y; z: a scale broadcast over them):

    total = ReduceSum(x * y, axis)      # keep_dims=True: one value per row
    dx    = ((x - total) * y) * z

One row reduction broadcast back over the row, like SoftmaxGrad: one kernel once fused. float16 is
computed in float32.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("SoftmaxGradExt")
def expand_softmax_grad_ext(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    x, y, z = b.wide(*inputs)
    total = b.reduce("ReduceSum", b.op("Mul", x, y), node.attr("axis"))
    return (b.cast(b.op("Mul", b.op("Mul", b.op("Sub", x, total), y), z), inputs[0].dtype),)
