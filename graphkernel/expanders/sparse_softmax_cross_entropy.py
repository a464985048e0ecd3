"""SparseSoftmaxCrossEntropyWithLogits(logits, labels) {is_grad}, logits [N, C], labels [N] class ids,
float16 computed in float32:

    one_hot = Cast(Equal(Reshape(labels, [N, 1]), Const(arange(C))[1, C]))
    loss    = -ReduceSum(one_hot * log_softmax(logits)) / N           (a 0-d result)
    grad    = (Exp(log_softmax(logits)) * ReduceSum(one_hot, 1) - one_hot) / N    (is_grad=True; a label
              outside [0, C) has a zero one-hot row: no loss, no gradient)
"""
from __future__ import annotations

import numpy as np

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands
from graphkernel.expanders.softmax_cross_entropy import log_softmax_rows


@expands("SparseSoftmaxCrossEntropyWithLogits")
def expand_sparse_softmax_cross_entropy(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (z,) = b.wide(inputs[0])
    labels = inputs[1]
    n, classes = z.shape
    ids = b.const(np.arange(classes).reshape(1, classes), labels.dtype)
    hot = b.op("Cast", b.op("Equal", b.op("Reshape", labels, shape=(n, 1)), ids), dtype=z.dtype)
    log_sm = log_softmax_rows(b, z)
    count = b.scalar(n, z)
    if node.attr("is_grad"):
        valid = b.reduce("ReduceSum", hot, (1,))
        out = b.op("RealDiv", b.op("Sub", b.op("Mul", b.op("Exp", log_sm), valid), hot), count)
    else:
        total = b.reduce("ReduceSum", b.op("Mul", hot, log_sm), (0, 1), keep_dims=False)
        out = b.op("RealDiv", b.op("Neg", total), count)
    return (b.cast(out, inputs[0].dtype),)
