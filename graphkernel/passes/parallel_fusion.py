"""Parallel fusion (opt_level 3, or --enable_parallel_fusion): independent small kernels that read the
same inputs become one launch.

    x ──> K1 = {Mul, Add} ──> y1            x ──> {Mul, Add ‖ Exp, Mul} ──> y1, y2
     └──> K2 = {Exp, Mul} ──> y2                  one launch, x read once

For each value read by two or more fusible kernels, the readers' clusters of one result shape (the
updates of an optimizer's same-shape Parameters, which share the learning rate) are merged pairwise when
`fusion_rules.can_fuse` says so, asked through the fusion search (`fusion_driver.Search`) with this
pass's own rule on the pair:
    both are small          each kernel's estimate is under SMALL_SECONDS: launch cost matters (two
                            elementwise kernels merge at any size: apart or together they move the
                            same bytes)
    they are independent    neither reads the other (a producer and its consumer are composite
                            fusion's business)
and then, as for every fusion, legality (one iteration shape), no cycle, and a positive score (a
launch and a read saved; the parts timed back to back: at the bandwidth of their bytes together). Each candidate is logged with its figures, its reason prefixed
"parallel: "; the merged kernel is a multi-output composite.
"""
from __future__ import annotations

from ir.graph import Graph, Node
from ir.ops import Pattern, pattern_of
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.cost_model import back_to_back
from graphkernel.passes.fusion_driver import Search
from graphkernel.passes.fusion_rules import can_fuse
from graphkernel.passes.fusion_utils import primitives

STAGE = "composite"
SMALL_SECONDS = 20e-6


def _elementwise(search: Search, head: Node) -> bool:
    return all(pattern_of(p) <= Pattern.BROADCAST for n in search.clusters.members[head] for p in primitives(n)
               if p.op != "Const")


def small_and_independent(search: Search, a: Node, b: Node) -> str | None:
    """Parallel fusion's rule on a pair of clusters: why it is not one of independent small kernels.
    Two elementwise kernels need not be small: side by side in one launch they move the same bytes as
    apart (the updates of an optimizer's same-shape Parameters)."""
    if not (_elementwise(search, a) and _elementwise(search, b)):
        for head in (a, b):
            seconds = search.estimate(head).seconds
            if seconds > SMALL_SECONDS:
                return (f"{search.facts(head).label} is not small ({seconds * 1e6:.3g}us > "
                        f"{SMALL_SECONDS * 1e6:.3g}us)")
    return "one reads the other (not independent)" if search.one_reads_the_other(a, b) else None


class _ParallelSearch(Search):
    """The parts of a parallel merge are independent kernels: apart, they run back to back."""

    def parts(self, a: Node, b: Node):
        return back_to_back(super().parts(a, b))


def parallel_fusion(graph: Graph, opts: CompileOptions) -> Graph:
    """Merge independent small kernels sharing an input into one multi-output composite."""
    search = _ParallelSearch(graph, opts, STAGE, is_fusible, "parallel fusion", small_and_independent,
                             "parallel: ")
    clusters = search.clusters
    readers = graph.users()
    shared = [v for v in list(graph.inputs) + [v for n in graph.nodes for v in n.outputs]
              if v.node.op != "Const" and len(dict.fromkeys(readers.get(v, ()))) > 1]
    decided: set = set()
    for v in shared:
        by_shape: dict = {}   # one kernel has one iteration shape: readers are paired within a shape
        for n in dict.fromkeys(readers[v]):
            if n in clusters.cluster_of and is_fusible(n):
                by_shape.setdefault(n.types[0].shape if n.types else (), []).append(n)
        for nodes in by_shape.values():
            for other in nodes[1:]:
                a, b = clusters.cluster_of[nodes[0]], clusters.cluster_of[other]
                key = (a, clusters.version[a], b, clusters.version[b])
                if a is b or key in decided:
                    continue
                decided.add(key)
                record = can_fuse(a, b, search)
                if record.accepted:
                    search.merge(a, b, record)
    return search.finish()
