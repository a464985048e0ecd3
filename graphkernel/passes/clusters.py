"""Clusters: the partition of a graph's computing nodes that the fusion passes grow by merging.

    cluster_of[node] -> head      a cluster is named by its first member (graph order)
    members[head]    -> nodes     in graph order
    version[head]    -> int       a new number on every merge: (head, version) names one state

Every computing top-level node starts as a cluster of its own (dead nodes and Consts stay out: DCE
and the composite builder deal with them). A fusion pass asks two questions of every candidate pair;
both are answered from the pair's neighbourhood, never by walking the whole graph, so fusing a
100,000-node chain stays linear:

    escaping(nodes)       values the nodes produce that something outside reads (a composite's
                          outputs), from a table of each value's readers
    creates_cycle(a, b)   whether merging makes a path a -> c -> ... -> b through another cluster

Note on the cycle check
-----------------------
The clusters keep a topological order: a number per cluster, every edge going from a smaller number
to a larger one (Pearce and Kelly's dynamic topological order, for contracting an edge rather than
adding one). A path from a to b through other clusters only visits clusters numbered between the two,
so the search never looks past b: in a chain, a and b are neighbours and it visits nothing.
Merging renumbers only the clusters between them, reusing their numbers:

    before   a  c  d  e  b          c: a reaches it    d: it reaches b    e: neither
    after    d  ab    e  c          d before the merged cluster, c after it, e keeps its number

(c cannot reach b, nor can a reach d: either path would be the cycle that forbids the merge.)
Each cluster keeps the outside nodes it reads from and those reading it, so its neighbours are
found without walking its members.
"""
from __future__ import annotations

import itertools
from typing import Callable

from ir.graph import Graph, Node, Value
from graphkernel.passes.cost_model import Estimate, estimate
from graphkernel.passes.fusion_utils import build_composite, escape_finder, live_set, node_users


class Clusters:
    """A partition of the graph's computing nodes, with a topological order of the clusters."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.position = {n: i for i, n in enumerate(graph.nodes)}
        live = live_set(graph)
        self.cluster_of: dict[Node, Node] = {n: n for n in graph.nodes if n.op != "Const" and n in live}
        self.members: dict[Node, list[Node]] = {n: [n] for n in self.cluster_of}
        self.version: dict[Node, int] = dict.fromkeys(self.cluster_of, 0)
        self.users = node_users(graph)
        self.escaping = escape_finder(graph)   # nodes -> the values they produce that outside reads
        self._readers = graph.users()
        self._graph_outputs = set(graph.outputs)
        self._order = {n: self.position[n] for n in self.cluster_of}
        self._succ = {n: {u for u in self.users.get(n, ()) if u in self.cluster_of} for n in self.cluster_of}
        self._pred = {n: {v.node for v in n.inputs if v.node in self.cluster_of} for n in self.cluster_of}
        self._versions = itertools.count(1)
        self._estimates: dict[tuple, Estimate] = {}

    # --- neighbours and cycles -----------------------------------------------------------------------
    def successors(self, head: Node) -> set[Node]:
        return {self.cluster_of[n] for n in self._succ[head]}

    def predecessors(self, head: Node) -> set[Node]:
        return {self.cluster_of[n] for n in self._pred[head]}

    def _ordered(self, a: Node, b: Node) -> tuple[Node, Node]:
        return (a, b) if self._order[a] < self._order[b] else (b, a)

    def creates_cycle(self, a: Node, b: Node) -> bool:
        """Whether merging clusters a and b makes a cycle: a path from one to the other through a
        third cluster (see the note above: only clusters numbered between them can be on it)."""
        first, last = self._ordered(a, b)
        lo, hi = self._order[first], self._order[last]
        seen: set[Node] = set()
        stack = [c for c in self.successors(first) if c is not last]
        while stack:
            c = stack.pop()
            if c is last:
                return True
            if c not in seen and lo < self._order[c] < hi:
                seen.add(c)
                stack.extend(self.successors(c))
        return False

    def _between(self, start: Node, step: Callable[[Node], set[Node]], lo: int, hi: int) -> list[Node]:
        """Clusters numbered strictly between lo and hi that `step` reaches from `start`, in order."""
        found: set[Node] = set()
        stack = [start]
        while stack:
            for c in step(stack.pop()):
                if c not in found and lo < self._order[c] < hi:
                    found.add(c)
                    stack.append(c)
        return sorted(found, key=self._order.__getitem__)

    # --- merging ---------------------------------------------------------------------------------------
    def merge(self, a: Node, b: Node) -> Node:
        """Merge clusters a and b (the caller checked creates_cycle); returns the new head."""
        first, last = self._ordered(a, b)
        lo, hi = self._order[first], self._order[last]
        before = self._between(last, self.predecessors, lo, hi)
        after = self._between(first, self.successors, lo, hi)
        pool = sorted([self._order[c] for c in before + after] + [lo, hi])
        succ = {n for n in self._succ.pop(a) | self._succ.pop(b) if self.cluster_of[n] not in (a, b)}
        pred = {n for n in self._pred.pop(a) | self._pred.pop(b) if self.cluster_of[n] not in (a, b)}

        ma, mb = self.members.pop(a), self.members.pop(b)
        nodes = ma + mb if self.position[ma[-1]] < self.position[mb[0]] else sorted(
            ma + mb, key=self.position.__getitem__)
        head = nodes[0]
        for n in (mb if head is a else ma):
            self.cluster_of[n] = head
        del self._order[a], self._order[b], self.version[a], self.version[b]
        for c, number in zip(before + [head], pool):
            self._order[c] = number
        for c, number in zip(after, pool[len(pool) - len(after):]):
            self._order[c] = number
        self.members[head] = nodes
        self.version[head] = next(self._versions)
        self._succ[head], self._pred[head] = succ, pred
        return head

    def inside(self, v: Value, heads: tuple[Node, ...]) -> bool:
        """Whether `v` is a result of one of the clusters `heads`."""
        return self.cluster_of.get(v.node) in heads

    def read_outside(self, v: Value, heads: tuple[Node, ...]) -> bool:
        """Whether a node outside the clusters `heads` (or the graph's outputs) reads `v`."""
        return v in self._graph_outputs or any(self.cluster_of.get(u) not in heads
                                               for u in self._readers.get(v, ()))

    def groups(self) -> list[list[Node]]:
        return [m for m in self.members.values() if len(m) > 1]

    # --- kernels ---------------------------------------------------------------------------------------
    def subgraph(self, nodes: list[Node]) -> Graph:
        """The subgraph of the composite `nodes` (in graph order) would make."""
        node, _ = build_composite(nodes, self.escaping(nodes))
        return node.subgraph

    def estimate(self, nodes: list[Node], core_num: int, subgraph: Graph | None = None) -> Estimate:
        """The cost model's estimate of the kernel `nodes` would make (cached per member list)."""
        key = tuple(nodes)
        if key not in self._estimates:
            self._estimates[key] = estimate(subgraph if subgraph is not None else self.subgraph(nodes),
                                            core_num)
        return self._estimates[key]
