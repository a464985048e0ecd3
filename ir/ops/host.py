"""Host ops: work the device cannot run, and the copies across the host/device boundary.

    PyFunc(x, ...) {fn, in_types, in_shapes, out_types, out_shapes, stateful}
                        a Python function on numpy arrays; its declared outputs are its types, and
                        its results are checked against them every time it runs
    HostCall(x, ...) {host_op="Mul", <Mul's attrs>}
                        any registered op kept on the host (`graphkernel.host_scope`): same inference
                        and reference as the op it wraps, but pattern HOST, so nothing fuses,
                        folds, merges or expands it
    CopyToHost(x), CopyToDevice(x)
                        a real copy of a value crossing the boundary (the partition pass puts one on
                        every value a host op reads from the device, or the device from a host op)

    is_host(node)          the one test every pass and the lowering ask (pattern HOST)
    placement(node)        "host", "copy", "comm" (a collective: ir/ops/collective.py) or "device"
    device_regions(graph)  {device node: region}: maximal device subgraphs no host op splits
    run_host(node, arrays) the node's results, an error naming the node (its scope name) on failure

A function is an attribute through `HostFunction`, compared by identity (never by repr: it may be
anything callable). It prints as an opaque `<function f@0x...>` token that the parser refuses.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ir.dtypes import as_dtype
from ir.errors import AttrError, DTypeError, ExecutionError, ShapeError
from ir.graph import Graph, Node, TensorType
from ir.ops.registry import Api, Attr, OpDef, Pattern, Precision, evaluate, get, pattern_of, register
from ir.printer import describe

COPY_OPS = ("CopyToHost", "CopyToDevice")


class HostFunctionError(ExecutionError):
    """A host function raised, or returned something other than what it declared."""


class HostFunction:
    """A callable as an attribute value: equal and hashed by the callable's identity."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"needs a callable, got {type(fn).__name__}")
        object.__setattr__(self, "fn", fn)

    def __setattr__(self, key, value):
        raise AttributeError("HostFunction is immutable")

    def __eq__(self, other):
        return isinstance(other, HostFunction) and other.fn is self.fn

    def __hash__(self):
        return hash(id(self.fn))

    def ir_text(self) -> str:
        """The printer's opaque token (the parser refuses it: a function cannot be read back)."""
        name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
        return f"<function {name}@{id(self.fn):#x}>"

    __repr__ = ir_text


# --- PyFunc ----------------------------------------------------------------------------------------

def _function(v):
    return v if isinstance(v, HostFunction) else HostFunction(v)


def _dtypes(v):
    return tuple(as_dtype(d) for d in v)


def _shapes(v):
    shapes = tuple(tuple(int(d) for d in s) for s in v)
    if any(d < 0 for s in shapes for d in s):
        raise ValueError("dims must be non-negative")
    return shapes


def _pyfunc_infer(types, attrs):
    in_types, in_shapes = attrs["in_types"], attrs["in_shapes"]
    out_types, out_shapes = attrs["out_types"], attrs["out_shapes"]
    if len(in_types) != len(in_shapes) or len(out_types) != len(out_shapes):
        raise AttrError(f"in_types/in_shapes ({len(in_types)}/{len(in_shapes)}) and out_types/out_shapes "
                        f"({len(out_types)}/{len(out_shapes)}) must have equal lengths")
    if not out_types:
        raise AttrError("declares no output (out_types is empty)")
    if len(types) != len(in_types):
        raise AttrError(f"declares {len(in_types)} input(s) (in_types), got {len(types)}")
    for i, (t, dtype, shape) in enumerate(zip(types, in_types, in_shapes)):
        if t.dtype != dtype:
            raise DTypeError(f"input {i} is {t}, in_types declares {dtype}")
        if t.shape != shape:
            raise ShapeError(f"input {i} is {t}, in_shapes declares {list(shape)}")
    return tuple(TensorType(s, d) for d, s in zip(out_types, out_shapes))


def _pyfunc_reference(arrays, attrs):
    fn = attrs["fn"]
    views = []
    for a in arrays:  # the function may not write buffers other values live in
        view = a.view()
        view.flags.writeable = False
        views.append(view)
    try:
        result = fn.fn(*views)
    except Exception as e:
        raise HostFunctionError(f"the function {fn} raised {type(e).__name__}: {e}") from e
    results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    declared = list(zip(attrs["out_types"], attrs["out_shapes"]))
    if len(results) != len(declared):
        raise HostFunctionError(f"the function {fn} returned {len(results)} result(s), out_types declares "
                                f"{len(declared)}")
    out = []
    for i, (r, (dtype, shape)) in enumerate(zip(results, declared)):
        if not isinstance(r, (np.ndarray, np.generic)):  # a Python number or list: take the declared dtype
            r = _as_declared(r, dtype, i, fn)
        r = np.asarray(r)
        if r.dtype != dtype.np:
            raise HostFunctionError(f"result {i} of the function {fn} has dtype {r.dtype}, out_types "
                                    f"declares {dtype}")
        if r.shape != shape:
            raise HostFunctionError(f"result {i} of the function {fn} has shape {list(r.shape)}, "
                                    f"out_shapes declares {list(shape)}")
        out.append(r)
    return tuple(out)


def _as_declared(r, dtype, i: int, fn) -> np.ndarray:
    """A result that is no array (a number, a list of numbers) as an array of the declared dtype."""
    shown = repr(r)[:80]
    if r is None or isinstance(r, (str, bytes, dict, set)):
        raise HostFunctionError(f"result {i} of the function {fn} is {shown}, not an array or number")
    try:
        with np.errstate(all="ignore"):
            return np.asarray(r, dtype=dtype.np)
    except (TypeError, ValueError, OverflowError) as e:
        raise HostFunctionError(f"result {i} of the function {fn} ({shown}) is no {dtype} array: {e}") from None


