"""ArgMaxWithValue(x) {axis, keep_dims} -> (index, value):

    value = ReduceMax(x, axis)                                   (keep_dims=True, then reshaped if asked)
    hit   = Equal(x, value) or IsNan(x)                          (a NaN is the maximum, as numpy's argmax)
    index = ReduceMin(Select(hit, positions along axis, n), axis)  int64: the first position that hits
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.dtypes import DType
from ir.graph import Node, Value
from ir.ops.math_composites import argmax_positions
from graphkernel.expanders.registry import expands


@expands("ArgMaxWithValue")
def expand_arg_max_with_value(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    index_type, value_type = node.types
    if not x.type.rank:
        return b.fill(0, index_type), b.op("Reshape", x, shape=())
    axis = node.attr("axis")
    value = b.reduce("ReduceMax", x, (axis,))
    hit = b.op("Equal", x, value)
    if x.dtype.is_float:
        hit = b.op("LogicalOr", hit, b.op("IsNan", x))
    position = b.op("Select", hit, argmax_positions(b, x, axis), b.scalar(x.shape[axis], DType.int64))
    index = b.reduce("ReduceMin", position, (axis,))
    if index.shape != index_type.shape:
        index, value = b.op("Reshape", index, shape=index_type.shape), b.op("Reshape", value, shape=value_type.shape)
    return index, value
