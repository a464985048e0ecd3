"""Data movement: Reshape, Transpose, BroadcastTo, and Const (a literal, the source of constants)."""
from __future__ import annotations

import math

import numpy as np

from ir.dtypes import as_dtype
from ir.errors import ShapeError
from ir.graph import Literal, TensorType
from ir.ops.checks import fmt, is_int, is_int_tuple
from ir.symbolic import SIZE_RANGE, SIZE_VALUE, range_length, same_size
from ir.ops.registry import Api, Attr, Cost, Form, OpDef, Pattern, Precision, register


def _reshape_canon(types, attrs):
    (x,) = types
    shape = list(attrs["shape"])
    if shape.count(-1) > 1:
        raise ShapeError(f"target shape {fmt(shape)} has more than one -1")
    if any(d < -1 for d in shape):
        raise ShapeError(f"target shape {fmt(shape)} has a negative dim")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or x.size % known:
            raise ShapeError(f"cannot reshape {fmt(x.shape)} ({x.size} elements) to {fmt(shape)}")
        shape[shape.index(-1)] = x.size // known
    if not same_size(math.prod(shape), x.size, f"Reshape of {fmt(x.shape)} to {fmt(shape)}"):
        raise ShapeError(f"cannot reshape {fmt(x.shape)} ({x.size} elements) to {fmt(shape)} "
                         "(element counts differ)")
    return {"shape": tuple(shape)}


def _reshape_grad(b, node, douts):
    return (b.op("Reshape", douts[0], shape=node.inputs[0].shape),)


def _transpose_grad(b, node, douts):
    perm = node.attr("perm")
    return (b.op("Transpose", douts[0], perm=tuple(sorted(range(len(perm)), key=perm.__getitem__))),)


def _broadcast_grad(b, node, douts):
    return (b.sum_to(douts[0], node.inputs[0].shape),)


register(OpDef("Reshape", Pattern.INJECTIVE, 1,
               lambda types, attrs: (TensorType(attrs["shape"], types[0].dtype),),
               lambda a, attrs: a[0].reshape(attrs["shape"]),
               (Attr("shape", check=is_int_tuple),), _reshape_canon, grad=_reshape_grad, cost=Cost.FREE, onnx=(), domain="any",
               moves_data=True,
               precision=Precision("gray", True, "moves data"), api=Api(call_attrs=("shape",), functional="reshape", method="reshape",
                                                                 method_args=("*shape",),
                                                                 forms=(Form("Tensor", "view", ("*shape",)),))))


def _transpose_canon(types, attrs):
    rank = types[0].rank
    perm = tuple(p % rank if -rank <= p < rank else p for p in attrs["perm"])
    if sorted(perm) != list(range(rank)):
        raise ShapeError(f"perm {fmt(attrs['perm'])} is not a permutation of the {rank} axes of "
                         f"{fmt(types[0].shape)}")
    return {"perm": perm}


register(OpDef("Transpose", Pattern.INJECTIVE, 1,
               lambda types, attrs: (TensorType(tuple(types[0].shape[p] for p in attrs["perm"]),
                                                types[0].dtype),),
               lambda a, attrs: np.transpose(a[0], attrs["perm"]).copy(),  # C order, 0-d stays 0-d
               (Attr("perm", check=is_int_tuple),), _transpose_canon, grad=_transpose_grad, domain="any", cann=("TransposeD",),
               precision=Precision("gray", True, "moves data"), api=Api(call_attrs=("perm",), functional="transpose", method="transpose",
                                                                 method_args=("*perm",), forms=(
                   Form("ops", "transpose", ("input", "dims=perm")), Form("ops", "permute", ("input", "axis=perm")),
                   Form("mint", "permute", ("input", "dims=perm")), Form("Tensor", "permute", ("*dims=perm",))))))


