"""OpDef, the registry table, and the two entry points every layer uses: make_node and evaluate."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable

import numpy as np

from ir.dtypes import BFLOAT16_NP
from ir.errors import AttrError, DTypeError, IRError, UnknownOpError
from ir.graph import Node, TensorType, Value


class Pattern(IntEnum):
    """How an op maps input elements to output elements; fusion rules compare these in order."""
    ELEMWISE = 0   # same-shape, element i from element i
    BROADCAST = 1  # elementwise with numpy broadcasting
    INJECTIVE = 2  # each output element from one input element (reshape, transpose)
    REDUCE = 3     # reduces axes
    OPAQUE = 4     # a library call (MatMul) or a composite op not yet expanded
    HOST = 5       # runs on the host only


class Cost(IntEnum):
    """What one element of an op costs a kernel; the cost model weighs these (kernels/aicore.py)."""
    FREE = 0            # index arithmetic: a constant, a broadcast
    ARITH = 1           # one vector operation: add, compare, select, convert
    DIVIDE = 2          # a vector divide or square root
    TRANSCENDENTAL = 3  # an approximation (exp, log, tanh, erf, sin, ...; kernels/mathfn.py)


@dataclass(frozen=True)
class Precision:
    """The op's row in the default mixed-precision lists (precision_mode, modify_mixlist)."""
    list: str = "gray"   # white: float16 under allow_mix_precision; black: stays float32; gray: follows inputs
    fp32: bool = True    # False: the emulated AI Core computes it in float16 only (allow_fp32_to_fp16)
    why: str = ""


@dataclass(frozen=True)
class Form:
    """Another spelling MindSpore 2.x scripts call the op by, generated into its namespace: `where` is
    "Tensor" (a method: `x.multiply(y)`, `x.float()`), "ops" (`ops.sum(x, dim, keepdim)`), "mint" (also
    `ops.extend`, 2.3-2.6's name for those forms) or "mint.nn.functional".

    `params` are MindSpore's parameters in its order (a method's after self): a name among the op's
    attributes is that attribute, "dim=axis" is MindSpore's `dim` for the attribute `axis`, "*shape"
    gathers the remaining positional arguments (`x.view(2, 3)` or `x.view((2, 3))`); any other name is a
    tensor input, in the op's order. An attribute parameter defaults to None, which stands for the
    attribute's default (MindSpore's). `fixed` gives attributes the form sets itself (`x.float()`: dtype
    float32)."""
    where: str
    name: str
    params: tuple[str, ...] = ()
    fixed: tuple[tuple[str, Any], ...] = ()

    def bind(self, attr_names, args: tuple, kwargs: dict, first=()) -> tuple[list, dict]:
        """(tensors, attributes) of a call `name(*args, **kwargs)`; `first` are tensors given before
        (a method's self). A None attribute is left out (its default applies)."""
        args, kwargs = list(args), dict(kwargs)
        tensors, attrs, names = list(first), dict(self.fixed), []
        for param in self.params:
            star = param.startswith("*")
            pname, _, attr = param.lstrip("*").partition("=")
            attr = attr or pname
            names.append(pname)
            if star and args:
                value = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)
                args = []
            elif args:
                value = args.pop(0)
            elif pname in kwargs:
                value = kwargs.pop(pname)
            elif attr in attr_names or star:
                continue
            else:
                raise TypeError(f"{self.where}.{self.name}() missing the argument {pname!r}")
            if attr not in attr_names:
                tensors.append(value)
            elif value is not None:
                attrs[attr] = value
        if args:
            raise TypeError(f"{self.where}.{self.name}() takes at most {len(self.params)} argument(s) "
                            f"({', '.join(names)}), got {len(self.params) + len(args)}")
        if kwargs:
            raise TypeError(f"{self.where}.{self.name}() got an unexpected keyword argument "
                            f"{next(iter(kwargs))!r}; it takes {', '.join(names) or 'none'}")
        return tensors, attrs


