"""FastGeLUGrad(dy, x) -> dy * d/dx [x * sigmoid(1.702 x)], written with e = exp(-1.702 |x|) <= 1:

    dx = dy * (e + 1.702 x e + exp(1.702 (x - |x|))) / (1 + e)^2

Elementwise; float16 is computed in float32 and rounded once.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.mindspore_composites import fast_gelu_grad_ops
from graphkernel.expanders.registry import expands


@expands("FastGeLUGrad")
def expand_fast_gelu_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    dy, x = b.wide(*inputs)
    return (b.cast(fast_gelu_grad_ops(b, dy, x), inputs[0].dtype),)
