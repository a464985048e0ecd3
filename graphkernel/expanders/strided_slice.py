"""StridedSlice(x) -> Slice(x) over every axis (left out when it takes everything), then a Reshape
where the shapes differ (new axes, shrunk axes): a StridedSlice that only inserts or drops size-1
axes is a Reshape, a view (ir/ops/strided_slice.py resolves the masks)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.strided_slice import resolve
from graphkernel.expanders.registry import expands


@expands("StridedSlice")
def expand_strided_slice(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    r = resolve(x.shape, node.attr_dict)
    if r.begin != (0,) * len(x.shape) or r.end != x.shape or r.strides != (1,) * len(x.shape):
        x = b.op("Slice", x, begin=r.begin, end=r.end, strides=r.strides)
    return (x if x.shape == r.shape else b.op("Reshape", x, shape=r.shape),)
