"""The fusion search basic and composite fusion share: greedy producer->consumer merging to a fixpoint.

Note on the fusing algorithm
----------------------------
Every computing top-level node starts as a cluster of its own (dead nodes and Consts stay out: DCE
and the composite builder deal with them). We walk the nodes in graph order
(a topological order); for each node we look at the clusters producing its inputs and try to merge
each into the node's cluster:

        p1   p2          legality   can_fuse(p, c, merged subgraph)                     -> reason
          \\ /            cycles     creates_cycle(p, c): a path p -> outside -> c       -> refuse
           c             profit     cost_model.score(parts, merged) > 0                 -> fuse

    e.g.  x -> Mul -> Add -> Pow          round 1:  {Mul} <- Add  => {Mul, Add}
                                                    {Mul, Add} <- Pow => {Mul, Add, Pow}

A merge changes the clusters, so the walk repeats until a round merges nothing (capped). A pair
already decided is not asked again while neither cluster has changed, so each candidate is logged
once. Values a cluster produces and something outside reads become extra outputs of its composite
(multi-output). At the end each cluster of two or more nodes becomes one composite
(`fusion_utils.fuse_groups`).
"""
from __future__ import annotations

from typing import Callable

from ir.graph import Graph, Node
from kernels.fusible import unsupported_reason
from graphkernel.options import CompileOptions
from graphkernel.passes.cost_model import Estimate, estimate, refusal_reason, score
from graphkernel.passes.fusion_rules import can_fuse
from graphkernel.passes.fusion_utils import (build_composite, compute_ops, creates_cycle, escaping_values,
                                             fuse_groups, live_set, node_users)

MAX_ROUNDS = 50


def label(members: list[Node]) -> str:
    ops = compute_ops(members)
    return ops[0] if len(ops) == 1 else "{" + ",".join(ops) + "}"


class Clusters:
    """A partition of the graph's computing nodes; a cluster is named by its first member."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.position = {n: i for i, n in enumerate(graph.nodes)}
        live = live_set(graph)
        self.cluster_of: dict[Node, Node] = {n: n for n in graph.nodes if n.op != "Const" and n in live}
        self.members: dict[Node, list[Node]] = {n: [n] for n in self.cluster_of}
        self.users = node_users(graph)
        self._estimates: dict[tuple, Estimate] = {}

    def merge(self, a: Node, b: Node) -> Node:
        nodes = sorted(self.members.pop(a) + self.members.pop(b), key=self.position.__getitem__)
        head = nodes[0]
        self.members[head] = nodes
        for n in nodes:
            self.cluster_of[n] = head
        return head

    def subgraph(self, nodes: list[Node]) -> Graph:
        node, _ = build_composite(nodes, escaping_values(self.graph, nodes))
        return node.subgraph

    def estimate(self, nodes: list[Node], opts: CompileOptions, subgraph: Graph | None = None) -> Estimate:
        key = tuple(nodes)
        if key not in self._estimates:
            sub = subgraph if subgraph is not None else self.subgraph(nodes)
            self._estimates[key] = estimate(sub, opts.core_num)
        return self._estimates[key]

    def figures(self, nodes: list[Node], opts: CompileOptions, subgraph: Graph) -> dict:
        """The cost model's figures of the kernel `nodes` would make, for the log (none if no kernel)."""
        if unsupported_reason(subgraph) is not None:
            return {}
        return self.estimate(nodes, opts, subgraph).figures("fused")

    def groups(self) -> list[list[Node]]:
        return [m for m in self.members.values() if len(m) > 1]


def fuse(graph: Graph, opts: CompileOptions, stage: str, in_pass: Callable[[Node], bool],
         pass_name: str) -> Graph:
    """Merge producer clusters into consumer clusters while legal, acyclic and profitable."""
    clusters = Clusters(graph)
    decided: set[tuple] = set()
    for _ in range(MAX_ROUNDS):
        merged_any = False
        for node in graph.nodes:
            if node not in clusters.cluster_of:
                continue
            for producer in dict.fromkeys(v.node for v in node.inputs):
                if producer not in clusters.cluster_of:
                    continue
                a, b = clusters.cluster_of[producer], clusters.cluster_of[node]
                if a is b:
                    continue
                key = (tuple(clusters.members[a]), tuple(clusters.members[b]))
                if key in decided:
                    continue
                decided.add(key)
                if _consider(clusters, a, b, opts, stage, in_pass, pass_name):
                    clusters.merge(a, b)
                    merged_any = True
        if not merged_any:
            break
    return fuse_groups(graph, clusters.groups())


def _consider(clusters: Clusters, a: Node, b: Node, opts: CompileOptions, stage: str,
              in_pass: Callable[[Node], bool], pass_name: str) -> bool:
    """Decide one candidate (producer cluster a into consumer cluster b) and log it."""
    ma, mb = clusters.members[a], clusters.members[b]
    names = (label(ma), label(mb))
    merged_nodes = sorted(ma + mb, key=clusters.position.__getitem__)
    merged = clusters.subgraph(merged_nodes)
    reason = can_fuse(ma, mb, merged, opts, in_pass, pass_name)
    if reason is not None:
        opts.log.add(stage, names, False, reason, **clusters.figures(merged_nodes, opts, merged))
        return False
    if creates_cycle(clusters.graph, ma, mb, clusters.cluster_of, clusters.users):
        opts.log.add(stage, names, False, "merging would create a cycle (a path leaves the pair and "
                     "comes back through another kernel)")
        return False
    parts = [clusters.estimate(ma, opts), clusters.estimate(mb, opts)]
    fused = clusters.estimate(merged_nodes, opts, merged)
    saved = score(parts, fused)
    figures = {**fused.figures("fused"), "parts_us": round(sum(p.seconds for p in parts) * 1e6, 3),
               "saved_us": round(saved * 1e6, 3)}
    if saved <= 0:
        opts.log.add(stage, names, False, refusal_reason(parts, fused), **figures)
        return False
    opts.log.add(stage, names, True, "legal, acyclic, and the cost model predicts a saving", **figures)
    return True
