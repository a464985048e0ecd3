"""The SSA data model: TensorType, Node, Value, Graph.

    Graph(inputs=(%0,), nodes=(n1, n2, ...), outputs=(%k,))
      n = Node(op, inputs: tuple[Value], attrs: sorted tuple, types: tuple[TensorType], name, subgraph)
      Value = (node, index): the index-th result of a node; graph inputs are results of "Input" nodes

Nodes are immutable and compared by identity; a pass builds a new graph rather than editing one
(`Node.replace`, `Graph.rewrite`). Values carry no names: the printer numbers them when it prints.
`name` (the MindSpore scope name) is metadata and takes no part in structural equality (`Graph.key`).
A composite node (op "Composite") holds the subgraph it runs; its inputs feed the subgraph's inputs.
A conditional (op "If", ir/ops/control.py) holds its two branches as `Branch` attributes.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np

from ir.dtypes import DType


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)   # a Python int: exact, where an int64 product would wrap

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.dtype.short}[{','.join(map(str, self.shape))}]"


class Literal:
    """An immutable numpy array usable as an attribute: equal and hashed by dtype, shape and bytes."""

    __slots__ = ("array", "_key")

    def __init__(self, array):
        arr = np.array(array)  # copies
        arr.setflags(write=False)
        object.__setattr__(self, "array", arr)
        object.__setattr__(self, "_key", (arr.dtype.str, arr.shape, arr.tobytes()))

    def __setattr__(self, key, value):
        raise AttributeError("Literal is immutable")

    def __eq__(self, other):
        return isinstance(other, Literal) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return f"Literal({self.array!r})"


class Branch:
    """A graph as an attribute value (the then/else branch of an If node): equal and hashed by the
    graph's structure (`Graph.key`), so two Ifs with the same branches are the same op."""

    __slots__ = ("graph", "_key")

    def __init__(self, graph: Graph):
        if not isinstance(graph, Graph):
            raise TypeError(f"a Branch holds a Graph, got {type(graph).__name__}")
        object.__setattr__(self, "graph", graph)
        object.__setattr__(self, "_key", graph.key())

    def __setattr__(self, key, value):
        raise AttributeError("Branch is immutable")

    def __eq__(self, other):
        return isinstance(other, Branch) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def ir_text(self) -> str:
        """The attribute's text: the graph itself prints below the node (ir/printer.py)."""
        return f"<branch: {len(self.graph.inputs)} inputs, {len(self.graph.nodes)} nodes>"

    __repr__ = ir_text


