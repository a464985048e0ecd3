"""BatchNormGrad(dy, x, scale, saved_mean, saved_variance, reserve) -> (dx, dscale, dbias), as primitives
(only with --enable_expand_ops=BatchNormGrad: ir/ops/batch_norm.py). With A the axes but the channel's,
n the count per channel and [C] vectors reshaped to broadcast along the channel axis:

    rstd   = 1 / sqrt(saved_variance + epsilon)
    xhat   = (x - saved_mean) * rstd
    dbias  = sum(dy, A)
    dscale = sum(dy * xhat, A)
    dx     = scale * rstd * (dy - dbias / n - xhat * dscale / n)     (training)
           = scale * rstd * dy                                     (inference)

float16 is computed in float32.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.batch_norm import count_per_channel, per_channel, reduced_axes
from graphkernel.expanders.registry import expands


@expands("BatchNormGrad")
def expand_batch_norm_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    dy, x, scale, mean, variance, _ = inputs
    fmt = node.attr("data_format")
    wdy, wx = b.wide(dy, x)
    axes = reduced_axes(x.type.rank, fmt)
    shape = per_channel(x.type.rank, fmt, scale.shape[0])

    def channel(v):
        return b.op("Reshape", b.cast(v, wx.dtype), shape=shape)

    def vector(v):
        return b.cast(b.op("Reshape", v, shape=scale.shape), scale.dtype)

    rstd = b.op("RealDiv", b.scalar(1, wx), b.op("Sqrt", b.op("Add", channel(variance),
                                                               b.scalar(node.attr("epsilon"), wx))))
    xhat = b.op("Mul", b.op("Sub", wx, channel(mean)), rstd)
    dbias = b.reduce("ReduceSum", wdy, axes)
    dscale = b.reduce("ReduceSum", b.op("Mul", wdy, xhat), axes)
    g = b.op("Mul", channel(scale), rstd)
    if node.attr("is_training"):
        n = count_per_channel(x.shape, fmt)
        inner = b.op("Sub", b.op("Sub", wdy, b.op("RealDiv", dbias, b.scalar(n, wx))),
                     b.op("Mul", xhat, b.op("RealDiv", dscale, b.scalar(n, wx))))
        dx = b.op("Mul", g, inner)
    else:
        dx = b.op("Mul", g, wdy)
    return b.cast(dx, x.dtype), vector(dscale), vector(dbias)
