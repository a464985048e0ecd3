"""Building composites from groups of top-level nodes, and the graph surgery fusion passes share.

    group [n1, n2, n3] of top-level nodes (primitives or composites)      Composite "Fused_Mul_Add_Pow_0"
      values read from outside  -> composite inputs, first use first        inputs:  outside values
      scalar Consts read        -> copied into the subgraph                 subgraph: the group's
      larger Consts             -> stay outside, read as inputs                       primitives,
      values used outside       -> composite outputs (multi-output)                   flattened
                                                                            outputs: values used outside

`fuse_groups(graph, groups)` replaces every group by its composite and re-orders the top level
topologically (stable: a unit goes where its first member was, as early as its inputs allow), drops
Consts nothing reads any more, and numbers composites in graph order (MindSpore's naming). Whether
merging two groups would make a cycle is the fusion search's question (`clusters.Clusters.creates_cycle`).
"""
from __future__ import annotations

import heapq
import itertools
from typing import Callable, Iterable, Sequence

from ir.graph import Graph, Node, Value, input_node
from ir.ops import branches
from ir.ops.control import with_branches

COMPOSITE = "Composite"
NAME_OPS_LIMIT = 8      # longer composites are named after their first ops, then "etc"


def is_scalar_const(node: Node) -> bool:
    return node.op == "Const" and node.out.type.size == 1


def primitives(node: Node) -> tuple[Node, ...]:
    """The primitive nodes a top-level node computes (itself, or its composite's subgraph)."""
    return node.subgraph.nodes if node.subgraph is not None else (node,)


def compute_ops(nodes: Iterable[Node]) -> list[str]:
    """Op names of the primitives the nodes compute, in order, Consts left out."""
    return [p.op for n in nodes for p in primitives(n) if p.op != "Const"]


def composite_name(ops: Sequence[str], number: int) -> str:
    shown = list(ops[:NAME_OPS_LIMIT]) + (["etc"] if len(ops) > NAME_OPS_LIMIT else [])
    return "Fused_" + "_".join(shown) + f"_{number}"


def escape_finder(graph: Graph) -> Callable[[Iterable[Node]], set[Value]]:
    """The values a group produces that nodes outside it (or the graph's outputs) read, for many groups
    of one graph: an index of every value's readers is made once, then each group costs its own size."""
    readers = graph.users()
    outputs = set(graph.outputs)

    def escaping(group: Iterable[Node]) -> set[Value]:
        inside = set(group)
        return {v for n in inside for v in n.outputs
                if v in outputs or any(u not in inside for u in readers.get(v, ()))}
    return escaping


def build_composite(members: Sequence[Node], escaping: set[Value]) -> tuple[Node, list[Value]]:
    """One Composite node computing `members` (top-level nodes in a valid order).

    Returns the node and the outer values its outputs stand for, in output order. It is numbered 0;
    `fuse_groups` and `renumber_composites` number composites within their graph.
    """
    local: dict[Value, Value] = {}        # outer value (or inner value of a member) -> new inner value
    externals: list[Value] = []
    sub_inputs: list[Value] = []
    sub_nodes: list[Node] = []

    def resolve(v: Value) -> Value:
        if v in local:
            return local[v]
        if is_scalar_const(v.node):
            local[v] = add(v.node.replace()).out
        else:
            local[v] = input_node(len(sub_inputs), v.type).out
            sub_inputs.append(local[v])
            externals.append(v)
        return local[v]

    def add(node: Node) -> Node:
        sub_nodes.append(node)
        return node

    for member in members:
        if member.subgraph is None:
            new = add(member.replace(inputs=tuple(resolve(v) for v in member.inputs)))
            local.update(zip(member.outputs, new.outputs))
            continue
        inner: dict[Value, Value] = {sv: resolve(v) for sv, v in zip(member.subgraph.inputs, member.inputs)}
        for node in member.subgraph.nodes:
            new = add(node.replace(inputs=tuple(inner[v] for v in node.inputs)))
            inner.update(zip(node.outputs, new.outputs))
        for outer, sv in zip(member.outputs, member.subgraph.outputs):
            local[outer] = inner[sv]

    outer_outputs = [v for m in members for v in m.outputs if v in escaping]
    subgraph = Graph(sub_inputs, sub_nodes, [local[v] for v in outer_outputs])
    name = composite_name([n.op for n in sub_nodes if n.op != "Const"], 0)
    node = Node(COMPOSITE, externals, (), [v.type for v in outer_outputs], name, subgraph)
    return node, outer_outputs


def node_users(graph: Graph) -> dict[Node, list[Node]]:
    """For each top-level node, the distinct nodes reading any of its results, in graph order."""
    users: dict[Node, list[Node]] = {}
    for node in graph.nodes:
        for producer in dict.fromkeys(v.node for v in node.inputs):
            users.setdefault(producer, []).append(node)
    return users


