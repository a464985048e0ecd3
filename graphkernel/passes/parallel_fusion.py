"""Parallel fusion (opt_level 3, or --enable_parallel_fusion): independent small kernels that read the
same inputs become one launch.

    x ──> K1 = {Mul, Add} ──> y1            x ──> {Mul, Add ‖ Exp, Mul} ──> y1, y2
     └──> K2 = {Exp, Mul} ──> y2                  one launch, x read once

For each value read by two or more fusible kernels, the readers' clusters are merged pairwise when
    both are small          each kernel's estimate is under SMALL_SECONDS: launch cost matters
    they are independent    neither reads the other, and merging creates no cycle
    legal                   `fusion_rules.can_fuse` on the merged subgraph (one iteration shape)
    profitable              the cost model's score is positive (a launch and a read saved)
Each candidate is logged with its figures; the merged kernel is a multi-output composite.
"""
from __future__ import annotations

from ir.graph import Graph, Node
from graphkernel.options import CompileOptions
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.cost_model import estimate, refusal_reason, score
from graphkernel.passes.clusters import Clusters
from graphkernel.passes.fusion_driver import label
from graphkernel.passes.fusion_rules import can_fuse
from graphkernel.passes.fusion_utils import fuse_groups

STAGE = "composite"
SMALL_SECONDS = 20e-6


def parallel_fusion(graph: Graph, opts: CompileOptions) -> Graph:
    """Merge independent small kernels sharing an input into one multi-output composite."""
    clusters = Clusters(graph)
    readers = graph.users()
    shared = [v for v in list(graph.inputs) + [v for n in graph.nodes for v in n.outputs]
              if v.node.op != "Const" and len(dict.fromkeys(readers.get(v, ()))) > 1]
    decided: set = set()
    for v in shared:
        nodes = [n for n in dict.fromkeys(readers[v]) if n in clusters.cluster_of]
        for other in nodes[1:]:
            a, b = clusters.cluster_of[nodes[0]], clusters.cluster_of[other]
            key = (a, clusters.version[a], b, clusters.version[b])
            if a is b or key in decided:
                continue
            decided.add(key)
            if _consider(clusters, a, b, opts):
                clusters.merge(a, b)
    return fuse_groups(graph, clusters.groups())


def _consider(clusters: Clusters, a: Node, b: Node, opts: CompileOptions) -> bool:
    ma, mb = clusters.members[a], clusters.members[b]
    names = (label(ma), label(mb))

    def refuse(reason: str, **figures) -> bool:
        opts.log.add(STAGE, names, False, f"parallel: {reason}", **figures)
        return False

    merged = clusters.subgraph(sorted(ma + mb, key=clusters.position.__getitem__))
    reason = can_fuse(ma, mb, merged, opts, is_fusible, "parallel fusion")
    if reason is not None:
        return refuse(reason)
    parts = [clusters.estimate(ma, opts.core_num), clusters.estimate(mb, opts.core_num)]
    for members, est in zip((ma, mb), parts):
        if est.seconds > SMALL_SECONDS:
            return refuse(f"{label(members)} is not small ({est.seconds * 1e6:.3g}us > "
                          f"{SMALL_SECONDS * 1e6:.3g}us)")
    sa, sb = set(ma), set(mb)
    if any(v.node in sa for n in mb for v in n.inputs) or any(v.node in sb for n in ma for v in n.inputs):
        return refuse("one reads the other (not independent)")
    if clusters.creates_cycle(a, b):
        return refuse("merging would create a cycle")
    fused = estimate(merged, opts.core_num)
    saved = score(parts, fused)
    figures = {**fused.figures("fused"), "parts_us": round(sum(p.seconds for p in parts) * 1e6, 3),
               "saved_us": round(saved * 1e6, 3)}
    if saved <= 0:
        return refuse(refusal_reason(parts, fused), **figures)
    opts.log.add(STAGE, names, True, "parallel: independent small kernels share one launch", **figures)
    return True
