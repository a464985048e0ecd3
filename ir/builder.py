"""GraphBuilder: IR written by hand or by a rule — named nodes of registered ops, constants, finished graphs.

    b = GraphBuilder(TensorType((4, 8), DType.float32), names=["x"])
    (x,) = b.inputs
    y = b.op("Mul", x, b.scalar(0.5, x))        # a shape-() Const of x's dtype, then the Mul; types inferred
    s = b.reduce("ReduceSum", y, (1,))          # keep_dims=True: f32[4,1]
    m = b.mean(x, (-1,))                        # ReduceMean in primitives (float16 sums in float32)
    gamma = b.input((8,), name="gamma")         # one more input (dtype: the builder's, float32 by default)
    out, mean, var = b.ops("LayerNorm", x, gamma, gamma)   # ops(): every result of a multi-result op
    graph = b.graph(y, s, m, out)               # Graph(b.inputs, b.nodes, outputs)

Where the nodes go, and their names:

    GraphBuilder(*types)                          b.nodes holds them; unnamed (tests, graphs built by hand)
    GraphBuilder(scope=node.name, emit=emit)      an expansion: "<scope>/<Op>-<k>", k = 0, 1, ... per builder
    GraphBuilder(namer=trace.scope_name, emit=trace.add)   a trace names each node itself ("Default/.../Mul-op7")
    b.op("Mul", x, y, name="exact")               an explicit name ("" for none); k does not count it

`emit(node)` sees every node made, in order, and returns the node it actually added (or None: the node as
given), so a `Graph.rewrite` callback, a trace or `some_list.append` all fit; `b.nodes` lists them either way.
Names are MindSpore scope names, metadata only: they take no part in structural equality (`Graph.key`).

Errors are the registry's, naming the op (and the node's name): an UnknownOpError for an unknown op, an
AttrError for a bad or missing attribute, a ShapeError or DTypeError for inputs the op's rule refuses.
`name` is the one keyword an attribute may not be called (no op has such an attribute).

This module imports the op registry, so ir/ops must not import it: a rule written in an op's row (a gradient)
receives a builder as an argument.
"""
from __future__ import annotations

from math import prod
from typing import Callable, Iterable

import numpy as np

from ir.dtypes import DType, as_dtype
from ir.errors import DTypeError, IRError, ShapeError
from ir.graph import Graph, Literal, Node, TensorType, Value, input_node
from ir.ops.checks import normalize_axes
from ir.ops.registry import make_node
from ir.symbolic import SIZE_VALUE, Dim

COMPOSITE = "Composite"


