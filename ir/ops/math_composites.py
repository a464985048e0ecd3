"""More composite ops MindSpore scripts reach for, each a numpy reference here and an expander into
primitives (graphkernel/expanders/), as MindSpore's graph-kernel expanders write them:

    Erfc(x)                       1 - erf(x)                      (float16 computed in float32)
    Softsign(x)                   x / (1 + |x|)
    SquaredDifference(x, y)       (x - y) * (x - y), numpy broadcasting
    OnesLike(x)                   ones of x's shape and dtype
    SquareSumAll(x, y)            (sum(x * x), sum(y * y)), two 0-d results; x and y of one shape, as
                                  MindSpore requires (float16 sums in float32)
    EqualCount(x, y)              [number of equal elements], shape (1,), x's dtype (as MindSpore 2.10)
    ArgMaxWithValue(x) {axis=0, keep_dims=False} -> (index, value)
                                  the first index of the maximum along axis (int64, as MindSpore 2.10;
                                  a NaN counts as the maximum, as numpy's argmax) and the maximum
    AddN((x0, x1, ...))           x0 + x1 + ... added from the left; one shape and dtype, as MindSpore requires
"""
from __future__ import annotations

import math

import numpy as np

from ir.errors import ShapeError
from ir.dtypes import DType
from ir.graph import TensorType
from ir.ops.checks import broadcast, fmt, is_bool, is_int, require, same_dtype
from ir.ops.composite import composite
from ir.ops.registry import Api, Attr, Form, Precision, no_gradient


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _same_float(types, attrs):
    require(types[0].dtype, "float")
    return (types[0],)


