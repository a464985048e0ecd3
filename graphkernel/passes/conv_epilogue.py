"""Convolution epilogues (stage `composite`, opt_level 1; off: `--disable_pass=composite.conv_epilogue`).

A Conv2D's output pass (kernels/conv.py: the GEMM result, [O, N * H*W], stored as the NCHW output)
can compute the elementwise kernel that reads the convolution's result, so the activation is written
once, already biased, normalized, added to its residual and rectified:

    x, w -> Conv2D -> y -> {Sub, Mul, Mul, Add, Add, Maximum} -> z           2 launches, y written and read
    x, w, mean, ..., r -> Fused_Conv2D_Sub_Mul_Mul_Add_Add_Maximum_0 -> z   1 launch, y never stored

The epilogue is whatever composite fusion put into the one elementwise kernel after the conv: BiasAdd,
BatchNorm in inference (its expansion's per-channel scale and shift), ReLU, a residual Add, Cast.
Each Conv2D forward, in graph order, is offered to the kernels reading its result, in graph order,
and takes the first that `fusion_rules.can_fuse` accepts under this pass's rule:

    rule      the reader computes no reduction and all its results have the conv's shape; the conv
              has static sizes and a GEMM result in rows (kernels.conv.epilogue_reason); the reader
              is not the epilogue of another conv already (one GEMM per kernel)
    kernel    the reader's own kernel (its legality, UB, estimate)
    cycle     no path conv -> another kernel -> reader: a BatchNorm in training normalizes with
              statistics reduced from y, so its normalization is refused here (clusters.Clusters)
    profit    the reader's kernel against the reader's kernel plus the conv's output pass, which the
              fusion saves (reading and writing y)

A conv result that other kernels (or the graph's outputs) read as well is an extra output of the
composite, written by the same pass. The kernels/lower.py step runs the conv's GEMMs, then the epilogue
as a generated elementwise kernel reading the GEMM result in its own layout, so the epilogue computes
what the reader's kernel computes, in the same order: the same bits.
"""
from __future__ import annotations

from ir.graph import Graph, Node
from ir.ops import Pattern, pattern_of
from kernels.conv import epilogue_reason
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.clusters import Clusters
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.cost_model import Estimate, elementwise_estimate, estimate, refusal_reason
from graphkernel.passes.fusion_driver import label
from graphkernel.passes.fusion_rules import Kernel, admit, can_fuse
from graphkernel.passes.fusion_utils import build_composite, compute_ops, fuse_groups, primitives
from graphkernel.passes.pass_context import PassContext

STAGE = "composite"
PASS_NAME = "conv epilogue"


class EpilogueView:
    """can_fuse's view (fusion_rules.FusionView) of a pair (conv, reader): `a` a Conv2D node, `b` the
    head of the cluster of a kernel reading its result."""

    prefix = "conv epilogue: "
    stage = STAGE

    def __init__(self, graph: Graph, opts: CompileOptions):
        self.opts = opts
        self.clusters = Clusters(graph)

    def _kernel_graph(self, b: Node) -> Graph:
        return b.subgraph if b.subgraph is not None else build_composite([b], set(b.outputs))[0].subgraph

    def names(self, a: Node, b: Node) -> tuple[str, str]:
        return label([a]), label(self.clusters.members[b])

    def admission(self, a: Node, b: Node) -> str | None:
        return epilogue_reason(a) or admit(b, self.opts, is_fusible, PASS_NAME)

    def rule(self, a: Node, b: Node) -> str | None:
        members = self.clusters.members[b]
        if len(members) > 1:
            return "the reader is the epilogue of another convolution already"
        if any(pattern_of(p) == Pattern.REDUCE for p in primitives(b)):
            return "the reader computes a reduction (an epilogue is elementwise)"
        if any(v.shape != a.out.shape for v in b.outputs):
            return f"a result of the reader is not of the convolution's shape {list(a.out.shape)}"
        return None

    def op_count(self, a: Node, b: Node) -> int:
        return 1 + len(compute_ops([b]))

    def kernels(self, a: Node, b: Node) -> list[Kernel]:
        sub = self._kernel_graph(b)
        return [Kernel(sub, lambda: estimate(sub, self.opts.core_num))]

    def creates_cycle(self, a: Node, b: Node) -> bool:
        return self.clusters.creates_cycle(a, b)

    def parts(self, a: Node, b: Node) -> list[Estimate]:
        y = a.out.type
        output_pass = elementwise_estimate(y.size, 0.0, 2 * y.dtype.itemsize, 2 * y.nbytes, self.opts.core_num)
        return [estimate(self._kernel_graph(b), self.opts.core_num), output_pass]

    def no_saving(self, parts: list[Estimate], fused: list[Estimate]) -> str:
        return refusal_reason(parts, fused[0])


def conv_epilogue(graph: Graph, opts: CompileOptions) -> Graph:
    """Each Conv2D merged with the first elementwise kernel reading its result that can_fuse accepts."""
    if not any(n.op == "Conv2D" for n in graph.nodes):   # the clusters' index costs a pass over the graph
        return graph
    view = EpilogueView(graph, opts)
    clusters = view.clusters
    made = []
    for conv in graph.nodes:
        if conv.op != "Conv2D" or conv not in clusters.cluster_of:
            continue
        for reader in clusters.users.get(conv, ()):
            if reader not in clusters.cluster_of:
                continue
            record = can_fuse(conv, clusters.cluster_of[reader], view)
            if record.accepted:
                clusters.merge(conv, clusters.cluster_of[reader])
                made.append((record, conv))
                break
    if not made:
        return graph
    holder: dict[Node, str] = {}
    fused = fuse_groups(graph, clusters.groups(), holder)
    PassContext.current().log.follow({n.name: (holder[n],) for n in graph.nodes
                                      if n.subgraph is not None and n in holder})
    for record, conv in made:
        record.composites = (holder[conv],)
    return fused
