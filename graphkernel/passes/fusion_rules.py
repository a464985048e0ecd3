"""Fusion decisions: may a and b become one kernel, and should they? One chain of early returns.

    can_fuse(a, b, view) -> FusionRecord    every fusion pass asks it (basic, composite, parallel,
                                             recompute); the answer is the record it logs

        legality   admission     each node may be clustered by this pass        admit()
                   pass rule     the pass's own condition on the pair           view.rule
                   op limit      composite_op_limit_size, from the op counts    op_limit_reason()
                   the kernel    reduce_fuse_depth, the kernel contract         kernel_reason()
                                 `kernels.fusible`, UB overflow of live rows
        cycles     a path from a through another kernel back into b        view.creates_cycle
                                                                            (clusters.Clusters)
        profit     the cost model's score of the kernels before and after   cost_model.score

Each return carries a one-line reason, and can_fuse writes it to the fusion log with the figures
known by then: none before the merged kernel is estimated, then the merged kernel's, then what the
fusion saves. A pass answers can_fuse's questions through a `FusionView` of its own state
(`fusion_driver.Search` for merging clusters, `recompute` for copying a cheap slice into its
readers); the flat fast path (`flat.py`) is one way a view describes the merged kernel: its
estimate without its subgraph, judged by the same kernel_reason. Once the pass has built its
composites, an accepted record names the composite holding what it fused (`FusionRecord.composites`,
kept up to date as later passes renumber or merge composites: `FusionLog.follow`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from ir.graph import Graph, Node
from ir.ops import Pattern, get, pattern_of
from kernels import aicore
from kernels.fusible import unsupported_reason
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.pass_context import FusionRecord, PassContext
from graphkernel.passes.cost_model import Estimate, estimate, score
from graphkernel.passes.fusion_utils import build_composite, primitives

OpFilter = Callable[[Node], bool]

CYCLE = "merging would create a cycle (a path leaves the pair and comes back through another kernel)"
SAVING = "legal, acyclic, and the cost model predicts a saving"


@dataclass(frozen=True)
class Kernel:
    """A kernel a fusion would make, as can_fuse judges it: its subgraph (None for a flat kernel, one
    loop over one shape known by its summary: no reduction, always one kernel) and its estimate
    (asked only once the subgraph is known to be one kernel)."""
    graph: Graph | None
    estimate: Callable[[], Estimate]


class FusionView(Protocol):
    """What can_fuse asks of a pass about its candidate (a, b); `a` and `b` mean what the pass says."""
    opts: CompileOptions
    stage: str                  # the fusion log's stage
    prefix: str                 # before every reason in the log ("" or "parallel: ", "recompute: ")

    def names(self, a, b) -> tuple[str, str]: ...          # the log's labels
    def admission(self, a, b) -> str | None: ...           # admit() of their nodes
    def rule(self, a, b) -> str | None: ...                # the pass's own condition on the pair
    def op_count(self, a, b) -> int: ...                   # primitives of the largest kernel it makes
    def kernels(self, a, b) -> Sequence[Kernel]: ...       # the kernels it makes
    def creates_cycle(self, a, b) -> bool: ...
    def parts(self, a, b) -> list[Estimate]: ...           # estimates of the kernels it replaces
    def no_saving(self, parts: list[Estimate], fused: list[Estimate]) -> str: ...   # the profit refusal


def can_fuse(a, b, view: FusionView) -> FusionRecord:
    """Whether the pass of `view` fuses a and b, and why (see the module docstring): the record it
    adds to the fusion log (`accepted`, `reason`, `figures`)."""
    opts = view.opts

    def decide(accepted: bool, reason: str, **figures) -> FusionRecord:
        log = PassContext.current().log
        return log.add(view.stage, view.names(a, b), accepted, view.prefix + reason, **figures)

    # legality
    reason = view.admission(a, b)
    if reason is not None:
        return decide(False, reason)
    reason = view.rule(a, b)
    if reason is not None:
        return decide(False, reason)
    reason = op_limit_reason(view.op_count(a, b), opts)
    if reason is not None:
        return decide(False, reason)
    fused: list[Estimate] = []
    for kernel in view.kernels(a, b):
        reason, est = kernel_reason(kernel, opts)
        if est is not None:
            fused.append(est)
        if reason is not None:
            return decide(False, reason, **kernel_figures(fused))
    figures = kernel_figures(fused)
    # cycles
    if view.creates_cycle(a, b):
        return decide(False, CYCLE, **figures)
    # profit
    parts = view.parts(a, b)
    saved = score(parts, fused)
    figures.update(parts_us=round(sum(p.seconds for p in parts) * 1e6, 3), saved_us=round(saved * 1e6, 3))
    if saved <= 0:
        return decide(False, view.no_saving(parts, fused), **figures)
    return decide(True, SAVING, **figures)


def kernel_figures(fused: list[Estimate]) -> dict:
    """The log's figures of the kernels a fusion makes: all of one kernel's, the time of several."""
    if len(fused) == 1:
        return fused[0].figures("fused")
    return {"fused_us": round(sum(e.seconds for e in fused) * 1e6, 3)} if fused else {}


# --- legality --------------------------------------------------------------------------------------
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


def op_limit_reason(count: int, opts: CompileOptions) -> str | None:
    """Why a kernel of `count` primitives is too big (composite_op_limit_size), or None."""
    limit = opts.flags.composite_op_limit_size
    return f"{count} ops exceed composite_op_limit_size={limit}" if count > limit else None


def kernel_reason(kernel: Kernel, opts: CompileOptions) -> tuple[str | None, Estimate | None]:
    """Why `kernel` may not exist under the flags and the AI Core model (or None), and its estimate
    when it is one kernel (the UB check and the log's figures need it)."""
    merged = kernel.graph
    reason = None
    if merged is not None:
        if any(pattern_of(n) == Pattern.REDUCE for n in merged.nodes):
            depth, limit = reduce_depth(merged), opts.flags.reduce_fuse_depth
            if depth > limit:
                reason = f"{depth} ops chained before a reduction exceed reduce_fuse_depth={limit}"
        unsupported = unsupported_reason(merged)
        if unsupported is not None:
            return reason or f"not one kernel: {unsupported}", None
    est = kernel.estimate()
    return reason or ub_reason(est, opts), est


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
