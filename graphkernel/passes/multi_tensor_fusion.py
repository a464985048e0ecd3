"""Multi-tensor fusion (opt_level 1): an optimizer's updates, one kernel per Parameter with one formula,
become one launch over all of them (kernels/multi_tensor.py renders it).

    p0, m0, v0, g0 ──> {update} ──> p0', m0', v0'       p*, m*, v*, g* ──> {update ‖ update ‖ ...}
    p1, m1, v1, g1 ──> {update} ──> p1', m1', v1'                           one launch over n0, n1, ...

The candidates are the kernels of the optimizer phase (`ir.autodiff.update_nodes`: nodes computing
only Parameter updates), composites or fusible primitives, whose kernel is elementwise over one flat
axis: every buffer of its size or of size 1, as the update of a Parameter of any shape is. Kernels
with the same kernel code up to their size (one `kernels.layout.KernelSpec`, its float constants
arguments) and the same constants, bit for bit (`kernel_key`), are merged in graph order,
each candidate asked through `fusion_rules.can_fuse` (the fusion search, `fusion_driver.Search`, with
this pass's rule and kernel) whether it joins the group so far:

    legality   admission as every fusion pass has it (the *_cluster_ops flags, fusion_switch_file's
               reduce and broadcast switches, storage dtypes); the rule: neither reads the other (the
               parts of one launch are independent); the op limit counts one part's primitives (the
               kernel's code is one part's formula, looped over the tensors)
    cycles     no path from a member through another kernel into the candidate
    profit     the parts, timed back to back, against one launch over their elements together
               (cost_model.joint_estimate): a launch saved per part, and more threads for small parts

Apart or together the kernels move the same bytes, and each element is still computed by itself, so
the bits do not change. A group holds at most `kernels.multi_tensor.MAX_TENSORS` kernels; a longer
one is cut in graph order into launches of that many. Each decision is logged, its reason prefixed
"multi-tensor: "; an accepted one's figures say how many tensors the launch has so far (`tensors`).
"""
from __future__ import annotations

from ir.autodiff import update_nodes
from ir.graph import Graph, Node
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.cost_model import back_to_back, joint_estimate, refusal_reason
from graphkernel.passes.fusion_driver import Search
from graphkernel.passes.fusion_rules import can_fuse
from graphkernel.passes.fusion_utils import build_composite
from kernels.fusible import Unsupported
from kernels.layout import describe, scalar_bits
from kernels.multi_tensor import MAX_TENSORS

STAGE = "composite"


def kernel_key(node: Node):
    """What makes updates one multi-tensor kernel (kernels.multi_tensor.describe_multi): the KernelSpec of
    the kernel of a composite, or of a fusible primitive as the composite of it would be, its constants
    as the kernel's arguments, and their bits (one launch passes one set). None unless the kernel is
    elementwise over one flat axis."""
    if node.subgraph is None:
        if not is_fusible(node):
            return None
        node, _ = build_composite([node], set(node.outputs))
    try:
        spec, _ = describe(node.subgraph, const_arguments=True)
    except Unsupported:     # no one iteration shape: no candidate
        return None
    return (spec, scalar_bits(node.subgraph)) if spec.rank == 1 and not spec.has_reduce else None


def independent(search: Search, a: Node, b: Node) -> str | None:
    """Multi-tensor fusion's rule on the group so far and a candidate: why they are not independent."""
    if search.one_reads_the_other(a, b):
        return "one reads the other (the parts of one launch are independent)"
    return None


def points(nodes: list[Node]) -> int:
    """The elements a kernel of these parts walks: each part's size (its largest result)."""
    return sum(max(t.size for t in n.types) for n in nodes)


class _MultiTensorSearch(Search):
    """The fusion search's view of a multi-tensor merge: the group so far (a) and a candidate (b), parts of
    one kernel code over their own sizes."""

    def op_count(self, a: Node, b: Node) -> int:
        return self.facts(b).count      # the kernel's code is one part's, and every part is b's kernel

    def merged_kernel(self, a: Node, b: Node):
        """One launch over both (known by the parts' estimates: one code over one flat axis is one kernel)."""
        members = self.clusters.members
        parts = [self.estimate(a), self.estimate(b)]
        return None, lambda: joint_estimate(parts, points(members[a] + members[b]), self.opts.core_num), None

    def parts(self, a: Node, b: Node):
        return back_to_back(super().parts(a, b))

    def no_saving(self, parts, fused) -> str:
        return refusal_reason(parts, fused[0])


def multi_tensor_fusion(graph: Graph, opts: CompileOptions) -> Graph:
    """Merge the optimizer phase's composites of one kernel into multi-tensor composites."""
    updates = update_nodes(graph)
    groups: dict = {}
    for node in graph.nodes:
        if node in updates:
            key = kernel_key(node)
            if key is not None:
                groups.setdefault(key, []).append(node)
    if all(len(nodes) < 2 for nodes in groups.values()):
        return graph
    search = _MultiTensorSearch(graph, opts, STAGE, is_fusible, "multi-tensor fusion", independent,
                                "multi-tensor: ")
    clusters = search.clusters
    for nodes in groups.values():
        head = None
        for node in nodes:
            if head is None or len(clusters.members[head]) == MAX_TENSORS:   # a full launch: the next begins
                head = node
                continue
            record = can_fuse(head, node, search)
            if record.accepted:
                head = search.merge(head, node, record)
                record.figures["tensors"] = len(clusters.members[head])
            elif search.facts(head).refusal is not None:   # a kernel refused on its own begins no group
                head = node
    return search.finish()
