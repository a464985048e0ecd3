"""Slicing and joining: Slice, Concat, Split (INJECTIVE), and Gather with run-time indices (OPAQUE).

    Slice(x, begin, end, strides)   out[i] = x[begin + i*stride] per axis, stopping before end; one entry
                                    per axis; positions are absolute (no counting from the end),
                                    clamped to [0, n] for a positive stride and to [-1, n-1] for a
                                    negative one (end -1: run to the front)
    Concat(x0, x1, ..., axis)       joins along axis; every other dim equal
    Split(x, axis, sizes)           one result per size, the sizes summing to x.shape[axis]
    Gather(data, indices, axis, batch_dims=0)
                                    numpy take along axis; negative indices count from the end; the
                                    first batch_dims dims of data and indices are batch dims, each
                                    batch element gathering from its own data (MindSpore's P.Gather)

Each output element comes from exactly one input element (Gather reads data at indices known only at
run time, so it is opaque: a kernel of its own).
"""
from __future__ import annotations

import numpy as np

from ir.errors import IRError, ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_int, is_int_tuple, require, same_dtype
from ir.ops.registry import Api, Attr, Form, OpDef, Pattern, Precision, register
from ir.symbolic import clamp, range_length


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ShapeError(f"axis {axis} out of range for rank {rank} (valid: {-rank}..{rank - 1})")
    return axis % rank


def _slice_canon(types, attrs):
    (x,) = types
    begin, end, strides = attrs["begin"], attrs["end"], attrs["strides"]
    if not len(begin) == len(end) == len(strides) == x.rank:
        raise ShapeError(f"begin {fmt(begin)}, end {fmt(end)} and strides {fmt(strides)} need one entry "
                         f"per axis of {fmt(x.shape)}")
    if 0 in strides:
        raise ShapeError(f"stride 0 in strides {fmt(strides)}")
    low = [0 if s > 0 else -1 for s in strides]
    high = [n if s > 0 else n - 1 for n, s in zip(x.shape, strides)]
    where = f"Slice of {fmt(x.shape)}"
    return {"begin": tuple(clamp(b, lo, hi, where) for b, lo, hi in zip(begin, low, high)),
            "end": tuple(clamp(e, lo, hi, where) for e, lo, hi in zip(end, low, high)),
            "strides": strides}


def _slice_shape(attrs) -> tuple[int, ...]:
    return tuple(range_length(b, e, s) for b, e, s in zip(attrs["begin"], attrs["end"], attrs["strides"]))


def _slices(attrs):
    return tuple(slice(b, e if e >= 0 else None, s)
                 for b, e, s in zip(attrs["begin"], attrs["end"], attrs["strides"]))


def _along(shape, axis: int, n: int) -> tuple[int, ...]:
    return shape[:axis] + (n,) + shape[axis + 1:]


def _take(b, x, axis: int, begin: int, end: int, stride: int = 1):
    """x sliced along one axis (every other axis whole)."""
    rank = len(x.shape)
    starts, ends, steps = [0] * rank, list(x.shape), [1] * rank
    starts[axis], ends[axis], steps[axis] = begin, end, stride
    return b.op("Slice", x, begin=tuple(starts), end=tuple(ends), strides=tuple(steps))