@dataclass(frozen=True)
class Api:
    """How users call the op. `P.<name>()` (MindSpore's primitive) takes the attributes at construction
    and the tensors, then `call_attrs`, at the call; `ops.<functional>(x, ...)` and the Tensor method
    `x.<method>(...)` take the tensors (the first one is `x`)."""
    primitive: bool = True                # a P.<name> class exists
    call_attrs: tuple[str, ...] = ()      # attributes passed after the tensors, in order
    functional: str = ""                  # graphkernel.ops.<functional>
    method: str = ""                      # Tensor.<method>
    # the method's parameters after self, in MindSpore's order, when they are not the call's: each an
    # attribute's name, or "param=attr" where MindSpore's Tensor method names it otherwise
    # (x.sum(axis, keepdims): ("axis", "keepdims=keep_dims")); "*attr" gathers the remaining positional
    # arguments (x.reshape(2, 3) or x.reshape((2, 3))); None given for one means its default
    method_args: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()          # names of the tensor inputs in docs (default x, y, z)
    # (result k, input i): result k is the new value of input i, a Parameter the primitive writes in
    # place (MindSpore's ref inputs: P.AdamWeightDecay updates var, m and v)
    updates: tuple[tuple[int, int], ...] = ()
    packed: bool = False                  # the tensors come as one tuple or list: P.AddN()((x, y, z))
    order: tuple[str, ...] = ()           # the call's arguments in MindSpore's order when the tensors do
                                          # not all come first: names from `inputs` and `call_attrs`
                                          # (P.OneHot()(indices, depth, on_value, off_value))
    forms: tuple[Form, ...] = ()          # MindSpore 2.x's other spellings: methods, ops., mint. (Form)
    returned: int | None = None           # the call returns its first `returned` results only, the others
                                          # are written into Parameters (P.ApplyMomentum returns variable)
    # MindSpore's implicit conversion of mixed float widths (its gradient primitives take them): float
    # input i is cast to the dtype of input casts[i] (None: kept) before the op, and float result k to
    # the dtype input result_casts[k] was given in (None: kept), as MindSpore 2.10 returns them
    casts: tuple[int | None, ...] = ()
    result_casts: tuple[int | None, ...] = ()


REQUIRED = object()


@dataclass(frozen=True)
class Attr:
    """An attribute an op accepts: its default and a check that returns the canonical value."""
    name: str
    default: Any = REQUIRED
    check: Callable[[Any], Any] = lambda v: v


@dataclass(frozen=True)
class OpDef:
    name: str
    pattern: Pattern
    arity: int | None                       # number of tensor inputs; None: any number >= 1
    infer: Callable[[tuple[TensorType, ...], dict], tuple[TensorType, ...]]
    reference: Callable[[list[np.ndarray], dict], Any]
    attrs: tuple[Attr, ...] = ()
    # (input types, attrs) -> attrs: resolves values that depend on input ranks (axes, -1 dims)
    canonicalize: Callable[[tuple[TensorType, ...], dict], dict] | None = None
    expandable: bool = False                # a composite op: an expander turns it into primitives
    expand_by_default: bool = True          # False: expanded only when --enable_expand_ops names it
    moves_data: bool = False                # only moves or converts data: its reference sees half floats as
                                            # they are (every other op's sees them widened to float32), and it
                                            # takes the storage dtypes (int4...), as INJECTIVE ops do
    collective: bool = False                # a collective (ir/ops/collective.py): a HOST op placed "comm", between
                                            # device subgraphs, reading and writing device buffers (no copies)
    doc: str = field(default="", compare=False)
    cost: Cost = Cost.ARITH                 # per element, for the cost model
    basic_fusion: bool = False              # basic fusion clusters it (the simple elementwise ops)
    float16_exact: bool = False             # on float16 operands its result is a float16 value already
    precision: Precision = Precision()      # default mixed-precision list
    aliases: tuple[str, ...] = ()           # other MindSpore spellings (P.TensorAdd)
    cann: tuple[str, ...] = ()              # CANN / TensorFlow names accepted in precision files
    onnx: tuple[str, ...] = ()              # ONNX op types that are exactly this op (graphkernel.onnx)
    api: Api = Api()
    domain: str = "real"                    # sample inputs for generated tests: real | positive | bool |
                                            # unit (|x| < 1) | any (dtype-generic)
    # the gradient rule (ir/autodiff.py): grad(b, node, douts) -> one cotangent per input (None: zero),
    # written with primitives through b, an ir.GraphBuilder; None: the op has no gradient (an error when
    # one is asked through a float result of it)
    grad: Callable | None = field(default=None, compare=False)

    def check_attrs(self, attrs: dict) -> dict:
        known = {a.name: a for a in self.attrs}
        unknown = sorted(set(attrs) - set(known))
        if unknown:
            raise AttrError(f"unknown attribute(s) {', '.join(unknown)}; {self.name} accepts "
                            f"{', '.join(known) or 'no attributes'}")
        out = {}
        for a in self.attrs:
            if a.name in attrs:
                try:
                    out[a.name] = a.check(attrs[a.name])
                except (TypeError, ValueError) as e:
                    raise AttrError(f"attribute {a.name}={attrs[a.name]!r}: {e}") from None
            elif a.default is REQUIRED:
                raise AttrError(f"missing attribute {a.name}")
            else:
                out[a.name] = a.default
        return out


