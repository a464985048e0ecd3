"""Flatten and AdaptiveAvgPool2D, the two composite ops around convolutional networks' pooling
(ir/ops/pool.py), rewritten into primitives.

    Flatten(x)                 Reshape(x, (N, prod(rest)))                               (a view)
    AdaptiveAvgPool2D(x)       output (1, 1): ReduceMean over the last two axes, keep_dims (global pooling)
                               bins that tile the axes evenly (n % o == 0 on both): ReduceMean over the
                               windows of a Reshape [.., oh, h/oh, ow, w/ow]
                               otherwise: Mh x Mw^T per channel, two BatchMatMuls with the constant bin
                               matrices (ir/ops/pool.py bins): overlapping bins, each a mean of its own size
"""
from __future__ import annotations

import math

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.pool import bins
from graphkernel.expanders.registry import expands


@expands("Flatten")
def expand_flatten(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    return (b.op("Reshape", inputs[0], shape=node.out.shape),)


@expands("AdaptiveAvgPool2D")
def expand_adaptive_avg_pool(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    lead, (h, w) = x.shape[:-2], x.shape[-2:]
    oh, ow = node.out.shape[-2:]
    rank = len(x.shape)
    if h % oh == 0 and w % ow == 0:
        tiles = b.op("Reshape", x, shape=lead + (oh, h // oh, ow, w // ow))
        mean = b.mean(tiles, (rank - 1, rank + 1))
        return (b.op("Reshape", mean, shape=node.out.shape),)
    rows = math.prod(lead)
    mh = b.const(bins(h, oh).reshape(1, oh, h).astype(x.dtype.np), x.dtype)
    mw = b.const(bins(w, ow).T.reshape(1, w, ow).astype(x.dtype.np), x.dtype)
    flat = b.op("Reshape", x, shape=(rows, h, w))
    out = b.op("BatchMatMul", b.op("BatchMatMul", mh, flat), mw)
    return (b.op("Reshape", out, shape=node.out.shape),)
