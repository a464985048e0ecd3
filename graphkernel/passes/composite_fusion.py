"""Composite fusion (stage `composite`, dump `hwopt_d_composite_opt_end_graph_<id>.dot`).

Merges composites with each other and with the other fusible primitives (Pow, Exp, Log, Sqrt,
Rsqrt, Tanh, Erf, reductions, BroadcastTo), driven by the cost model:

    elementwise producers into a reduction        x*x -> ReduceSum                 one kernel
    elementwise consumers after a reduction       ReduceSum -> *(1/n)              one kernel
    reduce then broadcast back (Softmax, LN)      x - max(x), e / sum(e)           one kernel, the row
                                                                                   kept in the UB
    the same with a row larger than the UB        stitch fusion only (opt_level 3 or
                                                  --enable_stitch_fusion): the kernel re-reads the
                                                  row once per phase, and the cost model counts it

Every producer/consumer pair is decided by `fusion_rules.can_fuse` (legality, then the cycle check,
then the cost model's score), to a fixpoint (`fusion_driver`). The fusion example's NetCompositeFuse: {Mul, Add} and
Pow -> one composite {Mul, Add, Pow}.
"""
from __future__ import annotations

from ir.graph import Graph, Node
from ir.ops import Pattern, pattern_of
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.fusion_driver import fuse

STAGE = "composite"
FUSIBLE_PATTERNS = (Pattern.ELEMWISE, Pattern.BROADCAST, Pattern.REDUCE)


def is_fusible(node: Node) -> bool:
    return node.op != "Const" and pattern_of(node) in FUSIBLE_PATTERNS


def composite_fusion(graph: Graph, opts: CompileOptions) -> Graph:
    """Composites + fusible primitives -> larger composites where the cost model predicts a saving."""
    return fuse(graph, opts, STAGE, is_fusible, "composite fusion")
