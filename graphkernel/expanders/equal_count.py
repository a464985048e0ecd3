"""EqualCount(x, y) -> [the number of equal elements], shape (1,), in x's dtype: Equal, Cast to int32, a
sum (exact below 2**31 elements), Cast to x's dtype."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.dtypes import DType
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("EqualCount")
def expand_equal_count(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    x, y = inputs
    ones = b.op("Cast", b.op("Equal", x, y), dtype=DType.int32)
    total = b.reduce("ReduceSum", ones, (), keep_dims=False) if x.shape else ones
    return (b.op("Reshape", b.cast(total, x.dtype), shape=(1,)),)
