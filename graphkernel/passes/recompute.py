"""Recompute fusion (opt_level >= 2, or --enable_recompute_fusion): duplicate cheap producers.

A value a kernel computes and other kernels read costs a write and a read per reader. When the slice
computing it is cheap (no reduction, at most RECOMPUTE_MAX_OPS primitives), each reading kernel can
compute it again from the slice's inputs instead, and the producer stops writing it:

    before:  C = {Mul, ReduceSum(ax 0)} -> (r0, h)        after:  C' = {Mul, ReduceSum(ax 0)} -> r0
             U = {ReduceSum(ax 1)} reads h                        U' = {Mul, ReduceSum(ax 1)}

(h is an extra output only because the two reductions cannot share a kernel). A producer left with
no output disappears. Every candidate goes through the same legality (`fusion_rules.can_fuse` on each
new kernel) and the cost model (the producer and its readers before, against after), and is logged.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ir.graph import Graph, Node, Value
from ir.ops import Pattern, pattern_of
from graphkernel.options import CompileOptions
from graphkernel.passes.composite_fusion import is_fusible
from graphkernel.passes.fusion_driver import label
from graphkernel.passes.fusion_rules import admit, kernel_estimate, kernel_reason
from graphkernel.passes.fusion_utils import (build_composite, drop_unused_consts, escape_finder, live_set,
                                             primitives, renumber_composites, restrict)

STAGE = "composite"
RECOMPUTE_MAX_OPS = 8
MAX_ROUNDS = 50


def recompute(graph: Graph, opts: CompileOptions) -> Graph:
    """Duplicate cheap produced values into the kernels that read them, where the cost model agrees."""
    decided: set = set()
    for _ in range(MAX_ROUNDS):
        readers = graph.users()
        live = live_set(graph)
        # values some dead node reads are left alone: rewriting their readers is DCE's business
        readers = {v: us for v, us in readers.items() if all(u in live for u in us)}
        ask = _Round(readers, escape_finder(graph), set(graph.outputs), decided, opts)
        for producer in graph.nodes:
            replaced = ask.first_accepted(producer) if producer in live else None
            if replaced is not None:
                graph = _rebuild(graph, replaced)
                break
        else:
            return graph
    return graph


@dataclass
class _Round:
    """What one round over the graph asks its candidates with (the graph is rebuilt between rounds)."""
    readers: dict            # value -> its (live) readers
    escaping: Callable       # nodes -> their values read outside them (fusion_utils.escape_finder)
    outputs: set             # the graph's outputs
    decided: set             # candidates asked already (in any round)
    opts: CompileOptions

    def first_accepted(self, producer: Node) -> dict | None:
        """The replacements of the first accepted candidate recomputing a result of `producer`."""
        if producer.op == "Const":
            return None
        for v in producer.outputs:
            users = list(dict.fromkeys(self.readers.get(v, ())))
            if not users or v in self.outputs:
                continue
            key = (_structure(producer), v.index, tuple(_structure(u) for u in users))
            if key in self.decided:
                continue
            self.decided.add(key)
            replaced = _try(producer, v, users, self.escaping, self.opts)
            if replaced is not None:
                return replaced
        return None


def _structure(node: Node):
    return (node.op, node.attrs, node.types, node.subgraph.key() if node.subgraph is not None else None)


def _try(producer: Node, v: Value, users: list[Node], escaping: Callable, opts: CompileOptions) -> dict | None:
    """The replacements (see `_rebuild`) if recomputing `v` in its users is accepted, else None."""
    kept = [i for i, out in enumerate(producer.outputs) if out != v and out in escaping([producer])]
    if not kept and len(users) < 2:
        return None  # moving a whole producer into its only reader is fusion: composite fusion's call
    if admit(producer, opts, is_fusible, "recompute") is not None:
        return None  # not a kernel we generate: nothing to recompute
    names = (f"{label([producer])}#{v.index}", "+".join(label([u]) for u in users))
    for n in users:
        reason = admit(n, opts, is_fusible, "recompute")
        if reason is not None:
            opts.log.add(STAGE, names, False, f"recompute: {reason}")
            return None
    slice_node, _ = restrict(producer, [v.index])
    ops = [p for p in primitives(slice_node) if p.op != "Const"]
    if any(pattern_of(p) == Pattern.REDUCE for p in ops) or len(ops) > RECOMPUTE_MAX_OPS:
        opts.log.add(STAGE, names, False, f"recompute: the slice computing it ({len(ops)} ops) is not cheap "
                     f"(a reduction, or more than {RECOMPUTE_MAX_OPS} ops)")
        return None

    rest, rest_map = restrict(producer, kept) if kept else (None, {})
    new_users: dict[Node, tuple[Node, dict[Value, Value]]] = {}
    for u in users:
        private, _ = restrict(producer, [v.index])
        rewired = u.replace(inputs=tuple(private.out if x == v else x for x in u.inputs))
        node, outer = build_composite([private, rewired], {rewired.outputs[i] for i, o in enumerate(u.outputs)
                                                           if o in escaping([u])})
        reason = kernel_reason(node.subgraph, opts)
        if reason is not None:
            opts.log.add(STAGE, names, False, f"recompute: {reason}")
            return None
        new_users[u] = (node, {u.outputs[rewired.outputs.index(o)]: n for o, n in zip(outer, node.outputs)})

    before = [kernel_estimate(producer, opts)] + [kernel_estimate(u, opts) for u in users]
    after = ([kernel_estimate(rest, opts)] if rest is not None else []) + [
        kernel_estimate(node, opts) for node, _ in new_users.values()]
    saved = sum(e.seconds for e in before) - sum(e.seconds for e in after)
    figures = {"before_us": round(sum(e.seconds for e in before) * 1e6, 3),
               "after_us": round(sum(e.seconds for e in after) * 1e6, 3), "saved_us": round(saved * 1e6, 3)}
    if saved <= 0:
        opts.log.add(STAGE, names, False, "recompute: computing the slice again in every reader costs "
                     "more than the write and reads it saves", **figures)
        return None
    opts.log.add(STAGE, names, True, "recompute: cheap producer duplicated into its readers", **figures)
    replaced = {producer: (rest, rest_map), **new_users}
    return replaced


def _rebuild(graph: Graph, replaced: dict) -> Graph:
    """The graph with each key node replaced by (new node or None, map of its old results to new)."""
    value_map: dict[Value, Value] = {}
    nodes: list[Node] = []
    for node in graph.nodes:
        new, result_map = replaced.get(node, (node, dict(zip(node.outputs, node.outputs))))
        if new is None:
            continue
        inputs = tuple(value_map.get(x, x) for x in new.inputs)
        placed = new if inputs == new.inputs else new.replace(inputs=inputs)
        nodes.append(placed)
        index = {o: i for i, o in enumerate(new.outputs)}
        value_map.update({old: placed.outputs[index[n]] for old, n in result_map.items()})
    out = Graph(graph.inputs, nodes, [value_map.get(x, x) for x in graph.outputs])
    return renumber_composites(drop_unused_consts(out))
