"""Multi-tensor kernels: one launch applies one elementwise kernel to many tensors of different sizes
(an optimizer's update of each of its Parameters: one formula, one launch for all of them).

    a Composite whose subgraph is T disjoint parts, each the same flat elementwise kernel (one
    KernelSpec of rank 1: every buffer of the part's size or of size 1) over its own size n_t
      -> kernel(buffers..., counts, constants..., block_dim, tile, width)
         a buffer every part reads from one array (the learning rate) is one array argument; a buffer
         with an array per part is a tuple of T arrays (a numba UniTuple, indexed at run time);
         counts: int64[T], the parts' sizes; constants: the float scalars every part holds
         (kernels.layout.argument_consts)

The blocks share the concatenated flat space (n_0 + ... + n_{T-1}) as an elementwise kernel's blocks
share its one tensor: block b walks, for each tensor t, the part of its share that falls in
[base_t, base_t + n_t), in segments of `tile` elements. Each element is computed by itself, so no
result depends on block_dim or on how the tensors are grouped: the bits are the single kernels'.

Parts are found by `split_parts`: the connected components of the subgraph (scalar constants and the
subgraph's inputs connect nothing), each part's inputs in the order of first use, so that parts of one
structure describe to one KernelSpec. A composite whose parts differ is not a multi-tensor kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

from ir.graph import Graph, Node, Value
from kernels.fusible import Unsupported
from kernels.layout import KernelSpec, describe, scalar_bits, scalar_values
from kernels.elementwise import Elementwise

# The most tensors one kernel takes. numba indexes a tuple at run time through a switch over its
# elements, and the build time grows faster than the count: measured, 3 s at 8 tensors, 5 s at 32,
# 14 s at 64, 37 s at 128 (a 24-layer BERT's ~400 Parameters did not build in minutes).
MAX_TENSORS = 32


@dataclass(frozen=True)
class Part:
    graph: Graph                  # one tensor's kernel
    inputs: tuple[int, ...]       # index in the composite's inputs of each of its inputs
    outputs: tuple[int, ...]      # index in the composite's outputs of each of its outputs


@dataclass(frozen=True)
class MultiTensorSpec:
    spec: KernelSpec              # the kernel of one tensor, rank 1
    tensors: int
    shared: tuple[bool, ...]      # per input of `spec`: one array for every tensor

    @property
    def op_names(self) -> tuple[str, ...]:
        return self.spec.op_names

    def key(self) -> str:
        return repr(self)


def split_parts(sub: Graph) -> list[Part] | None:
    """The disjoint parts of `sub`, or None when it has fewer than two."""
    parent: dict[Node, Node] = {}

    def find(n: Node) -> Node:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    compute = [n for n in sub.nodes if n.op != "Const"]
    for n in compute:
        parent[n] = n
    for n in compute:
        for v in n.inputs:
            if v.node in parent:
                a, b = find(n), find(v.node)
                if a is not b:
                    parent[a] = b
    roots = list(dict.fromkeys(find(n) for n in compute))
    if len(roots) < 2:
        return None
    position = {v: k for k, v in enumerate(sub.inputs)}
    out_index: dict[Value, list[int]] = {}
    for k, v in enumerate(sub.outputs):
        out_index.setdefault(v, []).append(k)
    members: dict[Node, list[Node]] = {root: [] for root in roots}
    for n in compute:
        members[find(n)].append(n)
    parts = []
    for root, nodes in members.items():
        consts = list(dict.fromkeys(v.node for n in nodes for v in n.inputs if v.node is not None
                                    and v.node.op == "Const"))
        used = list(dict.fromkeys(v for n in nodes for v in n.inputs if v in position))
        produced = {v for n in nodes for v in n.outputs}
        outputs = [(k, v) for k, v in enumerate(sub.outputs) if v in produced]
        if not outputs:
            return None
        graph = Graph(used, consts + nodes, [v for _, v in outputs])
        parts.append(Part(graph, tuple(position[v] for v in used), tuple(k for k, _ in outputs)))
    if sum(len(p.outputs) for p in parts) != len(sub.outputs):   # an input passed through: no part's
        return None
    return parts


def multi_parts(sub: Graph) -> list[Part] | None:
    """The parts of a multi-tensor kernel: a subgraph whose disjoint parts share no iteration shape (parts
    of one shape make one ordinary kernel)."""
    try:
        describe(sub)
        return None
    except Unsupported:
        return split_parts(sub)


def describe_multi(parts: list[Part]) -> tuple[MultiTensorSpec, tuple[int, ...]] | None:
    """The multi-tensor spec and the tensors' sizes, or None unless every part is one rank-1 elementwise
    kernel, its constants (the kernel's arguments) of the same bits in every part (`scalar_bits`)."""
    described = [describe(p.graph, const_arguments=True) for p in parts]
    spec = described[0][0]
    if spec.has_reduce or spec.rank != 1 or any(s != spec or len(z) != 1 for s, z in described):
        return None
    if len({scalar_bits(p.graph) for p in parts}) != 1:
        return None
    shared = tuple(len({p.inputs[i] for p in parts}) == 1 for i in range(len(spec.inputs)))
    return MultiTensorSpec(spec, len(parts), shared), tuple(z[0] for _, z in described)


def local_aliases(parts: list[Part], mspec: MultiTensorSpec, ins: tuple[int, ...],
                  homes: list[int | None]) -> tuple[tuple[int, int], ...]:
    """(k, i) of the part kernel when, in every part, output k's planned buffer is input i's (storage ids:
    `ins` per composite input, `homes` per composite output)."""
    pairs = []
    for k in range(len(mspec.spec.outputs)):
        for i in range(len(mspec.spec.inputs)):
            if not mspec.shared[i] and all(homes[p.outputs[k]] is not None and homes[p.outputs[k]] == ins[p.inputs[i]]
                                           for p in parts):
                pairs.append((k, i))
                break
    return tuple(pairs)


def launcher(fn, parts: list[Part], mspec: MultiTensorSpec, counts, num_inputs: int, passed_outputs: list[int]):
    """A callable taking the composite's arrays as the executor passes them (its inputs, then the outputs
    not stored through an input, in `passed_outputs` order, then block_dim, tile, width and the range of
    blocks to run) that packs them into the kernel's arguments, the counts and constants added."""
    aliased = dict(mspec.spec.in_place)
    layout: list = []
    for i, shared in enumerate(mspec.shared):
        layout.append(parts[0].inputs[i] if shared else tuple(p.inputs[i] for p in parts))
    slot = {k: num_inputs + j for j, k in enumerate(passed_outputs)}
    for k in range(len(mspec.spec.outputs)):
        if k not in aliased:
            layout.append(tuple(slot[p.outputs[k]] for p in parts))
    layout = tuple(layout)

    scalars = scalar_values(parts[0].graph)

    def launch(*arrays):
        args = [arrays[g] if isinstance(g, int) else tuple([arrays[j] for j in g]) for g in layout]
        fn(*args, counts, *scalars, *arrays[-5:])
    return launch


class MultiTensor(Elementwise):
    """The elementwise kernel of `mspec.spec`, once per tensor (see the module docstring)."""

    def __init__(self, mspec: MultiTensorSpec, variant: str, helpers: set[str] = frozenset()):
        super().__init__(mspec.spec, variant, helpers)
        self.mspec = mspec

    def per_tensor(self, key: tuple) -> bool:
        kind, index = self.home.get(key, key)
        return kind == "out" or not self.mspec.shared[index]

    def argument(self, key: tuple) -> str:
        return self.names(*self.home.get(key, key))

    def name(self, key: tuple) -> str:
        """The array the loops read: the current tensor's for a buffer with one per tensor."""
        key = self.home.get(key, key)
        return self.names("mt", *key) if self.per_tensor(key) else self.names(*key)

    def arguments(self) -> list[str]:
        return ([self.argument(b) for b, _ in self.buffers] + ["counts"] + [self.names("sc", n) for n in self.scalars]
                + ["block_dim", "tile", "width", "block_lo", "block_hi"])

    def docstring(self, name: str) -> None:
        self.w(f'"""{name}: {self.variant} kernel over {self.mspec.tensors} tensors, counts[t] elements each.')
        for b, pres in self.buffers:
            kind = "a tuple of one array per tensor" if self.per_tensor(b) else "one array for every tensor"
            size = "the tensor's size" if pres[0] else "1"
            self.w(f"    {self.argument(b)}: {self.dtype_of(b)}[{size}], {kind}")
        for (_, k), (_, i) in self.home.items():
            self.w(f"    output {k}: stored into {self.argument(('in', i))} (a Parameter updated in place)")
        self.w('"""')

    def render(self, name: str) -> str:
        w, d = self.w, self.dims[0]
        with w.block(self.signature(name)):
            self.docstring(name)
            self.emit_consts()
            w("total = 0")
            with w.block("for tn in range(len(counts)):"):
                w("total += counts[tn]")
            with w.block(self.emit_grid_header("total")):
                self.emit_block_span()
                w("base = 0")
                with w.block("for tn in range(len(counts)):"):
                    w(f"{d} = counts[tn]")
                    w("lo = max(start - base, 0)")
                    w(f"hi = min(stop - base, {d})")
                    w(f"base += {d}")
                    with w.block("if lo < hi:"):
                        for b, _ in self.buffers:
                            if self.per_tensor(b):
                                w(f"{self.name(b)} = {self.argument(b)}[tn]")
                        self.emit_walk("lo", "hi")
        return w.text()
