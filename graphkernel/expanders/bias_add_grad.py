"""BiasAddGrad(dout, data_format) -> ReduceSum over every axis but the channel axis (1 for NCHW, the last
for NHWC), kept as a keep_dims reduction reshaped to (C,): a reduction a fused kernel can end with. float16
accumulates in float32 (the registry's ReduceSum)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from ir.ops.composite import bias_axis
from graphkernel.expanders.registry import expands


@expands("BiasAddGrad")
def expand_bias_add_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (d,) = inputs
    channel = bias_axis(d.type.rank, node.attr("data_format"))
    total = b.reduce("ReduceSum", d, tuple(i for i in range(d.type.rank) if i != channel))
    return (b.op("Reshape", total, shape=node.out.shape),)
