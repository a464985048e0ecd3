"""MindSpore's composite-function API: `MultitypeFuncGraph`, `HyperMap`, `Map`, `partial`, `add_flags`.

    clip_grad = C.MultitypeFuncGraph("clip_grad")

    @clip_grad.register("Number", "Number", "Tensor")
    def _clip_grad(clip_type, clip_value, grad): ...

    grads = C.HyperMap()(F.partial(clip_grad, 1, 1.0), grads)     # one call per gradient

A MultitypeFuncGraph chooses, at each call, the overload registered for the kinds of its arguments
(MindSpore's type names, KINDS below). In GRAPH_MODE the call happens while `construct` is traced, so
the overload's primitives become nodes of the compiled graph, and its Python decisions (`if
decay_flag:` on a bool of a tuple) are taken once, at trace time, as MindSpore's compiler takes them.

Choosing: an overload fits when every argument is of its kind or of a wider one (a bool is a "Bool" and
a "Number", an int an "Int" and a "Number", a Parameter a "Tensor"); among the overloads that fit, the one
with the most exact kinds wins, the first registered on a tie. None fitting is an error naming the
MultitypeFuncGraph, the kinds it was given and the signatures it has.

HyperMap(fn=None) applies fn element by element over tuples (or lists) of equal length, recursing into
tuples nested inside them; Map(fn=None) applies it over one level only (an element that is a tuple is
handed to fn as it is). Without a function at construction, the call's first argument is the function.
Arguments that are not sequences are an error when others are.
"""
from __future__ import annotations

import difflib
import functools
import numbers

import numpy as np

from ir.dtypes import DType
from ir.errors import GraphKernelError
from graphkernel.tensor import TensorOps


class CompositeError(GraphKernelError, TypeError):
    """A MultitypeFuncGraph, HyperMap or Map used with arguments it cannot take."""


def _is_bool(x) -> bool:
    return isinstance(x, (bool, np.bool_))


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not _is_bool(x)


def _is_float(x) -> bool:
    return isinstance(x, (float, np.floating))


def _is_function(x) -> bool:
    return callable(x) and not isinstance(x, (type, TensorOps))


# MindSpore's type names: name -> (test, exactness). A value of several kinds fits the exact ones best.
KINDS = {
    "Tensor": (lambda x: isinstance(x, TensorOps), 2),
    "Bool": (_is_bool, 2),
    "Int": (_is_int, 2),
    "Float": (_is_float, 2),
    "Number": (lambda x: _is_bool(x) or isinstance(x, numbers.Number) or isinstance(x, np.number), 1),
    "String": (lambda x: isinstance(x, str), 2),
    "Tuple": (lambda x: isinstance(x, tuple), 2),
    "List": (lambda x: isinstance(x, list), 2),
    "Dictionary": (lambda x: isinstance(x, dict), 2),
    "Function": (_is_function, 2),
    "None": (lambda x: x is None, 2),
    "TypeType": (lambda x: isinstance(x, DType), 2),
    "Slice": (lambda x: isinstance(x, slice), 2),
    "Ellipsis": (lambda x: x is Ellipsis, 2),
}
# MindSpore's names of values graphkernel does not have (sparse tensors, monads): an overload may be
# registered with them (MindSpore's own optimizers do), and no argument ever fits it.
ABSENT_KINDS = ("RowTensor", "COOTensor", "CSRTensor", "MapTensor", "UMonad", "IOMonad")


def kind_name(x) -> str:
    """The exact kind of a value, for messages."""
    for name, (test, exact) in KINDS.items():
        if exact == 2 and test(x):
            return name
    return type(x).__name__


