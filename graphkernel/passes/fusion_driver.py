"""The fusion search basic and composite fusion share: greedy producer->consumer merging to a fixpoint.

Note on the fusing algorithm
----------------------------
Every computing top-level node starts as a cluster of its own (dead nodes and Consts stay out: DCE
and the composite builder deal with them). We walk the nodes in graph order
(a topological order); for each node we look at the clusters producing its inputs and ask
`fusion_rules.can_fuse(p, c, search)` whether to merge each into the node's cluster:

        p1   p2          legality   admission, op limit, the merged kernel           -> reason
          \\ /            cycles     Clusters.creates_cycle(p, c): p -> outside -> c  -> refuse
           c             profit     cost_model.score(parts, merged) > 0               -> fuse

    e.g.  x -> Mul -> Add -> Pow          round 1:  {Mul} <- Add  => {Mul, Add}
                                                    {Mul, Add} <- Pow => {Mul, Add, Pow}

A merge changes the clusters, so the walk repeats until a round merges nothing (capped). A pair
already decided is not asked again while neither cluster has changed, so each candidate is logged
once. Values a cluster produces and something outside reads become extra outputs of its composite
(multi-output). At the end each cluster of two or more nodes becomes one composite
(`fusion_utils.fuse_groups`), and each accepted record in the fusion log names it. Parallel fusion
asks the same Search about independent pairs.

Big graphs: the cycle check and the composite's outputs come from the pair's neighbourhood
(`clusters.Clusters`), each node's admission is asked once, a pair over composite_op_limit_size is
refused from the op counts before its subgraph is built, and two flat clusters (elementwise over one
shape, `flat.py`) are judged from their summaries without building anything. A candidate costs the
size of the pair, never of the graph; on an elementwise chain, the size of what it adds.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from ir.graph import Graph, Node
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.pass_context import FusionRecord, PassContext
from graphkernel.passes.clusters import Clusters
from graphkernel.passes.cost_model import Estimate, refusal_reason
from graphkernel.passes.flat import Flat, flat_of, merge_flat
from graphkernel.passes.fusion_rules import Kernel, admit, can_fuse
from graphkernel.passes.fusion_utils import compute_ops, fuse_groups, primitives

MAX_ROUNDS = 50
LABEL_OPS = 16      # a log label shows this many ops of a cluster, then how many more

PairRule = Callable[["Search", Node, Node], "str | None"]


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
    """One fusion pass's clusters and the facts of each cluster's current version: can_fuse's view
    (`fusion_rules.FusionView`) of a pair of clusters a, b (their heads)."""

    def __init__(self, graph: Graph, opts: CompileOptions, stage: str, in_pass: Callable[[Node], bool],
                 pass_name: str, rule: PairRule | None = None, prefix: str = ""):
        self.clusters = Clusters(graph)
        self.opts, self.stage, self.in_pass, self.pass_name = opts, stage, in_pass, pass_name
        self._rule, self.prefix = rule, prefix
        self._facts: dict[tuple, Facts] = {}     # (head, version) -> Facts
        self._merged: tuple = (None, None, None)  # (a, b, Facts) of the merged cluster last judged
        self._made: list[tuple[FusionRecord, Node]] = []   # accepted records and a node each fused

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

    def estimate(self, head: Node) -> Estimate:
        facts = self.facts(head)
        if facts.estimate is None:
            facts.estimate = facts.flat.estimate(self.opts.core_num) if facts.flat is not None else \
                self.clusters.estimate(self.clusters.members[head], self.opts.core_num)
        return facts.estimate

    def merge(self, a: Node, b: Node, record: FusionRecord) -> Node:
        """Merge the pair can_fuse accepted last (`record`); the new head."""
        pa, pb, facts = self._merged
        if pa is not a or pb is not b or not record.accepted:
            raise AssertionError("merge() follows can_fuse's acceptance of the same pair")
        head = self.clusters.merge(a, b)
        self._facts[(head, self.clusters.version[head])] = facts
        self._made.append((record, a))
        return head

    def finish(self) -> Graph:
        """The graph with every cluster of two or more nodes as one composite; the fusion log's records
        name the composites they went into (this pass's accepted ones, and earlier ones whose
        composites this pass renumbered or merged)."""
        graph = self.clusters.graph
        holder: dict[Node, str] = {}
        fused = fuse_groups(graph, self.clusters.groups(), holder)
        PassContext.current().log.follow({n.name: (holder[n],) for n in graph.nodes if n.subgraph is not None and n in holder})
        for record, node in self._made:
            record.composites = (holder[node],)
        return fused

    # --- FusionView -----------------------------------------------------------------------------
    def names(self, a: Node, b: Node) -> tuple[str, str]:
        return self.facts(a).label, self.facts(b).label

    def admission(self, a: Node, b: Node) -> str | None:
        return self.facts(a).refusal or self.facts(b).refusal

    def rule(self, a: Node, b: Node) -> str | None:
        return self._rule(self, a, b) if self._rule is not None else None

    def op_count(self, a: Node, b: Node) -> int:
        return self.facts(a).count + self.facts(b).count

    def kernels(self, a: Node, b: Node) -> list[Kernel]:
        """The merged kernel (`merged_kernel`), its facts kept should can_fuse accept the pair."""
        merged, estimate, flat = self.merged_kernel(a, b)
        facts = Facts(self.facts(a).count + self.facts(b).count, None, flat)
        self._merged = (a, b, facts)

        def fused() -> Estimate:    # kept as the merged cluster's, should can_fuse accept
            facts.estimate = estimate()
            return facts.estimate
        return [Kernel(merged, fused)]

    def merged_kernel(self, a: Node, b: Node) -> tuple[Graph | None, Callable[[], Estimate], Flat | None]:
        """The kernel merging a and b makes: its subgraph (None when known by its summary), its
        estimate, its summary. From the two summaries when both are flat, else from its subgraph."""
        clusters, core_num = self.clusters, self.opts.core_num
        fa, fb = self.facts(a), self.facts(b)
        flat = merge_flat(fa.flat, fb.flat, lambda v: clusters.inside(v, (a, b)),
                          lambda v: clusters.read_outside(v, (a, b))) if fa.flat and fb.flat else None
        if flat is not None:
            return None, partial(flat.estimate, core_num), flat
        nodes = sorted(clusters.members[a] + clusters.members[b], key=clusters.position.__getitem__)
        merged = clusters.subgraph(nodes)
        return merged, partial(clusters.estimate, nodes, core_num, merged), None

    def creates_cycle(self, a: Node, b: Node) -> bool:
        return self.clusters.creates_cycle(a, b)

    def one_reads_the_other(self, a: Node, b: Node) -> bool:
        """Whether cluster a reads b's results or b reads a's (the horizontal passes want neither)."""
        return b in self.clusters.successors(a) or a in self.clusters.successors(b)

    def parts(self, a: Node, b: Node) -> list[Estimate]:
        return [self.estimate(a), self.estimate(b)]

    def no_saving(self, parts: list[Estimate], fused: list[Estimate]) -> str:
        return refusal_reason(parts, fused[0])


def fuse(graph: Graph, opts: CompileOptions, stage: str, in_pass: Callable[[Node], bool],
         pass_name: str) -> Graph:
    """Merge producer clusters into consumer clusters while can_fuse says so."""
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
                record = can_fuse(a, b, search)
                if record.accepted:
                    search.merge(a, b, record)
                    merged_any = True
        if not merged_any:
            break
    return search.finish()