def _slice_grad(b, node, douts):
    """The cotangent put back where the slice read, zeros elsewhere, one axis at a time: a negative
    stride reversed, a stride s > 1 spread by interleaving s - 1 zeros after each element, then zeros
    concatenated before and after."""
    x, d = node.inputs[0], douts[0]
    for axis, (begin, end, stride) in enumerate(zip(node.attr("begin"), node.attr("end"), node.attr("strides"))):
        n, count = x.shape[axis], d.shape[axis]
        if count == n:        # the whole axis: stride 1, or a reversal
            if stride < 0:
                d = _take(b, d, axis, n - 1, -1, -1)
            continue
        if count == 0:
            d = b.fill(0, TensorType(_along(d.shape, axis, n), d.dtype))
            continue
        first = begin if stride > 0 else begin + (count - 1) * stride
        step = abs(stride)
        if stride < 0:
            d = _take(b, d, axis, count - 1, -1, -1)
        if step > 1 and count > 1:
            spread = d.shape[:axis + 1] + (1,) + d.shape[axis + 1:]
            zeros = b.fill(0, TensorType(d.shape[:axis + 1] + (step - 1,) + d.shape[axis + 1:], d.dtype))
            d = b.op("Concat", b.op("Reshape", d, shape=spread), zeros, axis=axis + 1)
            d = b.op("Reshape", d, shape=_along(d.shape[:axis + 1] + d.shape[axis + 2:], axis, count * step))
            d = _take(b, d, axis, 0, (count - 1) * step + 1)
        parts = [d]
        after = n - first - d.shape[axis]
        if first:
            parts.insert(0, b.fill(0, TensorType(_along(d.shape, axis, first), d.dtype)))
        if after:
            parts.append(b.fill(0, TensorType(_along(d.shape, axis, after), d.dtype)))
        d = b.op("Concat", *parts, axis=axis) if len(parts) > 1 else d
    return (d,)


def _concat_grad(b, node, douts):
    axis, offset, out = node.attr("axis"), 0, []
    for x in node.inputs:
        size = x.shape[axis]
        out.append(_take(b, douts[0], axis, offset, offset + size))
        offset += size
    return tuple(out)


def _split_grad(b, node, douts):
    parts = [d if d is not None else b.fill(0, v.type) for v, d in zip(node.outputs, douts)]
    return (b.op("Concat", *parts, axis=node.attr("axis")) if len(parts) > 1 else parts[0],)


register(OpDef("Slice", Pattern.INJECTIVE, 1,
               lambda types, attrs: (TensorType(_slice_shape(attrs), types[0].dtype),),
               lambda a, attrs: a[0][_slices(attrs)].copy(),  # C order, 0-d stays 0-d
               (Attr("begin", check=is_int_tuple), Attr("end", check=is_int_tuple),
                Attr("strides", check=is_int_tuple)), _slice_canon, grad=_slice_grad,
               doc="strided slice of every axis; attrs canonical as slice.indices gives them", domain="any",
               cann=("SliceD",), precision=Precision("gray", True, "moves data"), api=Api(primitive=False)))


def _concat_canon(types, attrs):
    return {"axis": _axis(attrs["axis"], types[0].rank) if types[0].rank else attrs["axis"]}


def _concat_infer(types, attrs):
    dtype = same_dtype(types)
    axis = attrs["axis"]
    first = types[0]
    if first.rank == 0:
        raise ShapeError("cannot concatenate 0-d tensors")
    for t in types[1:]:
        if t.rank != first.rank or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape))
                                       if i != axis):
            raise ShapeError(f"shapes {', '.join(fmt(t.shape) for t in types)} differ outside axis {axis}")
    size = sum(t.shape[axis] for t in types)
    return (TensorType(first.shape[:axis] + (size,) + first.shape[axis + 1:], dtype),)


register(OpDef("Concat", Pattern.INJECTIVE, None, _concat_infer,
               lambda a, attrs: np.concatenate(a, axis=attrs["axis"]),
               (Attr("axis", check=is_int),), _concat_canon, grad=_concat_grad, doc="joins its inputs along axis", domain="any",
               cann=("ConcatD", "ConcatV2", "ConcatV2D"), precision=Precision("gray", True, "moves data"), api=Api(primitive=False)))


def _split_canon(types, attrs):
    (x,) = types
    if x.rank == 0:
        raise ShapeError("cannot split a 0-d tensor")
    axis = _axis(attrs["axis"], x.rank)
    sizes = attrs["sizes"]
    if not sizes or any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise ShapeError(f"sizes {fmt(sizes)} must be non-negative and sum to dim {axis} of {fmt(x.shape)} "
                         f"({x.shape[axis]})")
    return {"axis": axis, "sizes": sizes}