def no_gradient(b, node, douts):
    """The rule of an op whose float results are locally constant in its inputs (Floor, Sign, ...)."""
    return (None,) * len(node.inputs)


OPS: dict[str, OpDef] = {}

# MindSpore spellings of our ops (each row's `aliases`)
ALIASES: dict[str, str] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in OPS or opdef.name in ALIASES:
        raise IRError(f"op {opdef.name} registered twice")
    if opdef.precision.list not in ("white", "black", "gray"):
        raise IRError(f"op {opdef.name}: precision list {opdef.precision.list!r} is not white, black or gray")
    for alias in opdef.aliases:
        if alias in OPS or alias in ALIASES:
            raise IRError(f"op {opdef.name}: alias {alias} names another op")
        ALIASES[alias] = opdef.name
    OPS[opdef.name] = opdef
    return opdef


def canonical_name(name: str) -> str:
    return ALIASES.get(name, name)


def get(name: str) -> OpDef:
    name = canonical_name(name)
    if name in OPS:
        return OPS[name]
    near = difflib.get_close_matches(name, list(OPS) + list(ALIASES), n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    raise UnknownOpError(f"unknown op {name!r}{hint}; known ops: {', '.join(sorted(OPS))}")


def pattern_of(node: Node) -> Pattern:
    if node.subgraph is not None:
        return max((pattern_of(n) for n in node.subgraph.nodes), default=Pattern.ELEMWISE)
    return get(node.op).pattern


def _where(op: str, name: str) -> str:
    return f"{op} ({name})" if name else op


def takes_stored(d: OpDef) -> bool:
    """Whether the op takes the storage dtypes (int4, uint4, int2, uint2): it only moves or converts data."""
    return d.moves_data or d.pattern == Pattern.INJECTIVE


def _check_stored(d: OpDef, types) -> None:
    stored = next((t.dtype for t in types if not t.dtype.computes), None)
    if stored is not None and not takes_stored(d):
        movers = ", ".join(sorted(n for n, o in OPS.items() if takes_stored(o) and n not in ("Cast", "Const")))
        raise DTypeError(f"dtype {stored} is a storage dtype: no op computes in it; Cast converts it and only the "
                         f"ops that move data take it ({movers}); Cast it to int8 or float32 first")


def make_node(op: str, inputs, attrs: dict | None = None, name: str = "") -> Node:
    """A node of a registered op, attrs checked and canonical, result types inferred."""
    d = get(op)
    inputs = tuple(inputs)
    for v in inputs:
        if not isinstance(v, Value):
            raise IRError(f"{_where(d.name, name)}: input {v!r} is not an IR Value")
    try:
        if d.arity is not None and len(inputs) != d.arity:
            raise AttrError(f"takes {d.arity} tensor input(s), got {len(inputs)}")
        if d.arity is None and not inputs:
            raise AttrError("takes at least one tensor input")
        types = tuple(v.type for v in inputs)
        _check_stored(d, types)
        checked = d.check_attrs(dict(attrs or {}))
        if d.canonicalize is not None:
            checked = d.canonicalize(types, checked)
        out_types = d.infer(types, checked)
        _check_stored(d, out_types)
    except IRError as e:
        raise type(e)(f"{_where(d.name, name)}: {e}") from None
    return Node(d.name, inputs, checked, out_types, name)


def evaluate(node: Node, arrays: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The numpy reference results of one (non-composite) node, in the node's exact dtypes. An op that
    computes sees bfloat16 operands widened to float32 (exact) and its float32 results are rounded to
    bfloat16 once: MindSpore's bfloat16 semantics (a sum or a matrix product accumulates in float32)."""
    out = evaluate_any_shape(node, arrays)
    for r, t in zip(out, node.types):
        if r.shape != t.shape and r.shape != tuple(int(d) for d in t.shape):   # symbolic: at their hints
            raise IRError(f"reference of {node.op} gave shape {r.shape}, inferred {t.shape}")
    return out


def evaluate_any_shape(node: Node, arrays: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """evaluate's results without its shape check: shaped by the operands given (a stand-in of an
    elementwise kernel runs a node on slices of its operands, kernels/standin.py)."""
    d = get(node.op)
    if not d.moves_data and d.pattern != Pattern.INJECTIVE and any(a.dtype == BFLOAT16_NP for a in arrays):
        arrays = [a.astype(np.float32) if a.dtype == BFLOAT16_NP else a for a in arrays]
    result = d.reference(arrays, node.attr_dict)
    results = result if isinstance(result, tuple) else (result,)
    return tuple(np.asarray(r).astype(t.dtype.np, copy=False) for r, t in zip(results, node.types))
