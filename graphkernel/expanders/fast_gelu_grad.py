"""FastGeLUGrad(dy, x) -> dy * d/dx [x * sigmoid(1.702 x)], written with e = exp(-1.702 |x|) <= 1:

    dx = dy * (e + 1.702 x e + exp(1.702 (x - |x|))) / (1 + e)^2

Elementwise; float16 is computed in float32 and rounded once.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.mindspore_composites import FAST_GELU_COEF
from graphkernel.expanders.registry import expands


@expands("FastGeLUGrad")
def expand_fast_gelu_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    dy, x = b.wide(*inputs)
    c = b.scalar(FAST_GELU_COEF, x)
    ax = b.op("Abs", x)
    e = b.op("Exp", b.op("Mul", b.op("Neg", c), ax))
    numerator = b.op("Add", b.op("Add", e, b.op("Mul", b.op("Mul", c, x), e)),
                     b.op("Exp", b.op("Mul", c, b.op("Sub", x, ax))))
    one_plus_e = b.op("Add", b.scalar(1, x), e)
    slope = b.op("RealDiv", numerator, b.op("Mul", one_plus_e, one_plus_e))
    return (b.cast(b.op("Mul", dy, slope), inputs[0].dtype),)
