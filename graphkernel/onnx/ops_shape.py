"""ONNX data movement and shape ops. Shapes are static at compile time, so:

    Shape                        a constant (int64), never a run-time op
    Reshape/Expand/Squeeze/...   their shape and axes inputs must be constants (or folded from Shape);
                                 Squeeze and Unsqueeze become Reshape
    Slice                        ONNX starts/ends/axes/steps -> our Slice with absolute, clamped positions
    Gather                       folds on constants; a scalar index on a run-time tensor becomes
                                 Slice + Reshape; other run-time Gathers are our opaque Gather
    Constant / Identity          arrays / pass-through

Versions (registry.py): Squeeze's and Unsqueeze's axes and Split's sizes are attributes before version 13,
read as such; Slice is converted from version 10 (its starts and ends inputs; version 1, in force at opsets
1 to 9, took them as attributes and is refused), Reshape from 5 (its shape an input), Concat from 4
(axis required), Tile from 6, Expand from 8; the other versions differ from the next only in types, or
in allowing negative axes.
"""
from __future__ import annotations

import math

import numpy as np

from ir.limits import check_shape
from ir.ops.checks import broadcast
from ir.symbolic import Dim
from graphkernel.onnx.builder import Builder, NodeInfo, dtype_of, is_const, shape_data, shape_of
from graphkernel.onnx.registry import converter
from graphkernel.onnx.types import to_array


def _axis(n: NodeInfo, axis: int, rank: int) -> int:
    """The axis, made non-negative; a 0-d tensor has none."""
    if not -rank <= axis < rank:
        raise n.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


@converter("Identity", min_version=1)
def identity(b: Builder, n: NodeInfo):
    return [n.inputs[0]]


@converter("Constant", min_version=1)
def constant(b: Builder, n: NodeInfo):
    if "value" in n.attrs:
        return [to_array(n.attrs["value"], f"{n.where()}: attribute 'value'")]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in n.attrs:
            return [np.asarray(n.attrs[key], dtype=dtype)]
    given = ", ".join(sorted(n.attrs)) or "none"
    raise n.error(f"needs a 'value', 'value_float(s)' or 'value_int(s)' attribute (graphkernel supports "
                  f"no sparse or string constants); given: {given}")


@converter("Shape", min_version=1)
def shape(b: Builder, n: NodeInfo):
    dims = b.static_shape(n.inputs[0])
    start, end = n.attr("start", 0), n.attr("end", len(dims))
    return [shape_data(dims[start:end])]   # symbolic sizes stay so (an object array)


