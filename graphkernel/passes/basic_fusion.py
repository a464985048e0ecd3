"""Basic fusion (stage `fuse_basic`, dump `hwopt_d_fuse_basic_opt_end_graph_<id>.dot`).

Clusters connected simple elementwise primitives into composites, as MindSpore's basic op fusion does
for the fusion example's NetBasicFuse (x*2.0+1.0 -> one composite {Mul, Add}):

    the ops whose row says `basic_fusion` (Add Sub Mul RealDiv Neg Abs Maximum Minimum Cast Select
    Greater Less Equal ...; the scalar Consts they read are copied into the composite)

Everything else (Pow, Exp, reductions, BroadcastTo, ...) waits for composite fusion; MatMul, host
ops and unexpanded composite ops are never fused. The search is `fusion_driver`'s, each decision and
its line in the fusion log `fusion_rules.can_fuse`'s.
"""
from __future__ import annotations

from ir.graph import Graph, Node
from ir.ops import get
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.fusion_driver import fuse

STAGE = "fuse_basic"


def is_basic(node: Node) -> bool:
    return node.subgraph is None and get(node.op).basic_fusion


def basic_fusion(graph: Graph, opts: CompileOptions) -> Graph:
    """Simple elementwise chains -> composites (pure: returns a new graph)."""
    return fuse(graph, opts, STAGE, is_basic, "basic fusion")
