"""GeLUGrad(dy, x, y) -> dy * GeLU'(x), the tanh form's derivative (y, GeLU's result, is not needed):

    u  = sqrt(2/pi) * (x + 0.044715 x^3)
    t  = tanh(u)
    dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2))

Elementwise: it fuses with the bias gradient that usually follows (a ReduceSum over the leading axes).
float16 is computed in float32.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.composite import GELU_COEF, SQRT_2_OVER_PI
from graphkernel.expanders.registry import expands


@expands("GeLUGrad")
def expand_gelu_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    dy, x, _ = b.wide(*inputs)
    square = b.op("Mul", x, x)
    # u exactly as graphkernel/expanders/gelu.py computes it, op for op: common-subexpression elimination
    # then shares one tanh between GeLU and its gradient (a training step computes it once, not twice)
    cube = b.op("Mul", square, x)
    u = b.op("Mul", b.scalar(SQRT_2_OVER_PI, x), b.op("Add", x, b.op("Mul", b.scalar(GELU_COEF, x), cube)))
    t = b.op("Tanh", u)
    half_one_plus_t = b.op("Mul", b.scalar(0.5, x), b.op("Add", b.scalar(1, x), t))
    slope = b.op("Add", b.scalar(1, x), b.op("Mul", square, b.scalar(3 * GELU_COEF, x)))
    tail = b.op("Mul", b.op("Mul", b.scalar(0.5 * SQRT_2_OVER_PI, x), x),
                b.op("Mul", b.op("Sub", b.scalar(1, x), b.op("Mul", t, t)), slope))
    return (b.cast(b.op("Mul", dy, b.op("Add", half_one_plus_t, tail)), inputs[0].dtype),)
