"""SoftmaxCrossEntropyWithLogits(logits, labels) -> (loss, backprop), logits and labels [N, C], float16
computed in float32:

    shifted  = logits - ReduceMax(logits, 1)
    log_sm   = shifted - Log(ReduceSum(Exp(shifted), 1))
    loss     = -ReduceSum(labels * log_sm, 1)           [N]
    backprop = Exp(log_sm) - labels                     [N, C]
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


def log_softmax_rows(b: GraphBuilder, z: Value) -> Value:
    shifted = b.op("Sub", z, b.reduce("ReduceMax", z, (1,)))
    return b.op("Sub", shifted, b.op("Log", b.reduce("ReduceSum", b.op("Exp", shifted), (1,))))


@expands("SoftmaxCrossEntropyWithLogits")
def expand_softmax_cross_entropy(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    z, labels = b.wide(*inputs)
    dtype = inputs[0].dtype
    log_sm = log_softmax_rows(b, z)
    loss = b.op("Neg", b.reduce("ReduceSum", b.op("Mul", labels, log_sm), (1,), keep_dims=False))
    return b.cast(loss, dtype), b.cast(b.op("Sub", b.op("Exp", log_sm), labels), dtype)
