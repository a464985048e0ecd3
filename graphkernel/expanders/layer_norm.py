"""LayerNorm(x, gamma, beta) -> (y, mean, variance) over the axes begin_norm_axis.. of x:

    mean     = mean(x, axes)                          # keep_dims=True: MindSpore's shapes (x.shape[:b] + 1s)
    centered = x - mean
    variance = mean(centered * centered, axes)        # two-pass: no cancellation of E[x^2] - E[x]^2
    y        = centered / sqrt(variance + epsilon) * gamma + beta

gamma and beta have shape x.shape[begin_params_axis:] and broadcast from the right. The means round as the
registry's ReduceMean (float16 sums and divides in float32); dividing by the square root (rather than
multiplying by Rsqrt) keeps the reference's roundings.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("LayerNorm")
def expand_layer_norm(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    x, gamma, beta = inputs
    axes = tuple(range(node.attr("begin_norm_axis"), x.type.rank))
    mean = b.mean(x, axes)
    centered = b.op("Sub", x, mean)
    variance = b.mean(b.op("Mul", centered, centered), axes)
    std = b.op("Sqrt", b.op("Add", variance, b.scalar(node.attr("epsilon"), x)))
    y = b.op("Add", b.op("Mul", b.op("RealDiv", centered, std), gamma), beta)
    return (y, mean, variance)
