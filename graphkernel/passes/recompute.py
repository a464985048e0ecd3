"""Recompute fusion (opt_level >= 2, or --enable_recompute_fusion): duplicate cheap producers.

A value a kernel computes and other kernels read costs a write and a read per reader. When the slice
computing it is cheap (no reduction, at most RECOMPUTE_MAX_OPS primitives), each reading kernel can
compute it again from the slice's inputs instead, and the producer stops writing it:

    before:  C = {Mul, ReduceSum(ax 0)} -> (r0, h)        after:  C' = {Mul, ReduceSum(ax 0)} -> r0
             U = {ReduceSum(ax 1)} reads h                        U' = {Mul, ReduceSum(ax 1)}

(h is an extra output only because the two reductions cannot share a kernel). A producer left with
no output disappears. Every candidate is decided and logged by `fusion_rules.can_fuse`, as every
fusion is: a = (producer, value), b = its readers; legality (admission, the slice is cheap, the op
limit, each new kernel), then the cost model (the producer and its readers before, against the
producer's rest and the new readers after). No cycle is possible: a copy reads what the producer read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ir.graph import Graph, Node, Value
from ir.ops import Pattern, pattern_of
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.pass_context import FusionLog, FusionRecord, PassContext
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.fusion_driver import label
from graphkernel.passes.cost_model import Estimate
from graphkernel.passes.fusion_rules import Kernel, admit, can_fuse, kernel_estimate
from graphkernel.passes.fusion_utils import (build_composite, compute_ops, drop_unused_consts, escape_finder,
                                             live_set, primitives, renumber_composites, restrict)

STAGE = "composite"
RECOMPUTE_MAX_OPS = 8
MAX_ROUNDS = 50


def recompute(graph: Graph, opts: CompileOptions) -> Graph:
    """Duplicate cheap produced values into the kernels that read them, where the cost model agrees.

    A round asks every candidate of the graph in order and applies each accepted one that touches no
    node an earlier acceptance of the round touched (its producer, its readers, the producers of what
    the producer reads, whose readers it changes); the others wait for the next round, asked again on
    the rebuilt graph. A refusal is remembered by the candidate's structure, so the same slice in every
    layer of a deep network is costed once."""
    refused: set = set()
    for _ in range(MAX_ROUNDS):
        readers = graph.users()
        live = live_set(graph)
        # values some dead node reads are left alone: rewriting their readers is DCE's business
        readers = {v: us for v, us in readers.items() if all(u in live for u in us)}
        ask = _Round(readers, escape_finder(graph), set(graph.outputs), refused, opts)
        accepted: list[_Candidate] = []
        touched: set[Node] = set()
        for producer in graph.nodes:
            if producer in live and producer not in touched:
                candidate = ask.first_accepted(producer, touched)
                if candidate is not None:
                    accepted.append(candidate)
                    touched.update(candidate.touches())
        if not accepted:
            return graph
        graph = _rebuild(graph, accepted, PassContext.current().log)
    return graph


@dataclass
class _Round:
    """What one round over the graph asks its candidates with (the graph is rebuilt between rounds)."""
    readers: dict            # value -> its (live) readers
    escaping: Callable       # nodes -> their values read outside them (fusion_utils.escape_finder)
    outputs: set             # the graph's outputs
    refused: set             # the structures of candidates refused already (in any round)
    opts: CompileOptions

    def first_accepted(self, producer: Node, touched: set[Node]) -> _Candidate | None:
        """The first accepted candidate recomputing a result of `producer` whose readers no earlier
        acceptance of this round touched."""
        if producer.op == "Const":
            return None
        escaping = self.escaping([producer])
        for v in producer.outputs:
            users = list(dict.fromkeys(self.readers.get(v, ())))
            if not users or v in self.outputs or any(u in touched for u in users):
                continue
            kept = [i for i, out in enumerate(producer.outputs) if out != v and out in escaping]
            key = (_structure(producer), v.index, tuple(kept),
                   tuple((_structure(u), _escaping_indices(u, self.escaping)) for u in users))
            if key in self.refused:
                continue
            accepted = _try(producer, v, users, kept, self.escaping, self.opts)
            if accepted is not None:
                return accepted
            self.refused.add(key)
        return None


def _escaping_indices(node: Node, escaping: Callable) -> tuple[int, ...]:
    out = escaping([node])
    return tuple(i for i, v in enumerate(node.outputs) if v in out)


def _structure(node: Node):
    return (node.op, node.attrs, node.types, node.subgraph.key() if node.subgraph is not None else None)


def _try(producer: Node, v: Value, users: list[Node], kept: list[int], escaping: Callable,
         opts: CompileOptions) -> _Candidate | None:
    """The candidate recomputing `v` in its users (keeping the producer's outputs `kept`) when can_fuse
    accepts it, else None."""
    if not kept and len(users) < 2:
        return None  # moving a whole producer into its only reader is fusion: composite fusion's call
    if admit(producer, opts, is_fusible, "recompute") is not None:
        return None  # not a kernel we generate: nothing to recompute
    candidate = _Candidate(producer, v, users, kept, escaping, opts)
    candidate.record = can_fuse((producer, v), users, candidate)
    return candidate if candidate.record.accepted else None


class _Candidate:
    """can_fuse's view (`fusion_rules.FusionView`) of one recompute candidate: a = (producer, v), b = the
    readers of v. The fusion copies the slice computing v into every reader, and the producer keeps
    only its other outputs (`rest`, None when it has none left): the kernels it replaces are the
    producer and the readers, those it makes are the rest and the new readers."""
    stage, prefix = STAGE, "recompute: "

    def __init__(self, producer: Node, v: Value, users: list[Node], kept: list[int], escaping: Callable,
                 opts: CompileOptions):
        self.producer, self.v, self.users, self.kept, self.escaping, self.opts = \
            producer, v, users, kept, escaping, opts
        self.slice, _ = restrict(producer, [v.index])
        self.rest, self.rest_map = None, {}
        self.new_users: dict[Node, tuple[Node, dict[Value, Value]]] = {}
        self.record: FusionRecord | None = None     # can_fuse's answer

    def touches(self) -> set[Node]:
        """The nodes whose candidates this one's rebuild changes: the producer, the readers, and the
        producers of the slice's inputs (the new readers read them too)."""
        return {self.producer, *self.users, *(x.node for x in self.producer.inputs)}

    @property
    def replaced(self) -> dict:
        """What `_rebuild` replaces: the producer by its rest (or nothing), each reader by its new kernel."""
        return {self.producer: (self.rest, self.rest_map), **self.new_users}

    def names(self, a, b) -> tuple[str, str]:
        return f"{label([self.producer])}#{self.v.index}", "+".join(label([u]) for u in self.users)

    def admission(self, a, b) -> str | None:
        for n in (self.producer, *self.users):
            reason = admit(n, self.opts, is_fusible, "recompute")
            if reason is not None:
                return reason
        return None

    def slice_ops(self) -> list[Node]:
        return [p for p in primitives(self.slice) if p.op != "Const"]

    def rule(self, a, b) -> str | None:
        ops = self.slice_ops()
        if any(pattern_of(p) == Pattern.REDUCE for p in ops) or len(ops) > RECOMPUTE_MAX_OPS:
            return (f"the slice computing it ({len(ops)} ops) is not cheap (a reduction, or more than "
                    f"{RECOMPUTE_MAX_OPS} ops)")
        return None

    def op_count(self, a, b) -> int:
        return len(self.slice_ops()) + max(len(compute_ops([u])) for u in self.users)

    def kernels(self, a, b) -> list[Kernel]:
        producer, v, escaping = self.producer, self.v, self.escaping
        if self.kept:
            self.rest, self.rest_map = restrict(producer, self.kept)
        for u in self.users:
            private, _ = restrict(producer, [v.index])
            rewired = u.replace(inputs=tuple(private.out if x == v else x for x in u.inputs))
            node, outer = build_composite([private, rewired], {rewired.outputs[i] for i, o in enumerate(u.outputs)
                                                               if o in escaping([u])})
            self.new_users[u] = (node, {u.outputs[rewired.outputs.index(o)]: n
                                        for o, n in zip(outer, node.outputs)})
        made = ([self.rest] if self.rest is not None else []) + [node for node, _ in self.new_users.values()]
        return [Kernel(node.subgraph, lambda node=node: kernel_estimate(node, self.opts)) for node in made]

    def creates_cycle(self, a, b) -> bool:
        return False    # a private copy reads only the producer's inputs, and only its reader reads it

    def parts(self, a, b) -> list[Estimate]:
        return [kernel_estimate(n, self.opts) for n in (self.producer, *self.users)]

    def no_saving(self, parts: list[Estimate], fused: list[Estimate]) -> str:
        return "computing the slice again in every reader costs more than the write and reads it saves"


def _rebuild(graph: Graph, candidates: list[_Candidate], log: FusionLog) -> Graph:
    """The graph with each node an accepted candidate replaces replaced by (new node or None, map of its
    old results to new); the fusion log's records name the composites as the new graph numbers them."""
    replaced = {node: new for c in candidates for node, new in c.replaced.items()}
    value_map: dict[Value, Value] = {}
    nodes: list[Node] = []
    placed_of: dict[Node, Node] = {}
    for node in graph.nodes:
        new, result_map = replaced.get(node, (node, dict(zip(node.outputs, node.outputs))))
        if new is None:
            continue
        inputs = tuple(value_map.get(x, x) for x in new.inputs)
        placed = placed_of[node] = new if inputs == new.inputs else new.replace(inputs=inputs)
        nodes.append(placed)
        index = {o: i for i, o in enumerate(new.outputs)}
        value_map.update({old: placed.outputs[index[n]] for old, n in result_map.items()})
    out = Graph(graph.inputs, nodes, [value_map.get(x, x) for x in graph.outputs])
    names: dict[Node, str] = {}
    out = renumber_composites(drop_unused_consts(out), names)
    holder = {node: (names[p],) for node, p in placed_of.items() if p in names}
    readers = [tuple(holder[u][0] for u in c.users) for c in candidates]
    for c, names_ in zip(candidates, readers):
        holder.setdefault(c.producer, names_)     # a producer left with nothing: its work is theirs
    log.follow({n.name: holder[n] for n in graph.nodes if n.subgraph is not None and n in holder})
    for c, names_ in zip(candidates, readers):     # named after follow: these are the new graph's names
        c.record.composites = names_
    return out
