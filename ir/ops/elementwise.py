"""Elementwise and broadcasting primitives: arithmetic, math functions, comparisons, Select, Cast."""
from __future__ import annotations

import math

import numpy as np

from ir.dtypes import DType
from ir.graph import TensorType
from ir.ops.checks import broadcast, is_dtype, require, same_dtype
from ir.ops.registry import Attr, OpDef, Pattern, register


def _binary(name: str, fn, allowed: str = "numeric", result: DType | None = None, doc: str = ""):
    def infer(types, attrs):
        dtype = same_dtype(types)
        require(dtype, allowed)
        return (TensorType(broadcast(types[0].shape, types[1].shape), result or dtype),)
    register(OpDef(name, Pattern.BROADCAST, 2, infer, lambda a, attrs: fn(a[0], a[1]), doc=doc))


def _unary(name: str, fn, allowed: str = "float", doc: str = ""):
    def infer(types, attrs):
        require(types[0].dtype, allowed)
        return (types[0],)
    register(OpDef(name, Pattern.ELEMWISE, 1, infer, lambda a, attrs: fn(a[0]), doc=doc))


def _erf(x: np.ndarray) -> np.ndarray:
    """numpy has no erf: math.erf in float64, rounded once to the input's dtype."""
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return (np.ones((), x.dtype) / np.sqrt(x)).astype(x.dtype)


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.power(x, y)


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.true_divide(x, y)


def maximum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """numpy's documented rule, np.where(x >= y, x, y) with a NaN from either side: numpy's own float32
    loops return y on a tie (maximum(+0.0, -0.0) is -0.0 on x86, +0.0 for float16), so the rule is
    written out to hold on every platform, and the kernels (kernels/emitters.py) follow it."""
    with np.errstate(invalid="ignore"):
        return np.where((x >= y) | (x != x), x, y)


def minimum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where((x <= y) | (x != x), x, y)


def _quiet(fn):
    def run(x):
        with np.errstate(all="ignore"):
            return fn(x)
    return run


_binary("Add", np.add)
_binary("Sub", np.subtract)
_binary("Mul", np.multiply)
_binary("RealDiv", _div, "float")
_binary("Pow", _pow, "float")
_binary("Maximum", maximum)
_binary("Minimum", minimum)
_binary("Greater", np.greater, "any", DType.bool)
_binary("Less", np.less, "any", DType.bool)
_binary("Equal", np.equal, "any", DType.bool)

_unary("Neg", np.negative, "numeric")
_unary("Abs", np.abs, "numeric")
_unary("Exp", _quiet(np.exp))
_unary("Log", _quiet(np.log))
_unary("Sqrt", _quiet(np.sqrt))
_unary("Rsqrt", _quiet(_rsqrt))
_unary("Tanh", np.tanh)
_unary("Erf", _erf)


def _select_infer(types, attrs):
    cond, x, y = types
    require(cond.dtype, "bool")
    dtype = same_dtype((x, y))
    return (TensorType(broadcast(cond.shape, x.shape, y.shape), dtype),)


register(OpDef("Select", Pattern.BROADCAST, 3, _select_infer,
               lambda a, attrs: np.where(a[0], a[1], a[2])))


def _cast_infer(types, attrs):
    return (TensorType(types[0].shape, attrs["dtype"]),)


def _cast(a, attrs):
    with np.errstate(all="ignore"):
        return a[0].astype(attrs["dtype"].np)


register(OpDef("Cast", Pattern.ELEMWISE, 1, _cast_infer, _cast, (Attr("dtype", check=is_dtype),)))
