"""Fusion legality: may these nodes go into one composite? A chain of early returns, one reason each.

    admit(node, opts, in_pass, pass_name)   -> None, or why the node may not be clustered at all
                                                (opaque, host, unexpanded composite op, injective,
                                                 the *_cluster_ops flags, not an op of this pass)
    can_fuse(a, b, merged, opts, in_pass, pass_name)
                                            -> None, or why clusters a and b may not become the one
                                               kernel `merged`: admit() of every node, then
                                               composite_op_limit_size, reduce_fuse_depth, the kernel
                                               contract `kernels.fusible`, UB overflow of live rows

Cycles (`fusion_utils.creates_cycle`) and profit (`cost_model.score`) are asked separately, after.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ir.graph import Graph, Node
from ir.ops import Pattern, get, pattern_of
from kernels import aicore
from kernels.fusible import unsupported_reason
from graphkernel.options import CompileOptions
from graphkernel.passes.cost_model import Estimate, estimate
from graphkernel.passes.fusion_utils import build_composite, primitives

OpFilter = Callable[[Node], bool]


def broadcasts(node: Node) -> bool:
    """The node spreads a non-scalar input over a larger shape (BroadcastTo, or numpy broadcasting)."""
    return any(v.type.size > 1 and v.shape != out.shape for v in node.inputs for out in node.outputs)


def admit(node: Node, opts: CompileOptions, in_pass: OpFilter, pass_name: str) -> str | None:
    """Why `node` may not be put into a composite by this pass, or None."""
    for prim in primitives(node):
        if prim.op == "Const":
            continue
        d = get(prim.op)
        if d.pattern == Pattern.HOST:
            return f"{prim.op} runs on the host (HOST), never fused"
        if d.expandable:
            return f"{prim.op} is an unexpanded composite op (OPAQUE), never fused"
        if d.pattern == Pattern.OPAQUE:
            return f"{prim.op} is OPAQUE (a library call), never fused"
        if d.pattern == Pattern.INJECTIVE:
            return f"{prim.op} is INJECTIVE and stays out of composites (the executor runs it as a view)"
        if not opts.cluster_enabled(prim.op):
            return f"{prim.op} is disabled by the *_cluster_ops flags"
        if d.pattern == Pattern.REDUCE and "reduce_fusion" in opts.fusion_switch_off:
            return f"{prim.op}: reduce_fusion is off (fusion_switch_file UBFusion)"
        if "broadcast_fusion" in opts.fusion_switch_off and broadcasts(prim):
            return f"{prim.op} broadcasts an input: broadcast_fusion is off (fusion_switch_file UBFusion)"
        if node.subgraph is None and not in_pass(prim):
            return f"{prim.op} is not an op of {pass_name}"
    return None


def reduce_depth(graph: Graph) -> int:
    """The longest chain of primitives feeding a reduction inside the kernel (reductions included)."""
    depth: dict = {v: 0 for v in graph.inputs}
    deepest = 0
    for node in graph.nodes:
        d = max((depth[v] for v in node.inputs), default=0) + (node.op != "Const")
        if pattern_of(node) == Pattern.REDUCE:
            deepest = max(deepest, d - 1)
        for v in node.outputs:
            depth[v] = d
    return deepest


def op_count(graph: Graph) -> int:
    return sum(1 for n in graph.nodes if n.op != "Const")


def can_fuse(a: Sequence[Node], b: Sequence[Node], merged: Graph, opts: CompileOptions,
             in_pass: OpFilter, pass_name: str) -> str | None:
    """Why clusters `a` and `b` may not become one composite computing `merged`, or None."""
    for node in (*a, *b):
        reason = admit(node, opts, in_pass, pass_name)
        if reason is not None:
            return reason
    return kernel_reason(merged, opts)


def op_limit_reason(count: int, opts: CompileOptions) -> str | None:
    """Why a kernel of `count` primitives is too big (composite_op_limit_size), or None."""
    limit = opts.flags.composite_op_limit_size
    return f"{count} ops exceed composite_op_limit_size={limit}" if count > limit else None


def kernel_reason(merged: Graph, opts: CompileOptions) -> str | None:
    """Why `merged` may not be one composite kernel under the flags and the AI Core model, or None."""
    reason = op_limit_reason(op_count(merged), opts)
    if reason is not None:
        return reason
    if any(pattern_of(n) == Pattern.REDUCE for n in merged.nodes):
        depth, limit = reduce_depth(merged), opts.flags.reduce_fuse_depth
        if depth > limit:
            return f"{depth} ops chained before a reduction exceed reduce_fuse_depth={limit}"
    reason = unsupported_reason(merged)
    if reason is not None:
        return f"not one kernel: {reason}"
    return ub_reason(estimate(merged, opts.core_num), opts)


def ub_reason(est: Estimate, opts: CompileOptions) -> str | None:
    """Why a kernel of this estimate may not exist (its live rows overflow the UB, no stitching), or None."""
    if not est.fits_ub and not opts.stitch_fusion:
        return (f"live rows need {est.ub_bytes} bytes of UB > {aicore.UB_BYTES} "
                "(reduce-then-broadcast row does not fit; stitch fusion is off)")
    return None


def kernel_estimate(node: Node, opts: CompileOptions) -> Estimate:
    """The cost model's estimate of one top-level kernel (a composite, or a primitive on its own)."""
    if node.subgraph is not None:
        return estimate(node.subgraph, opts.core_num)
    single, _ = build_composite([node], set(node.outputs))
    return estimate(single.subgraph, opts.core_num)
