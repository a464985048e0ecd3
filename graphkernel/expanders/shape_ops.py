"""Squeeze, ExpandDims -> Reshape (a view); Tile -> Reshape, BroadcastTo, Reshape (an index
computation, never a copy of its own); ZerosLike -> a 0 broadcast to x's shape (ir/ops/shape_composites.py)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.shape_composites import tile_plan
from graphkernel.expanders.registry import expands


@expands("Squeeze", "ExpandDims")
def expand_reshape(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    return (x if x.shape == node.out.shape else b.op("Reshape", x, shape=node.out.shape),)


@expands("Tile")
def expand_tile(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    _, interleaved, spread = tile_plan(x.shape, node.attr("multiples"))
    if spread == interleaved:   # every multiple 1
        return expand_reshape(node, inputs, b)
    y = b.op("BroadcastTo", b.op("Reshape", x, shape=interleaved), shape=spread)
    return (b.op("Reshape", y, shape=node.out.shape),)


@expands("ZerosLike")
def expand_zeros_like(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    return (b.fill(0, inputs[0].type),)
