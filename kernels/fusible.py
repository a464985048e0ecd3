"""What one generated kernel can compute: the contract between the fusion passes and the codegen.

The fusion passes ask `unsupported_reason(subgraph)` before they form a composite; the codegen calls
`analyze(subgraph)` to learn the loop structure. Both read this one definition, so a composite the
passes build is always one the codegen can lower.

    iteration shape S  = numpy broadcast of every value's shape (non-keepdims reduce results counted
                         with their reduced axes as 1)
    reduce axes A      = the axes of S every reduction in the kernel reduces (one set per kernel)
    a value is "full" (varies over A) or "reduced" (size 1 on every axis of A); both may broadcast
    along other axes. Reduce-then-broadcast-back (x - max(x)) mixes the two; a reduction may read
    values computed from an earlier reduction (LayerNorm's variance), which makes one more phase.

A kernel may hold: scalar Consts, ELEMWISE and BROADCAST primitives, and REDUCE primitives.
A reduction without keep_dims may only feed the kernel's outputs (its result has fewer dims).
"""
from __future__ import annotations

from dataclasses import dataclass

from ir.errors import ShapeError
from ir.graph import Graph, Node, Value
from ir.ops import Pattern, get
from ir.ops.checks import broadcast
from kernels.emitters import EMITTERS, REDUCERS


class Unsupported(Exception):
    """The subgraph is not one kernel's worth of work; the message says why."""


@dataclass(frozen=True)
class KernelShape:
    shape: tuple[int, ...]               # the iteration shape S
    reduce_axes: tuple[int, ...]         # A: axes of S reduced (empty for elementwise kernels)
    aligned: dict                        # Value -> its shape right-aligned to rank(S), reduced axes as 1
    phase: dict                          # Value -> number of reductions on its longest input path
    reductions: tuple[Node, ...]         # in graph order; a reduction over size-1 axes only is not one

    @property
    def num_phases(self) -> int:
        return 1 + max((self.phase[r.out] for r in self.reductions), default=0)


def _keepdims_shape(node: Node) -> tuple[int, ...]:
    x = node.inputs[0].shape
    axes = node.attr("axis")
    return tuple(1 if i in axes else d for i, d in enumerate(x))


_latest: tuple = (None, None)   # (graph, KernelShape) of the latest analyze() that succeeded


def analyze(graph: Graph) -> KernelShape:
    """The loop structure of a kernel computing `graph`, or Unsupported with the reason.

    Fusion asks several times in a row about each candidate (legality, the cost model): the latest
    answer is kept for the same graph object (graphs are immutable)."""
    global _latest
    latest = _latest
    if latest[0] is graph:
        return latest[1]
    ks = _analyze(graph)
    _latest = (graph, ks)
    return ks


def _analyze(graph: Graph) -> KernelShape:
    shapes: dict[Value, tuple[int, ...]] = {v: v.shape for v in graph.inputs}
    internal_uses = {v for n in graph.nodes for v in n.inputs}
    reductions = []
    for node in graph.nodes:
        d = get(node.op)
        if node.subgraph is not None or d.pattern > Pattern.REDUCE or d.pattern == Pattern.INJECTIVE:
            raise Unsupported(f"{node.op} ({d.pattern.name}) cannot be part of a fused kernel")
        if node.op != "Const" and node.op not in EMITTERS and node.op not in REDUCERS:
            raise Unsupported(f"{node.op} has no kernel emitter")
        if node.op == "Const" and node.out.type.size != 1:
            raise Unsupported(f"a Const of shape {node.out.shape} must be a kernel input, not inlined")
        if d.pattern == Pattern.REDUCE:
            if not node.attr("keep_dims") and node.out in internal_uses:
                raise Unsupported(f"{node.op} without keep_dims feeds other ops of the kernel")
            shapes[node.out] = _keepdims_shape(node)
            reductions.append(node)
        else:
            for v in node.outputs:
                shapes[v] = v.shape
    rank = max((len(s) for s in shapes.values()), default=0)
    aligned = {v: (1,) * (rank - len(s)) + tuple(s) for v, s in shapes.items()}
    try:
        full = broadcast(*set(aligned.values())) if aligned else ()
    except ShapeError:
        raise Unsupported("value shapes do not broadcast to one iteration shape") from None

    axes_sets = set()
    for r in list(reductions):
        src = aligned[r.inputs[0]]
        lead = rank - r.inputs[0].node.types[r.inputs[0].index].rank
        axes = tuple(a + lead for a in r.attr("axis"))
        if any(src[a] != full[a] for a in axes):
            raise Unsupported(f"{r.op} reduces an axis its input only broadcasts along")
        real = tuple(sorted(a for a in axes if full[a] != 1))
        if real:
            axes_sets.add(real)
        else:  # over axes of size 1 only: an identity, computed as an elementwise op (layout.describe)
            reductions.remove(r)
    if len(axes_sets) > 1:
        raise Unsupported(f"reductions over different axes {sorted(axes_sets)} need separate kernels")
    reduce_axes = axes_sets.pop() if axes_sets else ()

    phase: dict[Value, int] = {v: 0 for v in graph.inputs}
    for node in graph.nodes:
        p = max((phase[v] for v in node.inputs), default=0)
        if node in reductions:
            p += 1
        for v in node.outputs:
            phase[v] = p
    for r in reductions:
        if any(aligned[r.out][a] != 1 for a in reduce_axes):
            raise Unsupported(f"{r.op} result is not reduced over the kernel's reduce axes")
    return KernelShape(full, reduce_axes, aligned, phase, tuple(reductions))


def unsupported_reason(graph: Graph) -> str | None:
    """None when one kernel can compute `graph`, else why not (for the fusion log)."""
    try:
        analyze(graph)
    except Unsupported as e:
        return str(e)
    return None
