"""SquareSumAll(x, y) -> (sum(x * x), sum(y * y)) as 0-d tensors; float16 squared and summed in float32,
rounded once (MindSpore's square_sum_all expander)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("SquareSumAll")
def expand_square_sum_all(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    out = []
    for x, wide in zip(inputs, b.wide(*inputs)):
        total = b.reduce("ReduceSum", b.op("Mul", wide, wide), (), keep_dims=False) if x.shape else \
            b.op("Mul", wide, wide)
        out.append(b.cast(total, x.dtype))
    return tuple(out)
