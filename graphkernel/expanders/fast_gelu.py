"""FastGeLU(x) = x * sigmoid(1.702 x), in the reference's form and order, so no exp overflows:

    fast_gelu = x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))

float16 is computed in float32 and rounded once.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.mindspore_composites import FAST_GELU_COEF
from graphkernel.expanders.registry import expands


@expands("FastGeLU")
def expand_fast_gelu(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = b.wide(*inputs)
    ax = b.op("Abs", x)
    denom = b.op("Add", b.scalar(1, x), b.op("Exp", b.op("Mul", b.scalar(-FAST_GELU_COEF, x), ax)))
    tail = b.op("Exp", b.op("Mul", b.scalar(FAST_GELU_COEF / 2, x), b.op("Sub", x, ax)))
    return (b.cast(b.op("Mul", b.op("RealDiv", x, denom), tail), inputs[0].dtype),)
