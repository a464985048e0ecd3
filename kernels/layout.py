"""The loop structure of one kernel, without its sizes: what the codegen renders and the cache keys.

    subgraph --fusible.analyze--> iteration shape S, reduce axes A
             --collapse-->        axes of S that are 1 dropped; adjacent axes with the same pattern
                                  (reduced or not, and for every buffer present or broadcast) merged
    KernelSpec: per collapsed axis "reduce?", per buffer a presence bit per axis, the nodes in a
                canonical form (op, code-relevant attrs, input refs, dtypes): no sizes
    sizes:      the collapsed dims, passed to the kernel at run time
    scalars:    the float scalar constants a kernel takes as arguments (`argument_consts`), so one
                compiled kernel serves `x * 0.5` and `x * 2.0`

Two shapes with the same spec share one compiled kernel: `Add(f32[4,4], f32[4,4])` and
`Add(f32[1000], f32[1000])` both collapse to one full axis. Buffers are passed flat (1-D, C order);
a buffer's stride on axis a is the product of the dims after a it is present on, 0 where absent.
An input may be stored in another order of the axes (`layouts`: a convolution's GEMM result is
[C, N, H*W] while the kernel walks [N, C, H*W]): its strides follow that order, the axes it
separates are not merged, and the last axis stays its innermost (elementwise kernels only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ir.dtypes import DType
from ir.graph import Graph, Node, Value
from ir.ops import Pattern, get
from kernels.emitters import VALUE_SPECIALIZED
from kernels.fusible import analyze

# Attributes whose meaning the layout already carries (axes, target shapes): not part of the code.
_LAYOUT_ATTRS = {"axis", "keep_dims", "shape"}


@dataclass(frozen=True)
class NodeSpec:
    op: str
    attrs: tuple                       # code-relevant attrs, canonical
    args: tuple                        # refs: ("in", i) | ("v", node_index, out_index)
    dtypes: tuple[DType, ...]          # result dtypes
    in_dtypes: tuple[DType, ...]
    reduced: bool                      # its value does not vary over the reduce axes
    phase: int                         # reductions on its longest input path


@dataclass(frozen=True)
class KernelSpec:
    reduce_axes: tuple[bool, ...]      # per collapsed axis
    inputs: tuple[tuple[DType, tuple[bool, ...]], ...]    # (dtype, presence per axis)
    outputs: tuple[tuple[DType, tuple[bool, ...]], ...]
    nodes: tuple[NodeSpec, ...]
    results: tuple                     # refs of the outputs
    in_place: tuple[tuple[int, int], ...] = ()   # (k, i): output k is stored into input i's buffer
    layouts: tuple[tuple[int, tuple[int, ...]], ...] = ()   # (i, order): input i is stored with its
                                       # collapsed axes in `order`, outermost first (elementwise only)

    @property
    def aliased(self) -> dict[int, int]:
        """Output k -> the input whose buffer it is stored into (elementwise kernels only)."""
        return dict(self.in_place)

    @property
    def rank(self) -> int:
        return len(self.reduce_axes)

    # the facts below are asked per launch choice (kernels/launch.py, at every new shape's plan): computed
    # once per spec (cached in the instance's __dict__, outside the fields that make its value and key)
    @cached_property
    def has_reduce(self) -> bool:
        return any(self.reduce_axes)

    @cached_property
    def op_names(self) -> tuple[str, ...]:
        return tuple(n.op for n in self.nodes if n.op != "Const")

    @cached_property
    def op_in_dtypes(self) -> tuple[tuple[str, str], ...]:
        """(op, its first input's dtype name) of every node with inputs (aicore.runs_single_core asks)."""
        return tuple((n.op, n.in_dtypes[0].name) for n in self.nodes if n.in_dtypes)

    @cached_property
    def num_passes(self) -> int:
        """Sweeps over the reduce axes: one per phase that reductions or full outputs need."""
        need = [self.nodes[n].phase for n in range(len(self.nodes))
                if get(self.nodes[n].op).pattern == Pattern.REDUCE]
        need += [self.phase_of(r) for r, (_, pres) in zip(self.results, self.outputs)
                 if self.full_buffer(pres)]
        return max(need, default=0) + 1 if self.has_reduce else 1

    def phase_of(self, ref) -> int:
        if ref[0] == "in":
            return 0
        node = self.nodes[ref[1]]
        return node.phase + (1 if get(node.op).pattern == Pattern.REDUCE else 0)

    def reduced_ref(self, ref) -> bool:
        if ref[0] == "in":
            return not self.full_buffer(self.inputs[ref[1]][1])
        return self.nodes[ref[1]].reduced

    def full_buffer(self, presence) -> bool:
        """Whether a buffer varies over some reduce axis."""
        return any(p and r for p, r in zip(presence, self.reduce_axes))

    def key(self) -> str:
        return repr(self)


def _const_attr(value) -> tuple:
    arr = value.array
    return ("value", arr.dtype.str, arr.reshape(-1)[0].item() if arr.size == 1 else arr.tobytes())


def const_value(node: NodeSpec):
    """The value a Const node's kernel code holds, or None when the kernel takes it as an argument."""
    attr = node.attrs[0]
    return attr[2] if attr[0] == "value" else None


def argument_consts(graph: Graph) -> list[Node]:
    """The Consts a kernel of `graph` takes as arguments (float64, in node order) instead of holding
    them as literals: the float scalars whose value no emitter writes code for (Pow by 2 is x * x:
    kernels.emitters.VALUE_SPECIALIZED). Integers and booleans stay literals: LLVM turns an integer
    division by a literal into multiplications, and few kernels differ by one."""
    specialized = {v for n in graph.nodes if n.op in VALUE_SPECIALIZED for v in n.inputs}
    return [n for n in graph.nodes if n.op == "Const" and n.out.dtype.is_float and n.out.type.size == 1
            and n.out not in specialized]


def scalar_values(graph: Graph) -> tuple[float, ...]:
    """The values of `argument_consts(graph)`, as a kernel of `graph` takes them (exact in float64)."""
    return tuple(float(n.attr("value").array.reshape(-1)[0]) for n in argument_consts(graph))


def scalar_bits(graph: Graph) -> bytes:
    """The bits of `scalar_values(graph)`: what two kernels sharing one launch must agree on (0.0 and
    -0.0 compare equal as floats and differ here; so do NaNs of another sign)."""
    return np.array(scalar_values(graph), np.float64).tobytes()


def _code_attrs(node, argument: bool) -> tuple:
    """The attrs codegen reads: the op's declared ones (an attr the op does not declare, as a hand-built
    or hostile graph may carry, changes no code and never reaches the key or the kernel's source); a
    Const's value, or ("argument",) when the kernel takes it as an argument (its dtype is the node's)."""
    if node.op == "Const":
        return (("argument",),) if argument else (_const_attr(node.attr("value")),)
    declared = {a.name for a in get(node.op).attrs}
    return tuple((k, v) for k, v in node.attrs if k in declared and k not in _LAYOUT_ATTRS)


def describe(graph: Graph, const_arguments: bool = False,
             layouts: dict[int, tuple[int, ...]] | None = None) -> tuple[KernelSpec, tuple[int, ...]]:
    """The spec and the collapsed sizes of a kernel computing `graph` (fusible's contract); with
    `const_arguments` (lowering, the multi-tensor pass), the kernel takes `argument_consts(graph)` as
    arguments (their values: `scalar_values`), else it holds every constant as a literal. `layouts`
    maps an input to the order its buffer stores the iteration axes in (outermost first), when that
    is not the iteration order: a ValueError when its innermost kept axis is not the kernel's last."""
    ks = analyze(graph)
    layouts = layouts or {}
    arguments = set(argument_consts(graph)) if const_arguments else set()
    shape, axes = ks.shape, set(ks.reduce_axes)
    buffers = list(graph.inputs) + list(graph.outputs)
    # per original axis: the pattern that decides whether it merges with its neighbour
    kept = [a for a in range(len(shape)) if shape[a] != 1]
    orders = {i: [a for a in order if shape[a] != 1] for i, order in layouts.items()}

    def adjacent(a: int, b: int) -> bool:
        """Axis b follows axis a in every input's memory order."""
        return all(o.index(b) == o.index(a) + 1 for o in orders.values())
    groups: list[list[int]] = []
    signature = None
    for a in kept:
        sig = (a in axes,) + tuple(ks.aligned[b][a] != 1 for b in buffers)
        if groups and sig == signature and adjacent(groups[-1][-1], a):
            groups[-1].append(a)
        else:
            groups.append([a])
            signature = sig
    if not groups:  # a scalar kernel: one axis of size 1, every buffer present
        sizes = (1,)
        pres = {b: (True,) for b in buffers}
        reduce_axes = (False,)
    else:
        sizes = tuple(math.prod(shape[a] for a in g) for g in groups)   # symbolic sizes stay so (ir/symbolic.py)
        pres = {b: tuple(ks.aligned[b][g[0]] != 1 for g in groups) for b in buffers}
        reduce_axes = tuple(g[0] in axes for g in groups)

    stored = []
    for i, order in sorted(orders.items()):
        collapsed = tuple(sorted(range(len(groups)), key=lambda g: order.index(groups[g][0])))
        if collapsed and collapsed[-1] != len(groups) - 1:
            raise ValueError(f"input {i} stored in axis order {layouts[i]}: its innermost axis is not the "
                             "kernel's last, so a segment of a row is not contiguous in it")
        if collapsed != tuple(range(len(groups))):
            stored.append((i, collapsed))

    refs: dict[Value, tuple] = {v: ("in", i) for i, v in enumerate(graph.inputs)}
    nodes = []
    for n, node in enumerate(graph.nodes):
        reduced = all(ks.aligned[v][a] == 1 for v in node.outputs for a in axes)
        op, attrs = node.op, _code_attrs(node, node in arguments)
        if get(op).pattern == Pattern.REDUCE and node not in ks.reductions:
            op, attrs = "Cast", ()  # it reduces size-1 axes only: a Cast to its own dtype, an identity
        nodes.append(NodeSpec(op, attrs, tuple(refs[v] for v in node.inputs),
                              tuple(t.dtype for t in node.types),
                              tuple(v.dtype for v in node.inputs), reduced,
                              max((ks.phase[v] for v in node.inputs), default=0)))
        for v in node.outputs:
            refs[v] = ("v", n, v.index)
    spec = KernelSpec(reduce_axes,
                      tuple((v.dtype, pres[v]) for v in graph.inputs),
                      tuple((v.dtype, pres[v]) for v in graph.outputs),
                      tuple(nodes), tuple(refs[v] for v in graph.outputs), layouts=tuple(stored))
    return spec, sizes