def _split_infer(types, attrs):
    x, axis = types[0], attrs["axis"]
    return tuple(TensorType(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in attrs["sizes"])


def _split(a, attrs):
    bounds = np.cumsum(attrs["sizes"])[:-1]
    return tuple(np.ascontiguousarray(p) for p in np.split(a[0], bounds, axis=attrs["axis"]))


register(OpDef("Split", Pattern.INJECTIVE, 1, _split_infer, _split,
               (Attr("axis", check=is_int), Attr("sizes", check=is_int_tuple)), _split_canon, grad=_split_grad,
               doc="one result per size along axis", domain="any", cann=("SplitD",), precision=Precision("gray", True, "moves data"),
               api=Api(primitive=False)))


def _gather_canon(types, attrs):
    data, indices = types
    if data.rank == 0:
        raise ShapeError("cannot gather from a 0-d tensor")
    axis, batch = _axis(attrs["axis"], data.rank), attrs["batch_dims"]
    batch = batch % (indices.rank + 1) if -indices.rank - 1 < batch < 0 else batch
    if not 0 <= batch <= min(axis, indices.rank) or data.shape[:batch] != indices.shape[:batch]:
        raise ShapeError(f"batch_dims={attrs['batch_dims']}: the leading batch_dims dims of params "
                         f"{fmt(data.shape)} and indices {fmt(indices.shape)} must be equal, and batch_dims at "
                         f"most axis ({axis}) and the rank of indices")
    return {"axis": axis, "batch_dims": batch}


def _gather_infer(types, attrs):
    data, indices = types
    if not indices.dtype.is_int:
        raise ShapeError(f"indices must be int32 or int64, got {indices.dtype}")
    require(data.dtype, "any")
    axis, batch = attrs["axis"], attrs["batch_dims"]
    return (TensorType(data.shape[:axis] + indices.shape[batch:] + data.shape[axis + 1:], data.dtype),)


def _gather(a, attrs):
    data, indices = a
    axis, batch = attrs["axis"], attrs["batch_dims"]
    n = data.shape[axis]
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise IRError(f"Gather: an index is outside [{-n}, {n}) for axis {axis} of size {n}")
    indices = indices.astype(np.int64)
    if not batch:
        return np.take(data, indices, axis=axis)
    out = np.empty(data.shape[:axis] + indices.shape[batch:] + data.shape[axis + 1:], data.dtype)
    for b in np.ndindex(*data.shape[:batch]):   # each batch element gathers from its own params
        out[b] = np.take(data[b], indices[b], axis=axis - batch)
    return out


def _gather_grad(b, node, douts):
    """The cotangent of each gathered slice added back where it came from: UnsortedSegmentSum over the
    indices (negative ones counted from the end), with the gathered axis moved to the front and back."""
    (data, indices), (d,) = node.inputs, douts
    if node.attr("batch_dims"):
        raise IRError(f"Gather{' (' + node.name + ')' if node.name else ''} with batch_dims="
                      f"{node.attr('batch_dims')} has no gradient rule (only batch_dims=0 has one)")
    axis, k, n = node.attr("axis"), indices.type.rank, data.shape[node.attr("axis")]
    if axis:   # the index dims first: d is data.shape[:axis] + indices.shape + data.shape[axis + 1:]
        perm = tuple(range(axis, axis + k)) + tuple(range(axis)) + tuple(range(axis + k, d.type.rank))
        d = b.op("Transpose", d, perm=perm)
    ids = b.op("Select", b.op("Less", indices, b.scalar(0, indices)),
               b.op("Add", indices, b.scalar(n, indices)), indices)
    summed = b.op("UnsortedSegmentSum", d, ids, num_segments=n)
    if axis:   # (n,) + data.shape[:axis] + data.shape[axis + 1:] -> data's order
        rank = data.type.rank
        summed = b.op("Transpose", summed, perm=tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, rank)))
    return summed, None


register(OpDef("Gather", Pattern.OPAQUE, 2, _gather_infer, _gather, (Attr("axis", check=is_int),
                                                                   Attr("batch_dims", 0, is_int)),
               _gather_canon, grad=_gather_grad, doc="numpy take along axis, indices in [-n, n), per batch element when batch_dims > 0", domain="any",
               cann=("GatherV2",), precision=Precision("gray", True, "moves data"),
               api=Api(call_attrs=("axis",), functional="gather", inputs=("params", "indices"), forms=(
                   Form("ops", "gather", ("input_params", "input_indices", "axis", "batch_dims")),))))