def _freeze(value):
    """Attribute values in a hashable, canonical form."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return Literal(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _float_bits(v):
    if isinstance(v, float):
        return ("f", struct.pack("<d", v))
    if isinstance(v, tuple):
        return tuple(_float_bits(x) for x in v)
    return v


def _attrs_key(attrs: tuple) -> tuple:
    return tuple((k, _float_bits(v)) for k, v in attrs)


def freeze_attrs(attrs: Mapping | Iterable | None) -> tuple:
    if not attrs:
        return ()
    items = attrs.items() if isinstance(attrs, (dict, Mapping)) else attrs  # dict first: a cheap check
    return tuple(sorted((str(k), _freeze(v)) for k, v in items))


class Value:
    """The index-th result of a node. Only its node makes it (`Node.outputs`, one Value per result),
    so two Values are the same when node and index are exactly when they are the same object: equality
    and hashing are by identity, which keeps the dicts every pass keys by Value fast."""

    __slots__ = ("node", "index")

    def __init__(self, node: Node, index: int):
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "index", index)

    def __setattr__(self, key, value):
        raise AttributeError("Value is immutable")

    @property
    def type(self) -> TensorType:
        return self.node.types[self.index]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    def __repr__(self):
        return f"<Value {self.node.op}#{self.index} {self.type}>"


class Node:
    __slots__ = ("op", "inputs", "attrs", "types", "name", "subgraph", "outputs", "_attr_map")

    def __init__(self, op: str, inputs: Iterable[Value] = (), attrs=None,
                 types: Iterable[TensorType] = (), name: str = "", subgraph: Graph | None = None):
        frozen = freeze_attrs(attrs)
        self._set(op, tuple(inputs), frozen, dict(frozen), tuple(types), name, subgraph)

    def _set(self, op, inputs: tuple, attrs: tuple, attr_map: dict, types: tuple, name, subgraph) -> None:
        set_ = object.__setattr__
        set_(self, "op", op)
        set_(self, "inputs", inputs)
        set_(self, "attrs", attrs)
        set_(self, "types", types)
        set_(self, "name", name)
        set_(self, "subgraph", subgraph)
        set_(self, "outputs", tuple([Value(self, i) for i in range(len(types))]))
        set_(self, "_attr_map", attr_map)

    def __setattr__(self, key, value):
        raise AttributeError("Node is immutable; use replace()")

    @property
    def out(self) -> Value:
        """The only result of a single-result node."""
        if len(self.outputs) != 1:
            raise ValueError(f"{self.op} has {len(self.outputs)} results, not one")
        return self.outputs[0]

    def attr(self, key: str, default=None):
        return self._attr_map.get(key, default)

    @property
    def attr_dict(self) -> dict:
        return dict(self._attr_map)

    def replace(self, **changes) -> Node:
        if "attrs" in changes:
            fields = dict(op=self.op, inputs=self.inputs, attrs=self.attrs, types=self.types,
                          name=self.name, subgraph=self.subgraph)
            fields.update(changes)
            return Node(**fields)
        # the attrs are frozen already: share them (and their map, which nothing mutates)
        get = changes.get
        node = object.__new__(Node)
        node._set(get("op", self.op), tuple(get("inputs", self.inputs)), self.attrs, self._attr_map,
                  tuple(get("types", self.types)), get("name", self.name), get("subgraph", self.subgraph))
        return node

    def __repr__(self):
        return f"<Node {self.op} {' '.join(map(str, self.types))}{' ' + self.name if self.name else ''}>"


def input_node(index: int, type_: TensorType, name: str = "") -> Node:
    return Node("Input", (), {"index": index}, (type_,), name)


class Graph:
    """inputs (results of Input nodes), nodes in a valid execution order, outputs."""

    __slots__ = ("inputs", "nodes", "outputs", "_key")

    def __init__(self, inputs: Iterable[Value], nodes: Iterable[Node], outputs: Iterable[Value]):
        object.__setattr__(self, "inputs", tuple(inputs))
        object.__setattr__(self, "nodes", tuple(nodes))
        object.__setattr__(self, "outputs", tuple(outputs))
        object.__setattr__(self, "_key", None)

    def __setattr__(self, key, value):
        raise AttributeError("Graph is immutable")

    @staticmethod
    def with_inputs(types: Iterable[TensorType], names: Iterable[str] = ()) -> list[Value]:
        """Fresh input values for the given types (helper for builders)."""
        names = list(names)
        return [input_node(i, t, names[i] if i < len(names) else "").out for i, t in enumerate(types)]

    def key(self) -> tuple:
        """A canonical, hashable form: equal keys mean structurally equal graphs (names ignored).

        Float attributes compare by their bits (so a NaN equals itself); a value from outside the graph
        compares by identity. Computed once: a graph is immutable, and passes ask a subgraph's key often."""
        if self._key is None:
            object.__setattr__(self, "_key", self._make_key())
        return self._key

    def _make_key(self) -> tuple:
        ids: dict[Value, tuple] = {v: ("in", i) for i, v in enumerate(self.inputs)}
        foreign = lambda v: ("?", id(v.node), v.index)  # noqa: E731
        rows = []
        for n, node in enumerate(self.nodes):
            args = tuple(ids.get(v) or foreign(v) for v in node.inputs)
            sub = node.subgraph.key() if node.subgraph is not None else None
            rows.append((node.op, args, _attrs_key(node.attrs), node.types, sub))
            for v in node.outputs:
                ids[v] = (n, v.index)
        outs = tuple(ids.get(v) or foreign(v) for v in self.outputs)
        return (tuple(v.type for v in self.inputs), tuple(rows), outs)

    def __eq__(self, other):
        return isinstance(other, Graph) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def users(self) -> dict[Value, list[Node]]:
        """For each value, the nodes that read it (in order; a node reading twice appears twice)."""
        uses: dict[Value, list[Node]] = {}
        for node in self.nodes:
            for v in node.inputs:
                uses.setdefault(v, []).append(node)
        return uses

    def rewrite(self, fn: Callable[[Node, tuple[Value, ...], Callable[[Node], Node]],
                                   Node | tuple[Value, ...] | None]) -> Graph:
        """A new graph made by visiting nodes in order.

        `fn(node, new_inputs, emit)` returns a Node to put in its place (its results stand for the old
        ones), a tuple of existing Values to stand for the node's results (the node is dropped), or None
        to keep the node with its inputs remapped. Nodes made on the side go in, in order, with `emit`.
        """
        builder = Rewriter(self)
        for node in self.nodes:
            builder.visit(node, fn)
        return builder.finish()

    def __repr__(self):
        return f"<Graph {len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs>"


class Rewriter:
    """State of one `Graph.rewrite`: the value map and the new node list."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.map: dict[Value, Value] = {v: v for v in graph.inputs}
        self.nodes: list[Node] = []

    def emit(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    def lookup(self, v: Value) -> Value:
        return self.map.get(v, v)

    def visit(self, node: Node, fn) -> None:
        new_inputs = tuple(self.lookup(v) for v in node.inputs)
        result = fn(node, new_inputs, self.emit) if fn is not None else None
        if result is None:
            result = node if new_inputs == node.inputs else node.replace(inputs=new_inputs)
        if isinstance(result, Node):
            self.emit(result)
            result = result.outputs
        for old, new in zip(node.outputs, result):
            self.map[old] = new

    def finish(self) -> Graph:
        return Graph(self.graph.inputs, self.nodes, tuple(self.lookup(v) for v in self.graph.outputs))


def live_nodes(graph: Graph) -> Graph:
    """The graph without nodes no output depends on (dead code elimination)."""
    needed: set[Node] = {v.node for v in graph.outputs}
    keep = []
    for node in reversed(graph.nodes):
        if node in needed:
            keep.append(node)
            needed.update(v.node for v in node.inputs)
    return Graph(graph.inputs, reversed(keep), graph.outputs)
