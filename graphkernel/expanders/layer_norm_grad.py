"""LayerNormGrad(x, dy, variance, mean, gamma) -> (dx, dgamma, dbeta), float16 computed in float32:

    rstd   = Rsqrt(variance + epsilon)                    # one per row (the stats keep the norm axes as 1)
    xhat   = (x - mean) * rstd
    g      = dy * gamma                                   # gamma broadcasts from the right
    dx     = rstd * (g - mean(g, norm) - xhat * mean(g * xhat, norm))        # row reductions
    dgamma = ReduceSum(dy * xhat, lead)                   # column reductions over the axes before
    dbeta  = ReduceSum(dy, lead)                          #   begin_params_axis, reshaped to gamma's shape

Fused: dx along the rows in one kernel, dgamma and dbeta (same reduction axes) in another.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("LayerNormGrad")
def expand_layer_norm_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    x, dy, variance, mean, gamma = b.wide(*inputs)
    norm = tuple(range(node.attr("begin_norm_axis"), x.type.rank))
    lead = tuple(range(node.attr("begin_params_axis")))
    rstd = b.op("Rsqrt", b.op("Add", variance, b.scalar(node.attr("epsilon"), variance)))
    xhat = b.op("Mul", b.op("Sub", x, mean), rstd)
    g = b.op("Mul", dy, gamma)
    dx = b.op("Mul", rstd, b.op("Sub", b.op("Sub", g, b.mean(g, norm)),
                                b.op("Mul", xhat, b.mean(b.op("Mul", g, xhat), norm))))
    dgamma, dbeta = b.op("Mul", dy, xhat), dy
    if lead:
        dgamma, dbeta = b.reduce("ReduceSum", dgamma, lead), b.reduce("ReduceSum", dbeta, lead)
    shape, dtype = inputs[4].shape, inputs[0].dtype
    dgamma, dbeta = (v if v.shape == shape else b.op("Reshape", v, shape=shape) for v in (dgamma, dbeta))
    return tuple(b.cast(v, dtype) for v in (dx, dgamma, dbeta))
