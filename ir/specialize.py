"""A graph of symbolic sizes (ir/symbolic.py) at the sizes of a call.

    symbols_of(graph)         {name: representative size} of the named sizes it uses
    is_dynamic(graph)         whether an input has a symbolic size
    bind(types, shapes)       {name: size} from a call's input shapes; a ShapeError naming the input,
                              its declared and its given shape when they do not fit
    specialize(graph, sizes)  the same graph with every symbolic size at its value (a SizeValue node a
                              Const): what the reference runs, and what a check at other sizes verifies
"""
from __future__ import annotations

import numpy as np

from ir.errors import ShapeError
from ir.graph import Branch, Graph, Literal, Node, TensorType, input_node
from ir.symbolic import SIZE_VALUE, Dim, dims_in, evaluate, evaluate_shape, has_dims, shape_text


# --- graphs --------------------------------------------------------------------------------------------
def symbols_of(graph) -> dict[str, int]:
    """{name: hint} of every named size the graph's types and attributes use (subgraphs included)."""
    out: dict[str, int] = {}

    def add(d: Dim) -> None:
        for name, hint in d.hints.items():
            out.setdefault(name, hint)

    def walk(g):
        for v in g.inputs:
            for d in dims_in(v.type.shape):
                add(d)
        for node in g.nodes:
            for t in node.types:
                for d in dims_in(t.shape):
                    add(d)
            for _, value in node.attrs:
                for d in dims_in(value):
                    add(d)
                if hasattr(value, "graph"):
                    walk(value.graph)
            if node.subgraph is not None:
                walk(node.subgraph)
    walk(graph)
    return out


def is_dynamic(graph) -> bool:
    return any(isinstance(d, Dim) for v in graph.inputs for d in v.type.shape)


def specialize_value(value, sizes: dict):
    """An attribute value (or a shape) with every Dim replaced by its value at `sizes`."""
    if isinstance(value, Dim):
        return value.expr.evaluate(sizes)
    if isinstance(value, tuple):
        return tuple(specialize_value(v, sizes) for v in value)
    return value


# --- specialization ------------------------------------------------------------------------------------
def specialize_type(t: TensorType, sizes: dict) -> TensorType:
    if not any(isinstance(d, Dim) for d in t.shape):
        return t
    return TensorType(evaluate_shape(t.shape, sizes), t.dtype)


def _specialize_attr(value, sizes: dict):
    if isinstance(value, Branch):
        return Branch(specialize(value.graph, sizes))
    return specialize_value(value, sizes)


def specialize_node(node: Node, sizes: dict, inputs=None) -> Node:
    """`node` at `sizes`: its types and attributes evaluated (a SizeValue becomes the Const of its value),
    its subgraph specialized, reading `inputs` (its own when not given)."""
    inputs = node.inputs if inputs is None else tuple(inputs)
    if node.op == SIZE_VALUE:
        dtype = node.out.dtype
        value = np.array(evaluate(node.attr("size"), sizes), dtype=dtype.np)
        return Node("Const", (), {"value": Literal(value)}, (TensorType((), dtype),), node.name)
    attrs = node.attrs
    if any(has_dims(v) or isinstance(v, Branch) for _, v in attrs):
        attrs = tuple((k, _specialize_attr(v, sizes)) for k, v in attrs)
    sub = specialize(node.subgraph, sizes) if node.subgraph is not None else None
    types = tuple(specialize_type(t, sizes) for t in node.types)
    if attrs is node.attrs:
        return node.replace(inputs=inputs, types=types, subgraph=sub)
    return Node(node.op, inputs, attrs, types, node.name, sub)


def specialize(graph: Graph, sizes: dict) -> Graph:
    """The graph with every symbolic size at its value in `sizes` (a static graph)."""
    inputs = [input_node(k, specialize_type(v.type, sizes), v.node.name).out for k, v in enumerate(graph.inputs)]
    remap = dict(zip(graph.inputs, inputs))
    nodes = []
    for node in graph.nodes:
        new = specialize_node(node, sizes, [remap.get(v, v) for v in node.inputs])
        nodes.append(new)
        remap.update(zip(node.outputs, new.outputs))
    return Graph(inputs, nodes, [remap.get(v, v) for v in graph.outputs])


# --- binding a call's shapes -------------------------------------------------------------------------
def bind(types, shapes, names=()) -> dict[str, int]:
    """{symbol: value} from the shapes of a call's inputs against the symbolic input types; a ShapeError
    names the input, its declared and its given shape when they do not fit (rank, a static size, two
    places of one symbol that disagree, or a size below 1)."""
    sizes: dict[str, int] = {}
    later = []
    for k, (t, shape) in enumerate(zip(types, shapes)):
        label = f"input {k}" + (f" ({names[k]})" if k < len(names) and names[k] else "")
        if len(shape) != len(t.shape):
            raise ShapeError(f"{label}: given shape {list(shape)} has rank {len(shape)}, declared "
                             f"{shape_text(t.shape)} has rank {len(t.shape)}")
        for a, (d, n) in enumerate(zip(t.shape, shape)):
            if not isinstance(d, Dim):
                if d != n:
                    raise ShapeError(f"{label}: given shape {list(shape)}, declared {shape_text(t.shape)}: "
                                     f"dim {a} is {n}, declared static {d}")
                continue
            if n < 1:
                raise ShapeError(f"{label}: given shape {list(shape)}, declared {shape_text(t.shape)}: "
                                 f"dim {a} ({d}) is {n}; a dynamic size is at least 1")
            names_in = d.expr.symbols()
            term = d.expr.terms[0] if len(d.expr.terms) == 1 else None
            if term is not None and term[1] == 1 and len(term[0]) == 1 and isinstance(term[0][0], str):
                name = term[0][0]
                if name in sizes and sizes[name] != n:
                    raise ShapeError(f"{label}: given shape {list(shape)}, declared {shape_text(t.shape)}: "
                                     f"dim {a} is {n}, but size {name} is {sizes[name]} in an earlier input")
                sizes[name] = n
            else:
                later.append((label, shape, t, a, d, n, names_in))
    for label, shape, t, a, d, n, names_in in later:
        value = evaluate(d, sizes)
        if value != n:
            raise ShapeError(f"{label}: given shape {list(shape)}, declared {shape_text(t.shape)}: dim {a} is {n}, "
                             f"{d} is {value} here")
    return sizes


def corresponding_values(graph: Graph, specialized: Graph) -> dict:
    """Each value of `graph` (its composites' subgraphs too) -> the same value in `specialize(graph, ...)`,
    whose nodes stand in the same order: what relates a check at those sizes to the symbolic graph."""
    out = dict(zip(graph.inputs, specialized.inputs))
    for old, new in zip(graph.nodes, specialized.nodes):
        out.update(zip(old.outputs, new.outputs))
        if old.subgraph is not None:
            out.update(corresponding_values(old.subgraph, new.subgraph))
    return out
