"""What construct computes in Python while it is traced: queries and constants, never graph nodes.

    P.Shape()(x), F.shape(x)         x's shape as a Python tuple (`input_shape[0]` is an int; a dynamic
                                     dim is a symbolic size, ir/symbolic.py: arithmetic on it stays
                                     symbolic, and as an operand it is its value at each call)
    P.DType()(x), F.dtype(x)         x's dtype (`self.cast(y, self.get_dtype(x))`)
    P.Rank()(x), P.Size()(x)         its rank and element count, ints
    F.fill(dtype, shape, value)      a constant Tensor
    F.tuple_to_array((1.0,))         a constant 1-D Tensor: float32 for floats, int32 for ints (MindSpore
                                     2.10's dtypes)
    F.make_range(n), (start, stop[, step])   a tuple of ints (over a symbolic size: a SymbolicRange,
                                     which F.tuple_to_array makes a SizeRange node)
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ir.dtypes import as_dtype
from ir.errors import GraphKernelError
from ir.ops import make_node
from ir.symbolic import SIZE_RANGE, Dim
from graphkernel.tensor import Tensor, TensorOps, new_array
from graphkernel.tracing.trace import SymbolicTensor, active_trace


class StaticValueError(GraphKernelError, TypeError):
    """A trace-time query or constant given something that is not a tensor or a Python constant."""


def _tensor(what: str, x):
    if not isinstance(x, TensorOps):
        raise StaticValueError(f"{what}: expected a Tensor, got a {type(x).__name__}")
    return x


def shape(x) -> tuple[int, ...]:
    return tuple(_tensor("shape", x).shape)


def dtype(x):
    return _tensor("dtype", x).dtype


def rank(x) -> int:
    return len(_tensor("rank", x).shape)


def size(x) -> int:
    return math.prod(_tensor("size", x).shape)   # a symbolic size stays one (ir/symbolic.py)


class _Query:
    fn = None

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise StaticValueError(f"P.{type(self).__name__}() takes no arguments")

    def __call__(self, x):
        return type(self).fn(x)

    def __repr__(self) -> str:
        return f"P.{type(self).__name__}()"


class Shape(_Query):
    """MindSpore's P.Shape()(x): x's shape, a Python tuple at trace time."""
    fn = staticmethod(shape)


class DType(_Query):
    """MindSpore's P.DType()(x): x's dtype."""
    fn = staticmethod(dtype)


class Rank(_Query):
    """MindSpore's P.Rank()(x): x's rank, an int."""
    fn = staticmethod(rank)


class Size(_Query):
    """MindSpore's P.Size()(x): x's element count, an int."""
    fn = staticmethod(size)


def fill(type_, shape_, value) -> Tensor:
    """MindSpore's F.fill(type, shape, value): a constant Tensor of `shape` holding `value`."""
    if isinstance(shape_, int) and not isinstance(shape_, bool):
        shape_ = (shape_,)
    if not isinstance(shape_, (tuple, list)) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                       for d in shape_):
        raise StaticValueError(f"fill: shape must be a tuple of non-negative ints, got {shape_!r}")
    if not isinstance(value, (numbers.Number, np.number, np.bool_)):
        raise StaticValueError(f"fill: value must be a number, got a {type(value).__name__}")
    return Tensor._wrap(new_array(tuple(shape_), type_, "fill", value))   # shape and size checked first


class SymbolicRange:
    """F.make_range over a symbolic size (ir/symbolic.py): its length is known at each call only, so
    it can only become a Tensor (F.tuple_to_array), a SizeRange node of the graph."""

    def __init__(self, start, limit, delta):
        self.start, self.limit, self.delta = start, limit, delta

    def _no_length(self, what: str):
        raise StaticValueError(f"{what} of F.make_range({self.start}, {self.limit}, {self.delta}): its length is a "
                               "dynamic size, known at each call only; make it a Tensor with F.tuple_to_array")

    def __len__(self):
        self._no_length("len()")

    def __iter__(self):
        self._no_length("iterating over")

    def __getitem__(self, k):
        self._no_length("indexing")


def tuple_to_array(x) -> Tensor:
    """MindSpore's F.tuple_to_array: a tuple of Python numbers as a 1-D constant Tensor (a range over a
    symbolic size: a 1-D int32 tensor computed per call)."""
    if isinstance(x, SymbolicRange):
        trace = active_trace()
        if trace is None:
            raise StaticValueError("F.tuple_to_array of a range over a symbolic size outside a traced construct")
        node = make_node(SIZE_RANGE, (), {"start": x.start, "limit": x.limit, "delta": x.delta,
                                          "dtype": as_dtype("int32")}, name=trace.scope_name(SIZE_RANGE))
        return SymbolicTensor(trace.add(node).out)
    if not isinstance(x, (tuple, list)) or not x:
        raise StaticValueError(f"tuple_to_array: expected a non-empty tuple of numbers, got {x!r}")
    for item in x:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (numbers.Real, np.number)):
            raise StaticValueError(f"tuple_to_array: elements must be Python numbers (known when construct is "
                                   f"traced), got a {type(item).__name__}")
    ints = all(isinstance(item, (int, np.integer)) for item in x)
    return Tensor(np.asarray(x, np.int32 if ints else np.float32))


def make_range(start, limit=None, delta=1) -> tuple[int, ...]:
    """MindSpore's F.make_range(n) = (0, ..., n-1); make_range(start, limit[, delta])."""
    for name, v in (("start", start), ("limit", limit), ("delta", delta)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            raise StaticValueError(f"make_range: {name} must be an int, got {v!r}")
    if delta == 0:
        raise StaticValueError("make_range: delta must not be 0")
    if limit is None:
        start, limit = 0, start
    if any(isinstance(v, Dim) for v in (start, limit, delta)):
        if isinstance(delta, Dim):
            raise StaticValueError("make_range: delta must be a static int, got the dynamic size " + str(delta))
        return SymbolicRange(start, limit, int(delta))
    return tuple(range(int(start), int(limit), int(delta)))


__all__ = ["Shape", "DType", "Rank", "Size", "shape", "dtype", "rank", "size", "fill", "tuple_to_array",
           "make_range", "StaticValueError"]
