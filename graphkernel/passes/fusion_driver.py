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

Big graphs: the cycle check and the composite's outputs come from the pair's neighbourhood
(`clusters.Clusters`), each node's admission is asked once, a pair over composite_op_limit_size is
refused from the op counts before its subgraph is built (the only refusal logged without the merged
kernel's figures), and two flat clusters (elementwise over one shape, `flat.py`) are judged from
their summaries without building anything. A candidate costs the size of the pair, never of the
graph; on an elementwise chain, the size of what it adds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ir.graph import Graph, Node
from kernels.fusible import unsupported_reason
from graphkernel.options import CompileOptions
from graphkernel.passes.clusters import Clusters
from graphkernel.passes.cost_model import Estimate, refusal_reason, score
from graphkernel.passes.flat import Flat, flat_of, merge_flat
from graphkernel.passes.fusion_rules import admit, kernel_reason, op_limit_reason, ub_reason
from graphkernel.passes.fusion_utils import compute_ops, fuse_groups, primitives

MAX_ROUNDS = 50
LABEL_OPS = 16      # a log label shows this many ops of a cluster, then how many more


def label(members: list[Node], count: int | None = None) -> str:
    """`Mul`, or `{Mul,Add,...}` for a cluster; `count` (its primitives) when known already."""
    ops = []
    for n in members:   # only the first ops are shown: a long cluster is not walked to the end
        ops += [p.op for p in primitives(n) if p.op != "Const"]
        if len(ops) > LABEL_OPS:
            break
    if count is None:
        count = len(compute_ops(members)) if len(ops) > LABEL_OPS else len(ops)
    if count == 1:
        return ops[0]
    shown = ops if count <= LABEL_OPS else ops[:LABEL_OPS] + [f"...{count - LABEL_OPS} more"]
    return "{" + ",".join(shown) + "}"


@dataclass
class Facts:
    """What the search knows of one version of a cluster."""
    count: int                      # primitives
    refusal: str | None             # why it may not be clustered by this pass (a single node), or None
    flat: Flat | None               # its summary when it is flat (graphkernel/passes/flat.py)
    estimate: Estimate | None = None
    label: str | None = None        # made when first logged


class Search:
    """One fusion pass's state: the clusters and the facts of each cluster's current version."""

    def __init__(self, graph: Graph, opts: CompileOptions, stage: str, in_pass: Callable[[Node], bool],
                 pass_name: str):
        self.clusters = Clusters(graph)
        self.opts, self.stage, self.in_pass, self.pass_name = opts, stage, in_pass, pass_name
        self._facts: dict[tuple, Facts] = {}     # (head, version) -> Facts

    def facts(self, head: Node) -> Facts:
        key = (head, self.clusters.version[head])
        facts = self._facts.get(key)
        if facts is None:   # a cluster of one node (merged clusters are told their facts)
            facts = self._facts[key] = Facts(len(compute_ops([head])), admit(head, self.opts, self.in_pass,
                                                                              self.pass_name),
                                             flat_of(head, self.clusters.escaping([head])))
        if facts.label is None:
            facts.label = label(self.clusters.members[head], facts.count)
        return facts

    def remember(self, head: Node, facts: Facts) -> None:
        self._facts[(head, self.clusters.version[head])] = facts

    def estimate(self, head: Node) -> Estimate:
        facts = self.facts(head)
        if facts.estimate is None:
            facts.estimate = facts.flat.estimate(self.opts.core_num) if facts.flat is not None else \
                self.clusters.estimate(self.clusters.members[head], self.opts.core_num)
        return facts.estimate

    def consider(self, a: Node, b: Node) -> Facts | None:
        """Decide one candidate (producer cluster a into consumer cluster b), log it, and return the
        merged cluster's facts when it is accepted."""
        clusters, opts = self.clusters, self.opts
        fa, fb = self.facts(a), self.facts(b)
        names, count, refusal = (fa.label, fb.label), fa.count + fb.count, fa.refusal or fb.refusal
        if refusal is None and op_limit_reason(count, opts) is not None:
            opts.log.add(self.stage, names, False, op_limit_reason(count, opts))
            return None
        flat = merge_flat(fa.flat, fb.flat, lambda v: clusters.inside(v, (a, b)),
                          lambda v: clusters.read_outside(v, (a, b))) if fa.flat and fb.flat else None
        if flat is not None:   # the merged kernel's figures from the two summaries
            fused = flat.estimate(opts.core_num)
            reason = refusal or ub_reason(fused, opts)
            figures = fused.figures("fused")
        else:
            merged_nodes = sorted(clusters.members[a] + clusters.members[b],
                                  key=clusters.position.__getitem__)
            merged = clusters.subgraph(merged_nodes)
            reason = refusal or kernel_reason(merged, opts)
            fused = None if unsupported_reason(merged) is not None else \
                clusters.estimate(merged_nodes, opts.core_num, merged)
            figures = fused.figures("fused") if fused is not None else {}
        if reason is not None:
            opts.log.add(self.stage, names, False, reason, **figures)
            return None
        if clusters.creates_cycle(a, b):
            opts.log.add(self.stage, names, False, "merging would create a cycle (a path leaves the pair and "
                         "comes back through another kernel)")
            return None
        parts = [self.estimate(a), self.estimate(b)]
        saved = score(parts, fused)
        figures = {**figures, "parts_us": round(sum(p.seconds for p in parts) * 1e6, 3),
                   "saved_us": round(saved * 1e6, 3)}
        if saved <= 0:
            opts.log.add(self.stage, names, False, refusal_reason(parts, fused), **figures)
            return None
        opts.log.add(self.stage, names, True, "legal, acyclic, and the cost model predicts a saving",
                     **figures)
        return Facts(count, None, flat, fused)


def fuse(graph: Graph, opts: CompileOptions, stage: str, in_pass: Callable[[Node], bool],
         pass_name: str) -> Graph:
    """Merge producer clusters into consumer clusters while legal, acyclic and profitable."""
    search = Search(graph, opts, stage, in_pass, pass_name)
    clusters = search.clusters
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
                key = (a, clusters.version[a], b, clusters.version[b])
                if key in decided:
                    continue
                decided.add(key)
                facts = search.consider(a, b)
                if facts is not None:
                    search.remember(clusters.merge(a, b), facts)
                    merged_any = True
        if not merged_any:
            break
    return fuse_groups(graph, clusters.groups())
