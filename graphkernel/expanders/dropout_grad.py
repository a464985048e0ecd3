"""DropoutGrad(dy, mask) {keep_prob} -> dy * mask * (1 / keep_prob), float16 computed in float32."""
from __future__ import annotations

import numpy as np

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("DropoutGrad")
def expand_dropout_grad(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    dy, mask = b.wide(*inputs)
    scale = b.scalar(float(np.float32(1 / node.attr("keep_prob")).astype(dy.dtype.np)), dy)
    return (b.cast(b.op("Mul", b.op("Mul", dy, mask), scale), inputs[0].dtype),)
