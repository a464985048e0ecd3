"""Shared rules for inference and attribute checks: broadcasting, dtype agreement, axis handling."""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType, as_dtype
from ir.errors import DTypeError, ShapeError
from ir.graph import TensorType
from ir.symbolic import Dim, same_size


def fmt(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    if any(isinstance(d, Dim) for s in shapes for d in s):
        return _broadcast_symbolic(shapes)
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"shapes {', '.join(fmt(s) for s in shapes)} do not broadcast "
                         "(numpy rule: aligned from the right, each dim equal or 1)") from None


def _broadcast_symbolic(shapes) -> tuple:
    """numpy's rule with symbolic sizes (ir/symbolic.py): a symbolic size is not 1, and two must be the
    same size (equal, or assumed equal at their representative values and checked at each call)."""
    rank = max(len(s) for s in shapes)
    out = []
    for a in range(rank):
        dims = [s[a - rank + len(s)] for s in shapes if a - rank + len(s) >= 0]
        result = 1
        for d in dims:
            if d == 1:
                continue
            if result == 1:
                result = d
            elif not same_size(result, d, f"broadcasting {', '.join(fmt(s) for s in shapes)}"):
                raise ShapeError(f"shapes {', '.join(fmt(s) for s in shapes)} do not broadcast "
                                 "(numpy rule: aligned from the right, each dim equal or 1; a symbolic "
                                 "size is never taken for 1)")
        out.append(result)
    return tuple(out)


def same_dtype(types: tuple[TensorType, ...]) -> DType:
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise DTypeError(f"operands have different dtypes ({', '.join(str(t.dtype) for t in types)}); "
                         "insert a Cast to make them agree")
    return types[0].dtype


def require(dtype: DType, allowed: str) -> None:
    ok = {"float": dtype.is_float, "numeric": dtype != DType.bool, "any": True,
          "bool": dtype == DType.bool}[allowed]
    if not ok:
        raise DTypeError(f"dtype {dtype} not supported (needs a {allowed} dtype)")


def normalize_axes(axes, rank: int, *, empty_means_all: bool = True) -> tuple[int, ...]:
    """Sorted, non-negative, unique axes; () means every axis when `empty_means_all`."""
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    if not axes and empty_means_all:
        return tuple(range(rank))
    out = set()
    for a in axes:
        if not -rank <= a < rank:
            raise ShapeError(f"axis {a} out of range for rank {rank} (valid: {-rank}..{rank - 1})")
        out.add(a % rank if rank else 0)
    if len(out) != len(axes):
        raise ShapeError(f"repeated axis in {axes}")
    return tuple(sorted(out))


# Attribute checks: each returns the canonical value or raises TypeError/ValueError.

def is_bool(v) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError("expected True or False")
    return bool(v)


def is_int(v) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError("expected an int")
    return v if isinstance(v, Dim) else int(v)   # a symbolic size stays one


def is_float(v) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError("expected a number")
    return float(v)


def is_int_tuple(v) -> tuple[int, ...]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (is_int(v),)
    if not isinstance(v, (tuple, list)):
        raise TypeError("expected an int or a tuple of ints")
    return tuple(is_int(x) for x in v)


def is_dtype(v) -> DType:
    return as_dtype(v)


def is_str(*choices):
    def check(v):
        if not isinstance(v, str) or (choices and v not in choices):
            raise ValueError(f"expected one of {', '.join(choices)}" if choices else "expected a string")
        return v
    return check
