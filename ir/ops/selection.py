"""Composite ops that pick by index, expanded into comparisons and selects (they fuse):

    Argmax(x) {axis=-1, output_type=int32}   the first index of the maximum along axis (NaN counts as
                                             the maximum), MindSpore's P.Argmax: ArgMaxWithValue's index
                                             cast to output_type (int32 or int64)
    OneHot(indices, on_value, off_value) {depth, axis=-1}
                                             on_value where indices == j along a new axis of size depth,
                                             off_value elsewhere: an index out of [0, depth), negative ones
                                             included, gives a row of off_value, as in MindSpore; called
                                             P.OneHot(axis)(indices, depth, on_value, off_value)
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.errors import DTypeError, ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_dtype, is_int, require, same_dtype
from ir.ops.composite import composite
from ir.ops.math_composites import _argmax, _argmax_canon, _argmax_infer
from ir.ops.registry import Api, Attr, Precision


def _output_type(v) -> DType:
    dtype = is_dtype(v)
    if dtype not in (DType.int32, DType.int64):
        raise ValueError("must be int32 or int64")
    return dtype


def _argmax_row_infer(types, attrs):
    index, _ = _argmax_infer(types, {**attrs, "keep_dims": False})
    return (TensorType(index.shape, attrs["output_type"]),)


composite("Argmax", 1, _argmax_row_infer,
          lambda a, attrs: _argmax(a, {**attrs, "keep_dims": False})[0].astype(attrs["output_type"].np),
          (Attr("axis", -1, is_int), Attr("output_type", DType.int32, _output_type)),
          lambda types, attrs: {"axis": _argmax_canon(types, {**attrs, "keep_dims": False})["axis"],
                                "output_type": attrs["output_type"]},
          precision=Precision("gray", True, "selects an element, exact"),
          doc="the first index of the maximum along axis, in output_type (int32 or int64)",
          api=Api())   # not ops.argmax nor Tensor.argmax: MindSpore's flatten x when axis is None


def _one_hot_canon(types, attrs):
    indices = types[0]
    if attrs["depth"] < 0:
        raise ShapeError(f"depth {attrs['depth']} must be >= 0")
    if not -1 <= attrs["axis"] <= indices.rank:
        raise ShapeError(f"axis {attrs['axis']} out of range for indices {fmt(indices.shape)} "
                         f"(valid: -1..{indices.rank})")
    return {"depth": attrs["depth"], "axis": attrs["axis"] % (indices.rank + 1)}


def one_hot_shape(indices_shape, depth: int, axis: int) -> tuple[int, ...]:
    return indices_shape[:axis] + (depth,) + indices_shape[axis:]


def _one_hot_infer(types, attrs):
    indices, on, off = types
    if not indices.dtype.is_int:
        raise DTypeError(f"indices must be int32 or int64, got {indices.dtype}")
    dtype = same_dtype((on, off))
    require(dtype, "any")
    if on.size != 1 or off.size != 1 or on.rank > 1 or off.rank > 1:
        raise ShapeError(f"on_value {fmt(on.shape)} and off_value {fmt(off.shape)} must be scalars")
    return (TensorType(one_hot_shape(indices.shape, attrs["depth"], attrs["axis"]), dtype),)


def positions(depth: int, rank: int, axis: int) -> np.ndarray:
    """0..depth-1 along `axis` of a rank-`rank` array, 1 elsewhere."""
    return np.arange(depth).reshape(tuple(depth if i == axis else 1 for i in range(rank)))


def _one_hot(a, attrs):
    indices, on, off = a
    axis = attrs["axis"]
    hit = np.expand_dims(indices, axis) == positions(attrs["depth"], indices.ndim + 1, axis)
    return np.where(hit, on.reshape(()), off.reshape(()))


def _one_hot_grad(b, node, douts):
    """on_value's cotangent is the sum of the result's where an index hits, off_value's the rest."""
    indices, on, off = node.inputs
    axis, d = node.attr("axis"), douts[0]
    kept = one_hot_shape(indices.shape, 1, axis)
    ids = indices if indices.shape == kept else b.op("Reshape", indices, shape=kept)
    hit = b.op("Equal", ids, b.const(positions(node.attr("depth"), len(kept), axis), indices.dtype))
    zero = b.scalar(0, d)
    every = tuple(range(d.type.rank))

    def total(x, like):
        s = b.reduce("ReduceSum", x, every, keep_dims=False) if every else x
        return s if s.shape == like.shape else b.op("Reshape", s, shape=like.shape)
    return (None, total(b.op("Select", hit, d, zero), on), total(b.op("Select", hit, zero, d), off))


composite("OneHot", 3, _one_hot_infer, _one_hot, (Attr("depth", check=is_int), Attr("axis", -1, is_int)),
          _one_hot_canon, grad=_one_hot_grad, precision=Precision("gray", True, "selects a value, exact"),
          domain="any", doc="on_value where indices == j along a new axis of size depth, off_value elsewhere",
          api=Api(call_attrs=("depth",), inputs=("indices", "on_value", "off_value"),
                  order=("indices", "depth", "on_value", "off_value")))
