"""BiasAdd(x, bias, data_format) -> Add(x, bias reshaped to broadcast along the channel axis).

    NCHW, rank r:  Add(x, Reshape(bias, (C, 1, ..., 1)))   # r - 2 trailing ones: channel axis 1
    NHWC (or r < 2): Add(x, bias)                          # the channel is the last axis: numpy broadcasting

The Reshape only inserts size-1 dims, so it is a view; the Add broadcasts the bias over the other axes.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.composite import bias_axis
from graphkernel.expanders.registry import expands


@expands("BiasAdd")
def expand_bias_add(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    x, bias = inputs
    trailing = x.type.rank - 1 - bias_axis(x.type.rank, node.attr("data_format"))
    if trailing:
        bias = b.op("Reshape", bias, shape=bias.shape + (1,) * trailing)
    return (b.op("Add", x, bias),)
