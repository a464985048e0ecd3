"""Multi-tensor fusion (opt_level 1): an optimizer's updates, one kernel per Parameter with one formula,
become one launch over all of them (kernels/multi_tensor.py renders it).

    p0, m0, v0, g0 ──> {update} ──> p0', m0', v0'       p*, m*, v*, g* ──> {update ‖ update ‖ ...}
    p1, m1, v1, g1 ──> {update} ──> p1', m1', v1'                           one launch over n0, n1, ...

The candidates are the kernels of the optimizer phase (`ir.autodiff.update_nodes`: nodes computing
only Parameter updates), composites or fusible primitives, whose kernel is elementwise over one flat axis: every buffer of its size or of
size 1, as the update of a Parameter of any shape is. Kernels with the same kernel code up to their
size (one `kernels.layout.KernelSpec`) are merged in graph order; a candidate that depends on a member
of the group (through any path) is refused, since merging the two would make a cycle. Apart or
together the kernels move the same bytes; together they save a launch each, and each element is still
computed by itself, so the bits do not change. A group holds at most `kernels.multi_tensor.MAX_TENSORS`
kernels; a longer one is cut in graph order into launches of that many. Each merge and refusal is logged, its reason prefixed
"multi-tensor: ".
"""
from __future__ import annotations

from ir.autodiff import update_nodes
from ir.graph import Graph, Node
from graphkernel.settings.options import CompileOptions, PassContext
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.fusion_utils import build_composite, fuse_groups
from kernels.fusible import Unsupported
from kernels.layout import describe
from kernels.multi_tensor import MAX_TENSORS

STAGE = "composite"


def flat_spec(node: Node):
    """The KernelSpec of the kernel of a composite, or of a fusible primitive as the composite of it
    would be, when it is elementwise over one flat axis; else None."""
    if node.subgraph is None:
        if not is_fusible(node):
            return None
        node, _ = build_composite([node], set(node.outputs))
    try:
        spec, _ = describe(node.subgraph)
    except Unsupported:     # no one iteration shape: no candidate
        return None
    return spec if spec.rank == 1 and not spec.has_reduce else None


def multi_tensor_fusion(graph: Graph, opts: CompileOptions) -> Graph:
    """Merge the optimizer phase's composites of one kernel into multi-tensor composites."""
    updates = update_nodes(graph)
    log = PassContext.current().log
    groups: dict = {}
    for node in graph.nodes:
        if node in updates:
            spec = flat_spec(node)
            if spec is not None:
                groups.setdefault(spec, []).append(node)
    candidates = [n for nodes in groups.values() if len(nodes) > 1 for n in nodes]
    if not candidates:
        return graph
    bit = {n: 1 << k for k, n in enumerate(candidates)}
    depends: dict[Node, int] = {}     # the candidates a node depends on, through any path
    for node in graph.nodes:
        mask = 0
        for v in node.inputs:
            if v.node in depends:
                mask |= depends[v.node] | bit.get(v.node, 0)
        depends[node] = mask
    merged = []
    for nodes in groups.values():
        if len(nodes) < 2:
            continue
        group, members = [nodes[0]], bit[nodes[0]]
        for node in nodes[1:]:
            if depends[node] & members:
                log.add(STAGE, [group[0].name, node.name], False,
                             "multi-tensor: it depends on a member of the group (one launch would make a cycle)")
                continue
            group.append(node)
            members |= bit[node]
        for k in range(0, len(group), MAX_TENSORS):
            chunk = group[k:k + MAX_TENSORS]
            if len(chunk) > 1:
                record = log.add(STAGE, [n.name for n in chunk], True,
                                 f"multi-tensor: {len(chunk)} updates of one kernel, one launch",
                                 tensors=len(chunk))
                merged.append((chunk, record))
    if not merged:
        return graph
    holders: dict[Node, str] = {}
    fused = fuse_groups(graph, [g for g, _ in merged], holders)
    for group, record in merged:
        record.composites = (holders[group[0]],)
    log.follow({n.name: (holders[n],) for n in graph.nodes if n.subgraph is not None and n in holders})
    return fused
