"""MaximumGrad / MinimumGrad(x1, x2, grads) {grad_x, grad_y} -> (dx1, dx2): grads to x1 where it wins or
ties (x1 >= x2 for Maximum, x1 <= x2 for Minimum), the rest to x2, each summed down to its input's shape;
a result not asked for is zeros. float16 computed in float32."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


def _expander(loses: str):
    def expand(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
        x1, x2, grads = b.wide(*inputs)
        dtype = inputs[0].dtype
        wins = b.op("LogicalNot", b.op(loses, x1, x2))
        dx1 = b.op("Select", wins, grads, b.scalar(0, grads))
        dx2 = b.op("Sub", grads, dx1)
        return (b.cast(b.sum_to(dx1, x1.shape), dtype) if node.attr("grad_x") else b.fill(0, inputs[0].type),
                b.cast(b.sum_to(dx2, x2.shape), dtype) if node.attr("grad_y") else b.fill(0, inputs[1].type))
    return expand


expand_maximum_grad = expands("MaximumGrad")(_expander("Less"))
expand_minimum_grad = expands("MinimumGrad")(_expander("Greater"))
