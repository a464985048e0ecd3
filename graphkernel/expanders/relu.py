"""ReLU(x) -> Maximum(x, 0): a scalar zero of x's dtype broadcast by the Maximum (NaN propagates, as in
numpy's maximum, the reference)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("ReLU")
def expand_relu(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    (x,) = inputs
    return (b.op("Maximum", x, b.scalar(0, x)),)
