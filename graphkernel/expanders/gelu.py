"""GeLU(x), the tanh form BERT uses, as primitives in the reference's order of operations:

    inner = sqrt(2/pi) * (x + 0.044715 * (x * x * x))
    gelu  = (0.5 * x) * (1 + tanh(inner))

Each step is one primitive with one rounding, exactly as the numpy reference (ir/ops/composite.py) rounds.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.composite import GELU_COEF, SQRT_2_OVER_PI
from graphkernel.expanders.registry import expands


@expands("GeLU")
def expand_gelu(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    cube = b.op("Mul", b.op("Mul", x, x), x)
    inner = b.op("Mul", b.scalar(SQRT_2_OVER_PI, x), b.op("Add", x, b.op("Mul", b.scalar(GELU_COEF, x), cube)))
    one_plus_tanh = b.op("Add", b.scalar(1, x), b.op("Tanh", inner))
    half_x = b.op("Mul", b.scalar(0.5, x), x)
    return (b.op("Mul", half_x, one_plus_tanh),)
