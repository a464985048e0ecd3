"""Dead code elimination: drop every node no graph output depends on.

    live = outputs' producers, then their inputs' producers, ... (one backward walk, `ir.live_nodes`)

Exact by construction: the values the outputs are computed from are untouched. Nodes are pure (no op of
the IR has a side effect), so a node whose results nobody reads can go. Composite subgraphs are cleaned the
same way: their outputs are fixed by the composite's results, so only nodes inside that no subgraph output
needs disappear.
"""
from __future__ import annotations

from ir.graph import Graph, live_nodes
from graphkernel.settings.options import CompileOptions


def _dce_subgraphs(graph: Graph) -> Graph:
    def visit(node, inputs, emit):
        if node.subgraph is None:
            return None
        return node.replace(inputs=inputs, subgraph=_dce_subgraphs(live_nodes(node.subgraph)))
    return graph.rewrite(visit)


def dce(graph: Graph, opts: CompileOptions) -> Graph:
    """The graph without dead nodes (at the top level and inside composites)."""
    live = live_nodes(graph)
    if any(n.subgraph is not None for n in live.nodes):
        live = _dce_subgraphs(live)
    return live