class MultitypeFuncGraph:
    """A function with overloads chosen by the kinds of its arguments (see the module doc)."""

    def __init__(self, name: str, read_value: bool = False, doc_url: str = "", need_raise: bool = False):
        if not isinstance(name, str) or not name:
            raise CompositeError(f"MultitypeFuncGraph: name must be a non-empty string, got {name!r}")
        self.name = name
        self.read_value = read_value
        self.entries: list[tuple[tuple[str, ...], object]] = []

    def register(self, *type_names):
        """Decorator: the function is the overload for arguments of these kinds."""
        names = []
        for t in type_names:
            if not isinstance(t, str) or (t not in KINDS and t not in ABSENT_KINDS):
                known = list(KINDS) + list(ABSENT_KINDS)
                near = difflib.get_close_matches(str(t), known, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise CompositeError(f"MultitypeFuncGraph {self.name!r}: register: unknown type name {t!r}{hint}; "
                                     f"accepted: {', '.join(known)}")
            names.append(t)

        def deco(fn):
            if not callable(fn):
                raise CompositeError(f"MultitypeFuncGraph {self.name!r}: register decorates a function, got a "
                                     f"{type(fn).__name__}")
            self.entries.append((tuple(names), fn))
            return fn
        return deco

    def _score(self, names, args) -> int | None:
        if len(names) != len(args):
            return None
        score = 0
        for name, a in zip(names, args):
            if name in ABSENT_KINDS:
                return None
            test, exact = KINDS[name]
            if not test(a):
                return None
            score += exact
        return score

    def __call__(self, *args):
        best, best_score = None, -1
        for names, fn in self.entries:
            score = self._score(names, args)
            if score is not None and score > best_score:
                best, best_score = fn, score
        if best is None:
            given = ", ".join(kind_name(a) for a in args)
            signatures = "; ".join(f"({', '.join(names)})" for names, _ in self.entries) or "none"
            raise CompositeError(f"MultitypeFuncGraph {self.name!r} has no overload for arguments of kinds "
                                 f"({given}); its registered signatures: {signatures}")
        return best(*args)

    def __repr__(self) -> str:
        return f"MultitypeFuncGraph({self.name!r}, {len(self.entries)} overload(s))"


def partial(fn, *args):
    """`F.partial(fn, *args)`: fn with its first arguments bound (a "Function" to MultitypeFuncGraph)."""
    if not callable(fn):
        raise CompositeError(f"partial: the first argument must be a function, got a {type(fn).__name__}")
    return functools.partial(fn, *args)


def add_flags(fn=None, **flags):
    """`C.add_flags(has_effect=True)`: MindSpore's compiler hints on a function; recorded as its
    `_graph_flags`, and the function runs as it is (graphkernel orders side effects by program order)."""
    def deco(f):
        merged = dict(getattr(f, "_graph_flags", {}))
        merged.update(flags)
        try:
            f._graph_flags = merged
        except AttributeError:   # a bound method: its function carries the flags
            f.__func__._graph_flags = merged
        return f
    return deco if fn is None else deco(fn)


class _Mapper:
    """HyperMap and Map: fn over tuples element by element."""

    recursive = True

    def __init__(self, ops=None, reverse: bool = False):
        if ops is not None and not callable(ops):
            raise CompositeError(f"{type(self).__name__}: ops must be a function, got a {type(ops).__name__}")
        self.ops = ops
        self.reverse = bool(reverse)

    def __call__(self, *args):
        name = type(self).__name__
        if self.ops is None:
            if not args or not callable(args[0]):
                raise CompositeError(f"{name}() without a function at construction takes the function as its first "
                                     f"argument, got {kind_name(args[0]) if args else 'nothing'}")
            fn, seqs = args[0], args[1:]
        else:
            fn, seqs = self.ops, args
        if not seqs:
            raise CompositeError(f"{name}: no sequences to map {getattr(fn, '__name__', fn)!r} over")
        return self._map(fn, seqs, ())

    def _map(self, fn, seqs, where):
        name = type(self).__name__
        is_seq = [isinstance(s, (tuple, list)) for s in seqs]
        at = f" at element {list(where)}" if where else ""
        if not any(is_seq):   # only at the top: a nested call has a sequence among its items
            return fn(*seqs)
        if not all(is_seq):
            kinds = ", ".join(kind_name(s) for s in seqs)
            raise CompositeError(f"{name}: arguments{at} mix sequences and non-sequences ({kinds}); every argument "
                                 "mapped over must be a tuple or list")
        lengths = [len(s) for s in seqs]
        if len(set(lengths)) != 1:
            raise CompositeError(f"{name}: the tuples{at} have different lengths ({', '.join(map(str, lengths))}); "
                                 "they must be equal")
        order = range(lengths[0] - 1, -1, -1) if self.reverse else range(lengths[0])
        out = [None] * lengths[0]
        for i in order:
            items = [s[i] for s in seqs]
            if self.recursive and any(isinstance(x, (tuple, list)) for x in items):
                out[i] = self._map(fn, items, where + (i,))
            else:
                out[i] = fn(*items)
        return tuple(out) if isinstance(seqs[0], tuple) else list(out)


class HyperMap(_Mapper):
    """`C.HyperMap(ops=None, reverse=False)`: fn over tuples element by element, into nested tuples."""
    recursive = True


class Map(_Mapper):
    """`C.Map(ops=None, reverse=False)`: fn over tuples element by element, one level only."""
    recursive = False


__all__ = ["MultitypeFuncGraph", "HyperMap", "Map", "partial", "add_flags", "CompositeError", "KINDS"]