def constant_array(value, dtype: DType) -> np.ndarray:
    """`value` (a number or an array) as an array of `dtype`. A float dtype rounds it as a cast does (beyond
    the dtype's range: +-inf); an integer or bool dtype must hold every element exactly, else a DTypeError."""
    if isinstance(value, Literal):
        value = value.array
    try:
        src = np.asarray(value)
        if src.dtype == dtype.np:
            return src
        with np.errstate(over="ignore", invalid="ignore"):
            out = src.astype(dtype.np)
            exact = dtype.is_float or bool(np.all(out == src))
    except (TypeError, ValueError, OverflowError) as e:
        raise DTypeError(f"the constant {_short(value)} cannot be made {dtype} ({e})") from None
    if not exact:
        raise DTypeError(f"the constant {_short(value)} has no exact {dtype} value")
    return out


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class GraphBuilder:
    """Builds IR through the op registry: each node's attributes checked and its types inferred as it is made."""

    def __init__(self, *input_types: TensorType, names: Iterable[str] = (), dtype=DType.float32,
                 scope: str | None = None, namer: Callable[[str], str] | None = None,
                 emit: Callable[[Node], Node | None] | None = None):
        if scope and namer is not None:
            raise ValueError("GraphBuilder names by a scope or by a namer, not both")
        self.inputs: list[Value] = Graph.with_inputs(input_types, names)
        self.nodes: list[Node] = []
        self.dtype = as_dtype(dtype)   # of inputs given by shape and constants given as Python numbers
        self.scope = scope or ""
        self._namer = namer
        self._emit = emit
        self._count = 0

    # -- inputs and names ---------------------------------------------------------------------------
    def input(self, shape: Iterable[int], dtype=None, name: str = "") -> Value:
        """A new graph input (the next index) of `shape` and `dtype` (default: the builder's)."""
        dims = tuple(d if isinstance(d, Dim) else int(d) for d in shape)
        if any(d < 0 for d in dims):
            raise ShapeError(f"GraphBuilder.input: shape {list(dims)} has a negative dimension; every "
                             "dimension must be >= 0")
        type_ = TensorType(dims, self.dtype if dtype is None else as_dtype(dtype))
        value = input_node(len(self.inputs), type_, name).out
        self.inputs.append(value)
        return value

    def name(self, op: str) -> str:
        """The name the next node of `op` gets: the namer's, "<scope>/<op>-<k>", or "" without either."""
        if self._namer is not None:
            return self._namer(op)
        if not self.scope:
            return ""
        name = f"{self.scope}/{op}-{self._count}"
        self._count += 1
        return name

    # -- nodes ----------------------------------------------------------------------------------------
    def node(self, op: str, /, *inputs: Value, name: str | None = None, **attrs) -> Node:
        """A node of `op` (named, attributes checked, types inferred) that is not added yet: `add` adds it."""
        return make_node(op, inputs, attrs, name=self.name(op) if name is None else name)

    def add(self, node: Node) -> Node:
        """Add a node (through `emit` when given); returns the node added."""
        if self._emit is not None:
            added = self._emit(node)
            if added is not None:
                node = added
        self.nodes.append(node)
        return node

    def ops(self, op: str, /, *inputs: Value, name: str | None = None, **attrs) -> tuple[Value, ...]:
        """Add a node of `op`; all its results."""
        return self.add(self.node(op, *inputs, name=name, **attrs)).outputs

    def op(self, op: str, /, *inputs: Value, name: str | None = None, **attrs) -> Value:
        """Add a node of a single-result op; its result."""
        node = self.node(op, *inputs, name=name, **attrs)
        if len(node.outputs) != 1:
            where = f"{node.op} ({node.name})" if node.name else node.op
            raise IRError(f"{where} has {len(node.outputs)} results: use ops() to get them all")
        return self.add(node).out

    # -- constants ------------------------------------------------------------------------------------
    def const(self, value, dtype=None, name: str | None = None) -> Value:
        """A Const holding `value` (a number or an array) in `dtype`, the builder's unless given (an array's
        own dtype is not kept: pass it); converted as `constant_array` converts."""
        dtype = self.dtype if dtype is None else as_dtype(dtype)
        if isinstance(value, Dim):   # a symbolic size: its value at each call (ir/symbolic.py)
            return self.op(SIZE_VALUE, size=value, dtype=dtype, name=name)
        return self.op("Const", value=Literal(constant_array(value, dtype)), name=name)

    def scalar(self, value, like: Value | DType, name: str | None = None) -> Value:
        """A shape-() Const of `like`'s dtype (a Value's, or a DType) holding the number `value`."""
        if not isinstance(value, Dim) and np.ndim(value) != 0:
            raise ShapeError(f"scalar() takes a number, got shape {np.shape(value)}")
        return self.const(value, like.dtype if isinstance(like, Value) else like, name=name)

    def cast(self, x: Value, dtype) -> Value:
        """`x` as `dtype`: a Cast, or `x` itself when it has that dtype already."""
        dtype = as_dtype(dtype)
        return x if x.dtype == dtype else self.op("Cast", x, dtype=dtype)

    def wide(self, *xs: Value) -> list[Value]:
        """The values in float32 where they are half floats (computed wide, rounded once by the caller)."""
        return [self.cast(x, DType.float32) if x.dtype.is_half else x for x in xs]

    # -- reductions -----------------------------------------------------------------------------------
    def reduce(self, op: str, x: Value, axes, keep_dims: bool = True, name: str | None = None) -> Value:
        """A reduction (ReduceSum, ReduceMax, ...) over `axes`, keep_dims=True unless told: a fused kernel lets
        only keepdims reductions feed other ops (kernels/fusible.py)."""
        return self.op(op, x, axis=tuple(axes) if not isinstance(axes, int) else axes, keep_dims=keep_dims,
                       name=name)

    def mean(self, x: Value, axes) -> Value:
        """The mean over `axes` (() is every axis), keep_dims=True, rounded as the registry's ReduceMean: a
        half-float input is summed and divided in float32 and rounded to its dtype once (as numpy's mean does)."""
        try:
            axes = normalize_axes(axes, x.type.rank)
        except ShapeError as e:
            raise ShapeError(f"mean of {x.type}: {e}") from None
        count = prod(x.shape[a] for a in axes)
        acc = self.op("Cast", x, dtype=DType.float32) if x.dtype.is_half else x
        total = self.reduce("ReduceSum", acc, axes)
        mean = self.op("RealDiv", total, self.scalar(count, total))
        return mean if mean.dtype == x.dtype else self.op("Cast", mean, dtype=x.dtype)

    def fill(self, value, type_: TensorType) -> Value:
        """A tensor of `type_` holding `value` everywhere: a scalar Const broadcast (no data stored)."""
        scalar = self.scalar(value, type_.dtype)
        return scalar if not type_.shape else self.op("BroadcastTo", scalar, shape=type_.shape)

    def sum_to(self, x: Value, shape: tuple[int, ...]) -> Value:
        """`x` summed down to `shape`, the shape it was broadcast from (numpy's rule): the leading axes
        `shape` lacks and the axes where it has 1 are summed; `x` itself when nothing is."""
        shape = tuple(shape)
        lead = x.type.rank - len(shape)
        if lead < 0:
            raise ShapeError(f"sum_to: {x.type} has fewer dims than {list(shape)}")
        axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                           if d == 1 and x.shape[lead + i] != 1)
        if axes:
            x = self.reduce("ReduceSum", x, axes)
        return x if x.shape == shape else self.op("Reshape", x, shape=shape)

    # -- composites and graphs ------------------------------------------------------------------------
    def composite(self, subgraph: Graph, /, *inputs: Value, name: str | None = None) -> tuple[Value, ...]:
        """Add a Composite node running `subgraph` on `inputs` (their types must be its inputs' types)."""
        given, wanted = tuple(v.type for v in inputs), tuple(v.type for v in subgraph.inputs)
        if given != wanted:
            raise IRError(f"Composite{' (' + name + ')' if name else ''}: input types "
                          f"({', '.join(map(str, given))}) differ from its subgraph's ({', '.join(map(str, wanted))})")
        node = Node(COMPOSITE, inputs, (), [v.type for v in subgraph.outputs],
                    self.name(COMPOSITE) if name is None else name, subgraph)
        return self.add(node).outputs

    def graph(self, *outputs: Value) -> Graph:
        """The graph of this builder's inputs and nodes, returning `outputs`."""
        return Graph(self.inputs, self.nodes, outputs)
