"""Sibling fusion (opt_level 2): independent kernels that reduce the same axes of the same shape become one
multi-output kernel, as XLA's multi-output sibling fusion makes one loop of them.

    dy ──> ReduceSum(dy * xhat, 0) ──> dgamma          dy, xhat ──> {ReduceSum(dy * xhat, 0) ‖
    dy ──> ReduceSum(dy, 0)        ──> dbeta                         ReduceSum(dy, 0)} ──> dgamma, dbeta

The backward of a network is full of these: LayerNorm's dgamma and dbeta, the bias gradients of layers of
one width, each a reduction over the leading axes of the same [rows, width] shape. One kernel walks the
columns once for all of them: a launch saved per sibling, and an input they share read once.

A cluster's signature is (shape, axes) of its reductions when they all agree; clusters with the same
signature are merged in graph order, each pair asked through `fusion_rules.can_fuse` with this pass's
rule (they are independent: neither reads the other), then legality, no cycle and a positive score, each
logged with its reason prefixed "sibling: ".
"""
from __future__ import annotations

from ir.graph import Graph, Node
from ir.ops import Pattern, pattern_of
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.fusion_driver import Search
from graphkernel.passes.fusion_rules import can_fuse

STAGE = "composite"


def signature(node: Node) -> tuple | None:
    """(input shape, axes) shared by every reduction a top-level node computes; None when it reduces
    nothing or its reductions disagree."""
    members = node.subgraph.nodes if node.subgraph is not None else (node,)
    keys = {(n.inputs[0].shape, n.attr("axis")) for n in members if pattern_of(n) == Pattern.REDUCE}
    return keys.pop() if len(keys) == 1 else None


def independent(search: Search, a: Node, b: Node) -> str | None:
    """Sibling fusion's rule on a pair of clusters: why they are not independent."""
    if search.one_reads_the_other(a, b):
        return "one reads the other (a producer and its consumer are composite fusion's business)"
    return None


def sibling_fusion(graph: Graph, opts: CompileOptions) -> Graph:
    """Merge independent kernels reducing the same axes of the same shape into multi-output kernels."""
    search = Search(graph, opts, STAGE, is_fusible, "sibling fusion", independent, "sibling: ")
    clusters = search.clusters
    groups: dict[tuple, list[Node]] = {}
    for node in graph.nodes:
        key = signature(node) if node in clusters.cluster_of else None
        if key is not None:
            groups.setdefault(key, []).append(node)
    for nodes in groups.values():
        for other in nodes[1:]:
            a, b = clusters.cluster_of[nodes[0]], clusters.cluster_of[other]
            if a is b:
                continue
            record = can_fuse(a, b, search)
            if record.accepted:
                search.merge(a, b, record)
    return search.finish()