register(OpDef("PyFunc", Pattern.HOST, None, _pyfunc_infer, _pyfunc_reference, (
    Attr("fn", check=_function), Attr("in_types", check=_dtypes), Attr("in_shapes", check=_shapes),
    Attr("out_types", check=_dtypes), Attr("out_shapes", check=_shapes), Attr("stateful", True, bool)),
    doc="MindSpore's PyFunc: fn on numpy arrays, run on the host, results checked against the declaration",
    precision=Precision("black", True, "a host function: its inputs keep the dtypes it declares"),
    api=Api(primitive=False)))   # P.PyFunc is a class of its own (graphkernel/ops/operations.py)


# --- HostCall --------------------------------------------------------------------------------------

def _inner(attrs) -> tuple[OpDef, dict]:
    rest = dict(attrs)
    return get(rest.pop("host_op")), rest


@dataclass(frozen=True)
class _HostCallDef(OpDef):
    def check_attrs(self, attrs: dict) -> dict:
        rest = dict(attrs)
        op = rest.pop("host_op", None)
        if not isinstance(op, str):
            raise AttrError("missing attribute host_op (the op to run on the host)")
        inner = get(op)
        if inner.pattern == Pattern.HOST:
            raise AttrError(f"{inner.name} runs on the host already; it needs no HostCall")
        return {"host_op": inner.name, **inner.check_attrs(rest)}


def _host_call_canonicalize(types, attrs):
    inner, rest = _inner(attrs)
    return {"host_op": inner.name, **(inner.canonicalize(types, rest) if inner.canonicalize else rest)}


def _host_call_infer(types, attrs):
    inner, rest = _inner(attrs)
    if inner.arity is not None and len(types) != inner.arity:
        raise AttrError(f"{inner.name} takes {inner.arity} tensor input(s), got {len(types)}")
    return inner.infer(types, rest)


def _host_call_reference(arrays, attrs):
    inner, rest = _inner(attrs)
    return inner.reference(arrays, rest)


register(_HostCallDef("HostCall", Pattern.HOST, None, _host_call_infer, _host_call_reference,
                      canonicalize=_host_call_canonicalize,
                      doc="the op named by host_op, run on the host (graphkernel.host_scope)",
                      precision=Precision("black", True, "host_scope: runs on the host as written"),
                      api=Api(primitive=False)))


def to_host_call(node: Node) -> Node:
    """The node kept on the host: wrapped in a HostCall (constants and host ops stay as they are)."""
    if node.op in ("Const", "Input") or node.subgraph is not None or is_host(node):
        return node
    return Node("HostCall", node.inputs, {"host_op": node.op, **node.attr_dict}, node.types, node.name)


# --- copies ----------------------------------------------------------------------------------------

for _name, _doc in (("CopyToHost", "a device value copied to the host"),
                    ("CopyToDevice", "a host value copied to the device")):
    register(OpDef(_name, Pattern.INJECTIVE, 1, lambda t, a: (t[0],), lambda a, attrs: np.copy(a[0]), doc=_doc,
                   precision=Precision("gray", True, "moves data (inserted after the precision pass)"),
                   api=Api(primitive=False)))


# --- placement -------------------------------------------------------------------------------------

def is_host(node: Node) -> bool:
    """Whether the node runs on the host (a PyFunc, a HostCall, any op of pattern HOST)."""
    return node.op not in ("Input", "Const") and pattern_of(node) == Pattern.HOST


def placement(node: Node) -> str:
    """"host", "copy" (a boundary copy), "comm" (a collective, ir/ops/collective.py) or "device"."""
    if node.op in COPY_OPS:
        return "copy"
    if not is_host(node):
        return "device"
    return "comm" if node.subgraph is None and get(node.op).collective else "host"


def run_host(node: Node, arrays) -> tuple[np.ndarray, ...]:
    """The results of a host node; a failure names the node (op and scope name), chained."""
    try:
        return evaluate(node, list(arrays))
    except HostFunctionError as e:
        raise HostFunctionError(f"{describe(node)}: {e}") from e


def device_regions(graph: Graph) -> dict[Node, int]:
    """Each device node that computes (not an input, a constant or a copy) -> its device subgraph.

    Device nodes joined by an edge share a region unless a host op lies on a path between the two
    regions (that would make the region wait for a host op that waits for it). Host ops are numbered
    as bits; `before`/`after` hold the host ops upstream/downstream of a node (then of a region).
    Regions are numbered in the order of their first node.
    """
    bit = {n: 1 << k for k, n in enumerate(n for n in graph.nodes if is_host(n))}
    before: dict[Node, int] = {}
    for n in graph.nodes:
        before[n] = 0
        for v in n.inputs:
            before[n] |= before.get(v.node, 0) | bit.get(v.node, 0)
    after: dict[Node, int] = {n: 0 for n in graph.nodes}
    for n in reversed(graph.nodes):
        for v in n.inputs:
            if v.node in after:
                after[v.node] |= after[n] | bit.get(n, 0)
    device = [n for n in graph.nodes if n.op not in ("Input", "Const") and placement(n) == "device"]
    parent = {n: n for n in device}
    sets = {n: (before[n], after[n]) for n in device}

    def root(n):
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in device:
        for v in n.inputs:
            if v.node not in parent:
                continue
            a, b = root(v.node), root(n)
            (before_a, after_a), (before_b, after_b) = sets[a], sets[b]
            if a is not b and not (after_a & before_b) and not (after_b & before_a):
                parent[b] = a
                sets[a] = (before_a | before_b, after_a | after_b)
    numbers: dict[Node, int] = {}
    return {n: numbers.setdefault(root(n), len(numbers)) for n in device}