def _broadcast_canon(types, attrs):
    (x,) = types
    shape = attrs["shape"]
    if len(shape) < x.rank:
        raise ShapeError(f"cannot broadcast {fmt(x.shape)} to the lower rank {fmt(shape)}")
    lead = len(shape) - x.rank
    out = list(shape)
    for i, d in enumerate(x.shape):
        want = shape[lead + i]
        if want == -1:
            out[lead + i] = d
        elif d != 1 and not same_size(d, want, f"BroadcastTo {fmt(x.shape)} -> {fmt(shape)}"):
            raise ShapeError(f"cannot broadcast {fmt(x.shape)} to {fmt(shape)}: dim {i} is {d}, "
                             f"target {want} (numpy rule: equal or 1)")
    if any(d < 0 for d in out):
        raise ShapeError(f"target shape {fmt(shape)}: -1 only where the input has a dim")
    return {"shape": tuple(out)}


register(OpDef("BroadcastTo", Pattern.BROADCAST, 1,
               lambda types, attrs: (TensorType(attrs["shape"], types[0].dtype),),
               lambda a, attrs: np.broadcast_to(a[0], attrs["shape"]).copy(),
               (Attr("shape", check=is_int_tuple),), _broadcast_canon, grad=_broadcast_grad, cost=Cost.FREE,
               float16_exact=True,
               domain="any", cann=("BroadcastToD",), precision=Precision("gray", True, "moves data"),
               api=Api(forms=(Form("ops", "broadcast_to", ("input", "shape")), Form("mint", "broadcast_to", ("input", "shape")),
                              Form("Tensor", "broadcast_to", ("shape",))))))


def _literal(v) -> Literal:
    lit = v if isinstance(v, Literal) else Literal(v)
    as_dtype(lit.array.dtype)  # rejects dtypes the IR has not
    return lit


register(OpDef("Const", Pattern.ELEMWISE, 0,
               lambda types, attrs: (TensorType(attrs["value"].array.shape,
                                                as_dtype(attrs["value"].array.dtype)),),
               lambda a, attrs: attrs["value"].array,
               (Attr("value", check=_literal),), cost=Cost.FREE, moves_data=True, api=Api(primitive=False)))


def _size_value_infer(types, attrs):
    return (TensorType((), attrs["dtype"]),)


def _size_dtype(v):
    dtype = as_dtype(v)
    if dtype.is_float or dtype.is_int:
        return dtype
    raise ValueError(f"a size is a number: float or int, got {dtype}")


register(OpDef(SIZE_VALUE, Pattern.OPAQUE, 0, _size_value_infer,
               lambda a, attrs: np.array(int(attrs["size"]), attrs["dtype"].np),
               (Attr("size", check=is_int), Attr("dtype", check=_size_dtype)), cost=Cost.FREE, api=Api(primitive=False),
               precision=Precision("gray", True, "a size, no arithmetic"),
               doc="A size as a 0-d tensor (OPAQUE: filled per call, never inside a kernel): `size` is a "
                   "symbolic size (ir/symbolic.py), its value at each "
                   "call (the count a ReduceMean over a dynamic axis divides by, `x / F.shape(x)[1]`); a "
                   "static size is a Const instead."))


def _size_range_infer(types, attrs):
    return (TensorType((range_length(attrs["start"], attrs["limit"], attrs["delta"]),), attrs["dtype"]),)


def _size_range_canon(types, attrs):
    if attrs["delta"] == 0:
        raise ShapeError("a range's delta cannot be 0")
    return attrs


register(OpDef(SIZE_RANGE, Pattern.OPAQUE, 0, _size_range_infer,
               lambda a, attrs: np.arange(int(attrs["start"]), int(attrs["limit"]), int(attrs["delta"]),
                                          dtype=attrs["dtype"].np),
               (Attr("start", check=is_int), Attr("limit", check=is_int), Attr("delta", 1, check=is_int),
                Attr("dtype", check=_size_dtype)), _size_range_canon, cost=Cost.FREE, api=Api(primitive=False),
               precision=Precision("gray", True, "sizes, no arithmetic"),
               doc="start, start + delta, ... before limit as a 1-D tensor, where a bound is a symbolic size "
                   "(F.tuple_to_array(F.make_range(F.shape(x)[0]))); OPAQUE, computed per call. A static range "
                   "is a Const instead."))
