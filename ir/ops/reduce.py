"""Reductions. The axis attribute is canonical: sorted, non-negative, never empty for rank > 0."""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.graph import TensorType
from ir.errors import ShapeError
from ir.ops.checks import fmt, is_bool, is_int_tuple, normalize_axes, require
from ir.ops.registry import Api, Attr, Form, OpDef, Pattern, Precision, register

REDUCE_ATTRS = (Attr("axis", (), is_int_tuple), Attr("keep_dims", False, is_bool))


def canonical_axes(types, attrs):
    return {**attrs, "axis": normalize_axes(attrs["axis"], types[0].rank)}


def reduced_shape(shape, axes, keep_dims) -> tuple[int, ...]:
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduce_infer(types, attrs, allowed="numeric"):
    (x,) = types
    require(x.dtype, allowed)
    return (TensorType(reduced_shape(x.shape, attrs["axis"], attrs["keep_dims"]), x.dtype),)


def _sum(a, attrs):
    x = a[0]
    acc = np.float32 if x.dtype == DType.float16.np else x.dtype  # float16 accumulates in float32
    return np.sum(x, axis=attrs["axis"], keepdims=attrs["keep_dims"], dtype=acc).astype(x.dtype)


def _extremum(fn):
    return lambda a, attrs: fn(a[0], axis=attrs["axis"], keepdims=attrs["keep_dims"])


def extremum_axes(types, attrs):
    """canonical_axes, refusing an empty reduction: a max or min of nothing has no value."""
    attrs = canonical_axes(types, attrs)
    shape = types[0].shape
    empty = [a for a in attrs["axis"] if shape[a] == 0]
    if empty:
        raise ShapeError(f"cannot take the max or min over axis {empty[0]} of {fmt(shape)}: it is empty")
    return attrs


def spread(b, node, d):
    """A reduction's cotangent `d` spread back over the reduced axes: shape of the input."""
    x = node.inputs[0]
    kept = reduced_shape(x.shape, node.attr("axis"), True)
    if d.shape != kept:
        d = b.op("Reshape", d, shape=kept)
    return d if kept == x.shape else b.op("BroadcastTo", d, shape=x.shape)


def _sum_grad(b, node, douts):
    return (spread(b, node, douts[0]),)


def _extremum_grad(b, node, douts):
    """The cotangent shared equally among the elements equal to the max (or min), as MindSpore's rule."""
    x = node.inputs[0]
    chosen = b.op("Cast", b.op("Equal", x, spread(b, node, node.out)), dtype=x.dtype)
    count = b.reduce("ReduceSum", chosen, node.attr("axis"), keep_dims=node.attr("keep_dims"))
    return (b.op("Mul", chosen, spread(b, node, b.op("RealDiv", douts[0], count))),)


def _api(method: str, *forms: Form) -> Api:
    return Api(call_attrs=("axis",), method=method, method_args=("axis", "keepdims=keep_dims"), forms=forms)


def _dim_forms(where: tuple[str, ...], name: str, tensor: str = "input") -> tuple[Form, ...]:
    """MindSpore 2.x's (input, dim, keepdim) reductions: ops.sum, mint.sum, mint.amax, ..."""
    return tuple(Form(w, name, (tensor, "dim=axis", "keepdim=keep_dims")) for w in where)


register(OpDef("ReduceSum", Pattern.REDUCE, 1, reduce_infer, _sum, REDUCE_ATTRS, canonical_axes, grad=_sum_grad,
               cann=("ReduceSumD",),
               precision=Precision("gray", True, "follows its input, as in the float16 ReduceSum case (a "
                                   "float16 ReduceSum runs with block_dim 1; black-list it to keep it float32)"), api=_api("sum", *_dim_forms(("ops", "mint"), "sum"))))
register(OpDef("ReduceMax", Pattern.REDUCE, 1, reduce_infer, _extremum(np.max), REDUCE_ATTRS, extremum_axes,
               grad=_extremum_grad, cann=("ReduceMaxD",), precision=Precision("gray", True, "exact in any float dtype"),
               api=_api("max", *_dim_forms(("mint",), "amax"), Form("ops", "amax", ("input", "axis", "keepdims=keep_dims")),
                        Form("Tensor", "amax", ("axis", "keepdims=keep_dims")))))
register(OpDef("ReduceMin", Pattern.REDUCE, 1, reduce_infer, _extremum(np.min), REDUCE_ATTRS, extremum_axes,
               grad=_extremum_grad, cann=("ReduceMinD",), precision=Precision("gray", True, "exact in any float dtype"),
               api=_api("min", *_dim_forms(("mint",), "amin"), Form("ops", "amin", ("input", "axis", "keepdims=keep_dims")),
                        Form("Tensor", "amin", ("axis", "keepdims=keep_dims")))))