@converter("Reshape", static=(1,), min_version=5)
def reshape(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    target = b.ints(n.input(1), "shape")
    allowzero = n.attr("allowzero", 0)
    if allowzero and 0 in target and -1 in target:
        raise n.error(f"shape {target}: with allowzero=1, 0 and -1 cannot both appear")
    dims = shape_of(x)
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(dims):
                raise n.error(f"shape {target}: 0 at position {i} copies a dim X {list(dims)} does not have")
            d = dims[i]
        out.append(d)
    return [b.op("Reshape", [x], shape=tuple(out))]


@converter("Transpose", min_version=1)
def transpose(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    perm = n.attr("perm", list(reversed(range(len(shape_of(x))))))
    return [b.op("Transpose", [x], perm=tuple(perm))]


@converter("Expand", static=(1,), min_version=8)
def expand(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    target = broadcast(shape_of(x), tuple(b.ints(n.input(1), "shape")))
    return [x if target == shape_of(x) else b.op("BroadcastTo", [x], shape=target)]


def _given_axes(b: Builder, n: NodeInfo) -> list[int] | None:
    """Squeeze's and Unsqueeze's axes as given: the attribute before version 13, then the second input."""
    if n.version < 13:
        return list(n.attrs["axes"]) if "axes" in n.attrs else None
    return b.ints(n.input(1), "axes") if n.input(1) is not None else None


def _axes(b: Builder, n: NodeInfo, rank: int) -> list[int] | None:
    given = _given_axes(b, n)
    if given is None:
        return None
    axes = [_axis(n, a, rank) for a in given]
    if len(set(axes)) != len(axes):
        raise n.error(f"repeated axis in {axes}")
    return axes


@converter("Squeeze", static=(1,), min_version=1)
def squeeze(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    dims = shape_of(x)
    axes = _axes(b, n, len(dims))
    if axes is None:
        axes = [i for i, d in enumerate(dims) if d == 1]
    bad = [a for a in axes if dims[a] != 1]
    if bad:
        raise n.error(f"cannot squeeze axes {bad} of shape {list(dims)}: their dims are not 1")
    return [b.reshape(x, [d for i, d in enumerate(dims) if i not in axes])]


@converter("Unsqueeze", static=(1,), min_version=1)
def unsqueeze(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    dims = list(shape_of(x))
    given = _given_axes(b, n)
    if given is None:
        raise n.error(f"{'attribute' if n.version < 13 else 'input'} 'axes' is missing")
    axes = sorted(_axes(b, n, len(dims) + len(given)))
    for a in axes:
        dims.insert(a, 1)
    return [b.reshape(x, dims)]


@converter("Concat", min_version=4)
def concat(b: Builder, n: NodeInfo):
    if "axis" not in n.attrs:
        raise n.error("missing attribute 'axis'")
    args = [x for x in n.inputs if x is not None]
    if len(args) == 1:
        return args
    return [b.op("Concat", args, axis=n.attr("axis"))]


@converter("Split", static=(1,), min_version=2)
def split(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    dims = shape_of(x)
    axis = _axis(n, n.attr("axis", 0), len(dims))
    size = dims[axis]
    if n.version < 13 and "split" in n.attrs:   # the sizes an attribute before version 13
        sizes = list(n.attrs["split"])
    elif n.version >= 13 and n.input(1) is not None:
        sizes = b.ints(n.input(1), "split")
    elif "num_outputs" in n.attrs:
        parts = n.attr("num_outputs")
        if parts != n.num_outputs:
            raise n.error(f"num_outputs={parts}, but the node has {n.num_outputs} outputs")
        chunk = -(-size // parts)
        sizes = [min(chunk, max(size - chunk * i, 0)) for i in range(parts)]
    else:
        parts = n.num_outputs
        if size % parts:
            raise n.error(f"dim {axis} of {list(dims)} does not split evenly into {parts} outputs")
        sizes = [size // parts] * parts
    if len(sizes) != n.num_outputs:
        raise n.error(f"{len(sizes)} split sizes {sizes} for {n.num_outputs} outputs")
    if sum(sizes) != size:
        raise n.error(f"split sizes {sizes} do not add up to dim {axis} of {list(dims)} ({size})")
    if len(sizes) == 1:
        return [x]
    return b.ops("Split", [x], axis=axis, sizes=tuple(sizes))


@converter("Slice", static=(1, 2, 3, 4), min_version=10)
def slice_(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    dims = shape_of(x)
    starts, ends = b.ints(n.input(1), "starts"), b.ints(n.input(2), "ends")
    axes = b.ints(n.input(3), "axes") if n.input(3) is not None else list(range(len(starts)))
    steps = b.ints(n.input(4), "steps") if n.input(4) is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise n.error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    begin, end, strides = [0] * len(dims), list(dims), [1] * len(dims)
    seen = set()
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = _axis(n, a, len(dims))
        if a in seen:
            raise n.error(f"axis {a} appears twice in axes {axes}")
        if st == 0:
            raise n.error("a step of 0")
        seen.add(a)
        d = dims[a]
        begin[a] = s + d if s < 0 else s
        end[a] = e + d if e < 0 else e
        if st < 0:  # ONNX clamps a backward start to [0, d-1]; our Slice keeps "before the front" at -1
            begin[a] = max(begin[a], 0)
            end[a] = max(end[a], -1)
        strides[a] = st
    return [b.op("Slice", [x], begin=tuple(begin), end=tuple(end), strides=tuple(strides))]


@converter("Gather", static=(1,), min_version=1)
def gather(b: Builder, n: NodeInfo):
    data, indices = n.inputs[:2]
    dims = shape_of(data)
    axis = _axis(n, n.attr("axis", 0), len(dims))
    if is_const(indices) and not is_const(data) and indices.ndim == 0:
        i = int(indices)
        if not -dims[axis] <= i < dims[axis]:
            raise n.error(f"index {i} is out of range for axis {axis} of {list(dims)}")
        i %= dims[axis]
        begin = [0] * len(dims)
        end = list(dims)
        begin[axis], end[axis] = i, i + 1
        one = b.op("Slice", [data], begin=tuple(begin), end=tuple(end), strides=(1,) * len(dims))
        return [b.reshape(one, dims[:axis] + dims[axis + 1:])]
    if not dtype_of(indices).is_int:
        raise n.error(f"indices must be int32 or int64, got {dtype_of(indices)}")
    return [b.op("Gather", [data, indices], axis=axis)]


@converter("Size", min_version=1)
def size(b: Builder, n: NodeInfo):
    count = math.prod(b.static_shape(n.inputs[0]))
    return [shape_data([count]).reshape(())]


@converter("Flatten", min_version=1)
def flatten(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    dims = shape_of(x)
    axis = n.attr("axis", 1)
    if not -len(dims) <= axis <= len(dims):
        raise n.error(f"axis {axis} is out of range for rank {len(dims)}")
    axis += len(dims) if axis < 0 else 0
    rows, cols = (math.prod(part) for part in (dims[:axis], dims[axis:]))
    return [b.reshape(x, (rows, cols))]


@converter("ConstantOfShape", static=(0,), min_version=9)
def constant_of_shape(b: Builder, n: NodeInfo):
    shape = b.ints(n.inputs[0], "input")
    if any(d < 0 for d in shape):
        raise n.error(f"shape {shape} has a negative dim")
    value = n.attr("value")
    fill = to_array(value, f"{n.where()}: attribute 'value'").reshape(-1) if value is not None else \
        np.zeros(1, np.float32)
    if fill.size != 1:
        raise n.error(f"attribute 'value' must hold one element, it holds {fill.size}")
    check_shape(shape, fill.dtype, b.trace.memory_limit, "its result")
    if any(isinstance(d, Dim) for d in shape):   # a symbolic size: a scalar broadcast in the graph
        return [b.op("BroadcastTo", [fill[0:1].reshape(())], shape=tuple(shape))]
    return [np.full(shape, fill[0], dtype=fill.dtype)]


@converter("Range", static=(0, 1, 2), min_version=11)
def range_(b: Builder, n: NodeInfo):
    start, limit, delta = (b.static(n.input(i), what) for i, what in enumerate(("start", "limit", "delta")))
    for what, x in (("start", start), ("limit", limit), ("delta", delta)):
        if x.size != 1 or not np.isfinite(x).all():
            raise n.error(f"input {what!r} must be one finite number, got {x.tolist()!r}")
    if delta == 0:
        raise n.error("delta is 0")
    count = max(int(np.ceil((limit.item() - start.item()) / delta.item())), 0)
    check_shape((count,), start.dtype, b.trace.memory_limit, "its result")
    return [(start + np.arange(count, dtype=start.dtype) * delta).astype(start.dtype)]


@converter("Tile", static=(1,), min_version=6)
def tile(b: Builder, n: NodeInfo):
    """Our Tile, with ONNX's rule of one repeat per axis."""
    x = n.inputs[0]
    dims = shape_of(x)
    repeats = b.ints(n.input(1), "repeats")
    if len(repeats) != len(dims) or any(r < 0 for r in repeats):
        raise n.error(f"repeats {repeats} must hold one non-negative count per axis of {list(dims)}")
    return [b.op("Tile", [x], multiples=tuple(repeats))]
