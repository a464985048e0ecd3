"""Identity(x) -> x: no node at all; the value is passed on."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("Identity")
def expand_identity(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    return (inputs[0],)
