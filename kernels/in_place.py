"""Which Parameter updates a kernel writes straight into the Parameter's buffer, decided on the graph
before it is lowered.

    Assign(ref, value)      ref: a graph input (a Parameter); value: result k of a top-level node P

The node P computing `value` writes its result k into ref's buffer (no temporary, no copy) when

    nothing reads the old value after P    no node after P reads ref (or a Reshape view of it), and
                                            ref is no graph output
    P reads the old value only where it    P reads ref only as an elementwise kernel reading it at the
    writes the new one                      index it writes (results all of one size, ref that size)
    the buffer holds one new value         ref's buffer holds no Assign's value (a view of ref, a
                                            swap), value is no graph output and no other Assign's value

Otherwise a copy after the last step writes it (kernels/lower.py). An elementwise kernel that reads ref
as its input i and writes it as its result k is rendered with `KernelSpec.in_place` (k, i): result k
is stored through input i's slice, so LLVM sees a load and a store of one element of one array and
vectorizes the loop; two arguments for one buffer would make its run-time overlap check fail and the
loop run scalar (measured: an AdamWeightDecay update 1.6x slower).

Should the kernel of such a P fail to build, P runs on the numpy reference, which computes all of its
results before writing any: never as single-op kernels, which would write ref before reading it.
"""
from __future__ import annotations

from ir.graph import Graph, Node, Value
from kernels.fusible import Unsupported
from kernels.layout import describe
from kernels.multi_tensor import multi_parts


def storage_root(v: Value) -> Value:
    """The value whose buffer `v` is: a Reshape is a view of its input."""
    while v.node is not None and v.node.op == "Reshape":
        v = v.node.inputs[0]
    return v


def plan_in_place(graph: Graph, kernel_graph) -> dict[Value, Value]:
    """value -> ref for every Assign(ref, value) whose value is written straight into ref's buffer.
    `kernel_graph(node)`: the subgraph of the kernel computing a top-level node, None when the node is
    not a generated kernel."""
    assigns = [n for n in graph.nodes if n.op == "Assign"]
    if not assigns:
        return {}
    order = {node: k for k, node in enumerate(graph.nodes)}
    last_read: dict[Value, int] = {}        # buffer root -> the last node reading it
    for k, node in enumerate(graph.nodes):
        if node.op not in ("Assign", "Reshape"):
            for v in node.inputs:
                last_read[storage_root(v)] = k
    outputs = {storage_root(v) for v in graph.outputs if v.node.op != "Assign"}
    sources = [storage_root(n.inputs[1]) for n in assigns]    # the buffers the Assigns' values are in
    parts_of: dict[int, tuple] = {}      # id(subgraph) -> (subgraph, its multi-tensor parts): one split per kernel

    def multi_parts_of(sub: Graph):
        if id(sub) not in parts_of:
            parts_of[id(sub)] = (sub, multi_parts(sub))
        return parts_of[id(sub)][1]

    plan = {}
    for node in assigns:
        ref, value = node.inputs
        producer = value.node
        if (producer is None or producer not in order or producer.op in ("Const", "Reshape")
                or ref in sources or sources.count(value) > 1 or value in outputs or ref in outputs):
            continue
        if last_read.get(ref, -1) > order[producer]:
            continue
        reads_ref = [i for i, v in enumerate(producer.inputs) if storage_root(v) is ref]
        if reads_ref and not _same_index(producer, reads_ref, value.index, kernel_graph(producer), multi_parts_of):
            continue
        plan[value] = ref
    return plan


def _same_index(node: Node, positions: list[int], k: int, sub: Graph | None, multi_parts_of) -> bool:
    """The kernel of `node` computes its result k elementwise, of the size of its inputs at `positions`,
    which no other part of it reads (a multi-tensor kernel: the part holding result k, `multi_parts_of`
    its parts)."""
    if sub is None:
        return False
    parts = multi_parts_of(sub)
    if parts is not None:
        (part,) = [p for p in parts if k in p.outputs]
        if not set(positions) <= set(part.inputs) or any(
                set(positions) & set(p.inputs) for p in parts if p is not part):
            return False
        sub, outputs = part.graph, [node.outputs[j] for j in part.outputs]
    else:
        outputs = node.outputs
    sizes = {v.type.size for v in outputs}
    if len(sizes) != 1 or any(node.inputs[i].type.size not in sizes for i in positions):
        return False
    try:
        return not describe(sub)[0].has_reduce
    except Unsupported:      # no kernel: the build fails and the reference runs it (not in place)
        return False
