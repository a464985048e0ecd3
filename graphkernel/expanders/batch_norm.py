"""BatchNorm(x, scale, bias, mean, variance) -> (y, batch_mean, batch_variance, reserve_1, reserve_2), as
primitives (only with --enable_expand_ops=BatchNorm: ir/ops/batch_norm.py). With A the axes but the
channel's and [C] vectors reshaped to broadcast along the channel axis:

    training    m  = mean(x, A)                       # keep_dims: the reduce-then-broadcast form
                c  = x - m
                v  = mean(c * c, A)                   # two-pass, as LayerNorm's
                y  = c / sqrt(v + epsilon) * scale + bias
                batch_variance = v * n / (n - 1)
    inference   y  = (x - mean) / sqrt(variance + epsilon) * scale + bias

float16 x is computed in float32; the statistics take scale's dtype.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.batch_norm import count_per_channel, per_channel, reduced_axes
from graphkernel.expanders.registry import expands


@expands("BatchNorm")
def expand_batch_norm(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    x, scale, bias, mean, variance = inputs
    fmt = node.attr("data_format")
    (w,) = b.wide(x)
    shape = per_channel(x.type.rank, fmt, scale.shape[0])

    def channel(v):
        return b.op("Reshape", b.cast(v, w.dtype), shape=shape)

    def vector(v):   # a keep_dims statistic as a [C] vector of scale's dtype
        return b.cast(b.op("Reshape", v, shape=scale.shape), scale.dtype)

    if node.attr("is_training"):
        axes = reduced_axes(x.type.rank, fmt)
        m = b.mean(w, axes)
        centered = b.op("Sub", w, m)
        v = b.mean(b.op("Mul", centered, centered), axes)
        n = count_per_channel(x.shape, fmt)
        unbiased = b.op("Mul", v, b.scalar(n / max(n - 1, 1), v))
        stats = (vector(m), vector(unbiased), vector(m), vector(v))
    else:
        centered = b.op("Sub", w, channel(mean))
        v = channel(variance)
        stats = (mean, variance, mean, variance)
    std = b.op("Sqrt", b.op("Add", v, b.scalar(node.attr("epsilon"), w)))
    y = b.op("Add", b.op("Mul", b.op("Mul", centered, b.op("RealDiv", b.scalar(1, w), std)), channel(scale)),
             channel(bias))
    return (b.cast(y, x.dtype),) + stats
