"""Composite ops that only move data, each expanded into Reshape and BroadcastTo (a view and an index
computation: they fuse, and cost no copy of their own):

    Squeeze(x) {axis=()}              drops the size-1 axes named (every one for ()); an axis named
                                      whose size is not 1 stays, as in MindSpore 2.10
    ExpandDims(x) {axis}              inserts a size-1 axis at axis, in [-rank-1, rank]
    Tile(x) {multiples}               numpy's tile: x repeated multiples[i] times along axis i; the
                                      shorter of x's shape and multiples is padded with leading 1s
    ZerosLike(x)                      zeros of x's shape and dtype (reads nothing of x)

    Tile: x (a, b) by (m, n) = BroadcastTo(Reshape(x, (1, a, 1, b)), (m, a, n, b)) reshaped to (m*a, n*b)
"""
from __future__ import annotations

import numpy as np

from ir.errors import ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_int, is_int_tuple, require
from ir.ops.composite import composite
from ir.ops.registry import Api, Attr, Form, Precision, no_gradient

MOVES = Precision("gray", True, "moves data")


def _reshape_grad(b, node, douts):
    return (b.op("Reshape", douts[0], shape=node.inputs[0].shape),)


def _squeeze_canon(types, attrs):
    shape = types[0].shape
    axes = attrs["axis"]
    for a in axes:
        if not -len(shape) <= a < max(len(shape), 1):
            raise ShapeError(f"axis {a} out of range for {fmt(shape)} (valid: {-len(shape)}..{len(shape) - 1})")
    return {"axis": tuple(sorted({a % len(shape) for a in axes})) if shape else ()}


def squeezed(shape, axes) -> tuple[int, ...]:
    drop = set(axes) if axes else set(range(len(shape)))
    return tuple(d for i, d in enumerate(shape) if not (i in drop and d == 1))


composite("Squeeze", 1, lambda types, attrs: (TensorType(squeezed(types[0].shape, attrs["axis"]), types[0].dtype),),
          lambda a, attrs: a[0].reshape(squeezed(a[0].shape, attrs["axis"])),
          (Attr("axis", (), is_int_tuple),), _squeeze_canon, grad=_reshape_grad, domain="any", precision=MOVES,
          doc="drops the size-1 axes named (every one for ()); a named axis of another size stays",
          api=Api(functional="squeeze", method="squeeze", method_args=("axis",), inputs=("input_x",),
                  forms=(Form("ops", "squeeze", ("input", "axis")),)))


def _expand_canon(types, attrs):
    rank, axis = types[0].rank, attrs["axis"]
    if not -rank - 1 <= axis <= rank:
        raise ShapeError(f"axis {axis} out of range for {fmt(types[0].shape)} (valid: {-rank - 1}..{rank})")
    return {"axis": axis % (rank + 1)}


def _expanded(shape, axis):
    return shape[:axis] + (1,) + shape[axis:]


composite("ExpandDims", 1, lambda types, attrs: (TensorType(_expanded(types[0].shape, attrs["axis"]), types[0].dtype),),
          lambda a, attrs: a[0].reshape(_expanded(a[0].shape, attrs["axis"])),
          (Attr("axis", check=is_int),), _expand_canon, grad=_reshape_grad, domain="any", precision=MOVES,
          doc="a size-1 axis inserted at axis",
          api=Api(call_attrs=("axis",), functional="expand_dims", method="expand_dims", inputs=("input_x",), forms=(
              Form("ops", "unsqueeze", ("input", "dim=axis")), Form("mint", "unsqueeze", ("input", "dim=axis")),
              Form("Tensor", "unsqueeze", ("dim=axis",)))))


def tile_plan(shape, multiples) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(x's shape padded to the rank of both, its interleaved (1, d) shape, the broadcast (m, d) shape)."""
    rank = max(len(shape), len(multiples))
    shape = (1,) * (rank - len(shape)) + tuple(shape)
    multiples = (1,) * (rank - len(multiples)) + tuple(multiples)
    return (shape, tuple(v for d in shape for v in (1, d)),
            tuple(v for d, m in zip(shape, multiples) for v in (m, d)))


def _tile_canon(types, attrs):
    multiples = attrs["multiples"]
    if any(m < 0 for m in multiples):
        raise ShapeError(f"multiples {fmt(multiples)} has a negative entry")
    require(types[0].dtype, "any")
    return attrs


def _tiled(shape, multiples):
    _, _, spread = tile_plan(shape, multiples)
    return tuple(spread[2 * i] * spread[2 * i + 1] for i in range(len(spread) // 2))


def _tile_grad(b, node, douts):
    """Each copy's cotangent summed back: the result seen as (m0, d0, m1, d1, ...), the m axes summed."""
    x = node.inputs[0]
    _, _, spread = tile_plan(x.shape, node.attr("multiples"))
    d = b.op("Reshape", douts[0], shape=spread)
    d = b.reduce("ReduceSum", d, tuple(range(0, len(spread), 2)), keep_dims=False)
    return (d if d.shape == x.shape else b.op("Reshape", d, shape=x.shape),)


composite("Tile", 1, lambda types, attrs: (TensorType(_tiled(types[0].shape, attrs["multiples"]), types[0].dtype),),
          lambda a, attrs: np.tile(a[0], attrs["multiples"]),
          (Attr("multiples", check=is_int_tuple),), _tile_canon, grad=_tile_grad, domain="any", precision=MOVES,
          doc="numpy's tile: x repeated multiples[i] times along axis i",
          api=Api(call_attrs=("multiples",), functional="tile", method="tile", inputs=("input_x",), forms=(
              Form("ops", "tile", ("input", "dims=multiples")), Form("mint", "tile", ("input", "dims=multiples")))))

composite("ZerosLike", 1, lambda types, attrs: (types[0],), lambda a, attrs: np.zeros_like(a[0]), grad=no_gradient,
          domain="any", precision=Precision("gray", True, "a constant"), doc="zeros of x's shape and dtype",
          api=Api(functional="zeros_like", forms=(Form("mint", "zeros_like", ("input",)),)))