def _erfc(a, attrs):
    x = a[0]
    return np.vectorize(math.erfc, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def _erfc_grad(b, node, douts):
    x = node.inputs[0]
    local = b.op("Mul", b.scalar(-2 / math.sqrt(math.pi), x), b.op("Exp", b.op("Neg", b.op("Mul", x, x))))
    return (b.op("Mul", douts[0], local),)


def _softsign(a, attrs):
    x = _wide(a[0])
    return (x / (1 + np.abs(x))).astype(a[0].dtype)


def _softsign_grad(b, node, douts):
    x = node.inputs[0]
    denom = b.op("Add", b.scalar(1, x), b.op("Abs", x))
    return (b.op("RealDiv", douts[0], b.op("Mul", denom, denom)),)


def _squared_difference_infer(types, attrs):
    dtype = same_dtype(types)
    require(dtype, "numeric")
    return (TensorType(broadcast(types[0].shape, types[1].shape), dtype),)


def _squared_difference(a, attrs):
    d = a[0] - a[1]
    return d * d


def _squared_difference_grad(b, node, douts):
    x, y = node.inputs
    twice = b.op("Mul", douts[0], b.op("Mul", b.op("Sub", x, y), b.scalar(2, x)))
    return b.sum_to(twice, x.shape), b.sum_to(b.op("Neg", twice), y.shape)


def _ones_like_infer(types, attrs):
    return (types[0],)


def _square_sum_all_infer(types, attrs):
    dtype = same_dtype(types)
    require(dtype, "float")
    if types[0].shape != types[1].shape:
        raise ShapeError(f"x {fmt(types[0].shape)} and y {fmt(types[1].shape)} must have one shape")
    return (TensorType((), dtype), TensorType((), dtype))


def _square_sum_all(a, attrs):
    return tuple(np.asarray(np.sum(_wide(x) * _wide(x))).astype(x.dtype) for x in a)


def _square_sum_all_grad(b, node, douts):
    out = []
    for x, d in zip(node.inputs, douts):
        out.append(None if d is None else b.op("Mul", b.op("Mul", x, b.scalar(2, x)),
                                               b.op("BroadcastTo", d, shape=x.shape) if x.shape else d))
    return tuple(out)


def _equal_count_infer(types, attrs):
    same_dtype(types)
    if types[0].shape != types[1].shape:
        raise ShapeError(f"x {fmt(types[0].shape)} and y {fmt(types[1].shape)} must have one shape")
    require(types[0].dtype, "numeric")
    return (TensorType((1,), types[0].dtype),)


composite("Erfc", 1, _same_float, _erfc, why="bounded result", grad=_erfc_grad,
          doc="1 - erf(x)", api=Api(functional="erfc", method="erfc", forms=(Form("mint", "erfc", ("input",)),)))
composite("Softsign", 1, _same_float, _softsign, why="bounded result", grad=_softsign_grad,
          doc="x / (1 + |x|)", api=Api(functional="softsign", forms=(Form("ops", "softsign", ("x",)),)))
composite("SquaredDifference", 2, _squared_difference_infer, _squared_difference, grad=_squared_difference_grad,
          doc="(x - y)^2 with numpy broadcasting", api=Api())   # no ops.squared_difference in MindSpore 2.10
composite("OnesLike", 1, _ones_like_infer, lambda a, attrs: np.ones_like(a[0]), grad=no_gradient,
          why="a constant", doc="ones of x's shape and dtype", api=Api(functional="ones_like", forms=(Form("mint", "ones_like", ("input",)),)))
composite("SquareSumAll", 2, _square_sum_all_infer, _square_sum_all, grad=_square_sum_all_grad,
          precision=Precision("black", True, "two long sums"),
          doc="(sum(x * x), sum(y * y)) as 0-d tensors")
composite("EqualCount", 2, _equal_count_infer,
          lambda a, attrs: np.array([np.count_nonzero(a[0] == a[1])], a[0].dtype), grad=no_gradient,
          why="a count", doc="the number of equal elements of x and y, shape (1,), in x's dtype")


def _argmax_canon(types, attrs):
    rank = types[0].rank
    if not -rank <= attrs["axis"] < max(rank, 1):
        raise ShapeError(f"axis {attrs['axis']} out of range for {fmt(types[0].shape)}")
    if rank and types[0].shape[attrs["axis"] % rank] == 0:
        raise ShapeError(f"cannot take the maximum over an empty axis of {fmt(types[0].shape)}")
    return dict(attrs, axis=attrs["axis"] % rank if rank else 0)


def _argmax_infer(types, attrs):
    (x,) = types
    require(x.dtype, "numeric")
    if not x.rank:
        return TensorType((), DType.int64), x
    axis = attrs["axis"]
    shape = x.shape[:axis] + ((1,) if attrs["keep_dims"] else ()) + x.shape[axis + 1:]
    return TensorType(shape, DType.int64), TensorType(shape, x.dtype)


def _argmax(a, attrs):
    (x,) = a
    if x.ndim == 0:
        return np.asarray(0, np.int64), x.copy()
    axis = attrs["axis"]
    index = np.argmax(x, axis=axis, keepdims=True)
    value = np.take_along_axis(x, index, axis=axis)
    if not attrs["keep_dims"]:
        index, value = np.squeeze(index, axis), np.squeeze(value, axis)
    return index.astype(np.int64), value


def argmax_positions(b, x, axis: int):
    """An int64 Const 0..n-1 along `axis` of x, 1 elsewhere (broadcasts against x)."""
    n = x.shape[axis]
    shape = tuple(n if i == axis else 1 for i in range(x.type.rank))
    return b.const(np.arange(n).reshape(shape), DType.int64)


def _argmax_grad(b, node, douts):
    """The value's cotangent goes to the element the index names; the index has none."""
    x = node.inputs[0]
    dvalue = douts[1]
    if dvalue is None:
        return (None,)
    if not x.type.rank:
        return (dvalue,)
    axis = node.attr("axis")
    kept = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    index, dv = node.outputs[0], dvalue
    if index.shape != kept:
        index, dv = b.op("Reshape", index, shape=kept), b.op("Reshape", dv, shape=kept)
    hit = b.op("Equal", argmax_positions(b, x, axis), index)
    return (b.op("Select", hit, b.op("BroadcastTo", dv, shape=x.shape), b.scalar(0, x)),)


composite("ArgMaxWithValue", 1, _argmax_infer, _argmax, (Attr("axis", 0, is_int), Attr("keep_dims", False, is_bool)),
          _argmax_canon, grad=_argmax_grad, why="selects an element, exact",
          doc="(the first index of the maximum along axis, int64; the maximum)")
# (MindSpore 2.10's Tensor.argmax_with_value returns (value, index): not this row's order, so no form)


def _add_n_infer(types, attrs):
    dtype = same_dtype(types)
    require(dtype, "numeric")
    if len({t.shape for t in types}) != 1:
        raise ShapeError(f"inputs {', '.join(fmt(t.shape) for t in types)} must have one shape")
    return (types[0],)


def _add_n(a, attrs):
    total = a[0]
    for x in a[1:]:
        total = total + x
    return total


composite("AddN", None, _add_n_infer, _add_n, grad=lambda b, node, douts: (douts[0],) * len(node.inputs),
          doc="x0 + x1 + ... from the left, inputs of one shape and dtype",
          api=Api(functional="addn", packed=True, inputs=("x0", "x1"), forms=(Form("ops", "addn", ("x",)),)))