def fuse_groups(graph: Graph, groups: Sequence[Sequence[Node]], holders: dict[Node, str] | None = None) -> Graph:
    """The graph with each group of top-level nodes replaced by one composite.

    Groups must be disjoint and merging each must not create a cycle (`Clusters.creates_cycle`). A group
    of one primitive stays a primitive; a group of one composite stays as it is (renumbered). `holders`,
    when given, receives each top-level node of `graph` that ends up in a composite -> its name.
    """
    position = {n: i for i, n in enumerate(graph.nodes)}
    unit_of: dict[Node, int] = {}
    units: list[list[Node]] = []
    for group in groups:
        if len(group) > 1:
            for n in group:
                unit_of[n] = len(units)
            units.append(sorted(group, key=position.__getitem__))
    for n in graph.nodes:
        if n not in unit_of:
            unit_of[n] = len(units)
            units.append([n])

    built: dict[int, tuple[Node, list[Value]]] = {}
    escaping = escape_finder(graph)
    for u, members in enumerate(units):
        if len(members) > 1:
            built[u] = build_composite(members, escaping(members))

    value_map: dict[Value, Value] = {}
    nodes: list[Node] = []
    placed: dict[int, Node] = {}
    for u in _unit_order(units, unit_of, position):
        node, outer = built.get(u, (units[u][0], list(units[u][0].outputs)))
        inputs = tuple(value_map.get(v, v) for v in node.inputs)
        new = placed[u] = node if inputs == node.inputs else node.replace(inputs=inputs)
        nodes.append(new)
        value_map.update(zip(outer, new.outputs))
    fused = Graph(graph.inputs, nodes, [value_map.get(v, v) for v in graph.outputs])
    names: dict[Node, str] = {}
    fused = renumber_composites(drop_unused_consts(fused), names)
    if holders is not None:
        holders.update((n, names[placed[unit_of[n]]]) for n in graph.nodes if placed[unit_of[n]] in names)
    return fused


def _unit_order(units: list[list[Node]], unit_of: dict[Node, int], position: dict[Node, int]) -> list[int]:
    """Units in a topological order, each as early as its inputs allow, ties by first member."""
    deps: dict[int, set[int]] = {u: set() for u in range(len(units))}
    for u, members in enumerate(units):
        for n in members:
            deps[u].update(unit_of[v.node] for v in n.inputs if v.node in unit_of and unit_of[v.node] != u)
    dependents: dict[int, list[int]] = {u: [] for u in deps}
    for u, ds in deps.items():
        for d in ds:
            dependents[d].append(u)
    waiting = {u: len(ds) for u, ds in deps.items()}
    ready = [(position[units[u][0]], u) for u, k in waiting.items() if k == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, u = heapq.heappop(ready)
        order.append(u)
        for d in dependents[u]:
            waiting[d] -= 1
            if waiting[d] == 0:
                heapq.heappush(ready, (position[units[d][0]], d))
    if len(order) != len(units):
        raise AssertionError("fusion groups form a cycle; creates_cycle should have refused one")
    return order


def drop_unused_consts(graph: Graph) -> Graph:
    used = {v.node for n in graph.nodes for v in n.inputs} | {v.node for v in graph.outputs}
    return Graph(graph.inputs, [n for n in graph.nodes if n.op != "Const" or n in used], graph.outputs)


def renumber_composites(graph: Graph, names: dict[Node, str] | None = None) -> Graph:
    """Composites named Fused_<ops>_<n>, n counting composites in graph order, those inside an If's
    branches where the If stands (then's, then else's): one name per composite in the whole graph;
    `names`, when given, receives each composite of `graph` -> its name."""
    return _renumber(graph, names, itertools.count())


def _renumber(graph: Graph, names, count) -> Graph:
    def rename(node: Node, inputs, emit):
        if branches(node):
            new = with_branches(node, *(_renumber(g, None, count) for g in branches(node)))
            return new.replace(inputs=inputs)
        if node.op != COMPOSITE:
            return None
        name = composite_name(compute_ops([node]), next(count))
        if names is not None:
            names[node] = name
        return None if name == node.name and inputs == node.inputs else node.replace(inputs=inputs, name=name)
    return graph.rewrite(rename)


def live_set(graph: Graph) -> set[Node]:
    """Top-level nodes some graph output depends on (fusion leaves dead nodes alone, for DCE)."""
    live: set[Node] = {v.node for v in graph.outputs}
    for node in reversed(graph.nodes):
        if node in live:
            live.update(v.node for v in node.inputs)
    return live


def kernel_count(graph: Graph) -> int:
    """Launches of the top level: every node but Consts (buffers) and Reshapes (views)."""
    return sum(1 for n in graph.nodes if n.op not in ("Const", "Reshape"))


def restrict(node: Node, indices: Sequence[int]) -> tuple[Node, dict[Value, Value]]:
    """A composite computing only results `indices` of `node` from its inputs (the slice they need).

    Returns the new node and a map from the kept results of `node` to its results.
    """
    if node.subgraph is None:
        new, outer = build_composite([node], {node.outputs[i] for i in indices})
        return new, dict(zip(outer, new.outputs))
    sub = node.subgraph
    wanted = [sub.outputs[i] for i in indices]
    needed = {v.node for v in wanted}
    for inner in reversed(sub.nodes):
        if inner in needed:
            needed.update(v.node for v in inner.inputs)
    members = [n for n in sub.nodes if n in needed]
    new, inner_outs = build_composite(members, set(wanted))
    position = {v: i for i, v in enumerate(sub.inputs)}
    new = new.replace(inputs=tuple(node.inputs[position[v]] for v in new.inputs))
    by_inner = dict(zip(inner_outs, new.outputs))
    return new, {node.outputs[i]: by_inner[sub.outputs[i]] for i in indices}
