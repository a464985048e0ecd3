"""StridedSlice: MindSpore's (and TensorFlow's) slice with masks, a composite op over Slice and Reshape.

    StridedSlice(x) {begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                     shrink_axis_mask}

Entry i of begin/end/strides is one index of `x[...]`; bit i of a mask changes what entry i means:

    begin_mask   begin[i] ignored: the axis starts at its first element (its last for a negative stride)
    end_mask     end[i] ignored: the axis runs to its end (its front for a negative stride)
    ellipsis_mask  entry i is `...`: as many whole axes as the other entries leave (at most one bit)
    new_axis_mask  entry i inserts an axis of size 1 (x[None]); begin/end/strides[i] are ignored
    shrink_axis_mask  entry i takes the one element begin[i] (in [-n, n), a positive stride) and drops
                   the axis (x[3])

Axes after the last entry are taken whole. Negative begin/end count from the end, then clamp to the
axis, as Python slices do. Bits past the last entry are ignored, a negative mask is an error, as in
MindSpore 2.10. `resolve` turns the attributes into one Slice over every axis of x and the result's
shape: the expander (graphkernel/expanders/strided_slice.py) emits that Slice, and a Reshape where
the shapes differ, so a StridedSlice that only inserts or drops size-1 axes becomes a Reshape (a view).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ir.errors import ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_int, is_int_tuple
from ir.ops.composite import composite
from ir.ops.injective import _slice_grad, _slices
from ir.ops.registry import Api, Attr, Precision, make_node
from ir.symbolic import clamp, range_length

MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


class Resolved(NamedTuple):
    begin: tuple[int, ...]      # the Slice over every axis of x
    end: tuple[int, ...]
    strides: tuple[int, ...]
    shape: tuple[int, ...]      # the StridedSlice's result


def _mask(v) -> int:
    v = is_int(v)
    if v < 0:
        raise ValueError("must be >= 0 (bit i applies to entry i of begin, end and strides)")
    return v


def _bit(mask: int, i: int) -> bool:
    return bool((mask >> i) & 1)


def resolve(shape: tuple[int, ...], attrs: dict) -> Resolved:
    """The Slice (begin, end, strides over every axis of `shape`) and the result shape of a StridedSlice;
    a ShapeError names the entry that does not fit."""
    begin, end, strides = attrs["begin"], attrs["end"], attrs["strides"]
    n, rank = len(begin), len(shape)
    if not len(end) == len(strides) == n:
        raise ShapeError(f"begin {fmt(begin)}, end {fmt(end)} and strides {fmt(strides)} must have one length")
    if 0 in strides:
        raise ShapeError(f"stride 0 in strides {fmt(strides)}")
    ellipsis = [i for i in range(n) if _bit(attrs["ellipsis_mask"], i)]
    if len(ellipsis) > 1:
        raise ShapeError(f"ellipsis_mask={attrs['ellipsis_mask']} marks {len(ellipsis)} entries as `...`; "
                         "at most one may be")
    new_axis = [_bit(attrs["new_axis_mask"], i) and i not in ellipsis for i in range(n)]
    consumed = sum(1 for i in range(n) if not new_axis[i] and i not in ellipsis)
    if consumed > rank:
        raise ShapeError(f"begin {fmt(begin)} slices {consumed} axes, x {fmt(shape)} has {rank}")
    sb, se, ss, out = [], [], [], []
    axis = 0

    def take(b: int, e: int, s: int, size: int | None) -> None:
        """Axis `axis` sliced [b:e:s]; `size` None: the axis is dropped (shrunk)."""
        nonlocal axis
        sb.append(b)
        se.append(e)
        ss.append(s)
        if size is not None:
            out.append(size)
        axis += 1

    for i in range(n):
        if i in ellipsis:
            for _ in range(rank - consumed):
                take(0, shape[axis], 1, shape[axis])
        elif new_axis[i]:
            out.append(1)
        elif _bit(attrs["shrink_axis_mask"], i):
            dim, b = shape[axis], begin[i]
            if strides[i] < 0 or not -dim <= b < dim:
                raise ShapeError(f"shrink_axis_mask takes element begin[{i}]={b} of axis {axis} (size {dim}) "
                                 f"with strides[{i}]={strides[i]}: it needs begin in [{-dim}, {dim}) and a "
                                 "positive stride")
            take(b % dim, b % dim + 1, 1, None)
        else:
            dim, s = shape[axis], strides[i]
            low, high = (0, dim) if s > 0 else (-1, dim - 1)

            def bound(v: int) -> int:
                return clamp(v + dim if v < 0 else v, low, high, f"StridedSlice of {fmt(shape)}")
            b = (low if s > 0 else high) if _bit(attrs["begin_mask"], i) else bound(begin[i])
            e = (high if s > 0 else low) if _bit(attrs["end_mask"], i) else bound(end[i])
            take(b, e, s, range_length(b, e, s))
    while axis < rank:
        take(0, shape[axis], 1, shape[axis])
    return Resolved(tuple(sb), tuple(se), tuple(ss), tuple(out))


def as_slice(x, attrs: dict):
    """The Slice node (not added to any graph) a StridedSlice of `x` reads through."""
    r = resolve(x.shape, attrs)
    return make_node("Slice", (x,), {"begin": r.begin, "end": r.end, "strides": r.strides})


def _canon(types, attrs):
    resolve(types[0].shape, attrs)   # errors at the call, naming the entry
    return attrs


def _infer(types, attrs):
    return (TensorType(resolve(types[0].shape, attrs).shape, types[0].dtype),)


def _reference(a, attrs):
    r = resolve(a[0].shape, attrs)
    return np.ascontiguousarray(a[0][_slices(r._asdict())]).reshape(r.shape)


def _grad(b, node, douts):
    """Slice's rule, on the cotangent reshaped to the Slice's result (new axes dropped, shrunk ones back)."""
    sliced = as_slice(node.inputs[0], node.attr_dict)
    d = douts[0]
    if d.shape != sliced.out.shape:
        d = b.op("Reshape", d, shape=sliced.out.shape)
    return _slice_grad(b, sliced, (d,))


composite("StridedSlice", 1, _infer, _reference,
          (Attr("begin", check=is_int_tuple), Attr("end", check=is_int_tuple), Attr("strides", check=is_int_tuple),
           *(Attr(m, 0, _mask) for m in MASKS)), _canon, grad=_grad, domain="any",
          precision=Precision("gray", True, "moves data"), cann=("StridedSliceD",),
          doc="x[begin:end:strides] per entry, with MindSpore's begin/end/ellipsis/new-axis/shrink masks",
          api=Api(call_attrs=("begin", "end", "strides"), functional="strided_slice", inputs=("input_x",)))
