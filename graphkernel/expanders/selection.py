"""Argmax -> ArgMaxWithValue's index (expanded in turn), cast to output_type; OneHot -> Select(Equal(
indices with a size-1 axis at axis, 0..depth-1 along it), on_value, off_value): one elementwise kernel
(ir/ops/selection.py). AddN -> a chain of Adds from the left."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.selection import one_hot_shape, positions
from graphkernel.expanders.registry import expands


@expands("Argmax")
def expand_argmax(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    index, _ = b.ops("ArgMaxWithValue", inputs[0], axis=node.attr("axis"), keep_dims=False)
    return (b.cast(index, node.out.dtype),)


@expands("OneHot")
def expand_one_hot(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    indices, on, off = inputs
    axis, depth = node.attr("axis"), node.attr("depth")
    kept = one_hot_shape(indices.shape, 1, axis)
    ids = indices if indices.shape == kept else b.op("Reshape", indices, shape=kept)
    hit = b.op("Equal", ids, b.const(positions(depth, len(kept), axis), indices.dtype))
    on, off = (v if v.shape == () else b.op("Reshape", v, shape=()) for v in (on, off))
    out = b.op("Select", hit, on, off)
    return (out if out.shape == node.out.shape else b.op("BroadcastTo", out, shape=node.out.shape),)


@expands("AddN")
def expand_add_n(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    total = inputs[0]
    for x in inputs[1:]:
        total = b.op("Add", total, x)
    return (total,)
