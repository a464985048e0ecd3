"""MindSpore's `P.Slice()(x, begin, size)`: x[begin[i] : begin[i] + size[i]] on every axis, a size of -1
running to the end, as the op table's strided Slice (begin, end, strides 1).

MindSpore's rules, checked here with the shape in the message: one begin and one size per axis,
begin >= 0, size >= -1, begin + size <= the axis's length.
"""
from __future__ import annotations

from ir.errors import ShapeError
from graphkernel.ops.primitive import Primitive, PrimitiveCallError


class Slice(Primitive):
    """MindSpore's Slice: see the module doc."""
    op = "Slice"
    signature = "P.Slice()(x, begin, size)"

    def __init__(self):
        self.attrs = {}

    def __repr__(self):
        return "P.Slice()"

    def __call__(self, x, begin, size):
        if not hasattr(x, "shape"):
            raise PrimitiveCallError(f"P.Slice: x must be a Tensor, got {type(x).__name__}")
        shape = tuple(x.shape)
        begin, size = _ints("begin", begin), _ints("size", size)
        if not len(begin) == len(size) == len(shape):
            raise ShapeError(f"P.Slice: begin {begin} and size {size} need one entry per axis of x {shape}")
        end = []
        for axis, (b, s, n) in enumerate(zip(begin, size, shape)):
            if b < 0 or s < -1:
                raise ShapeError(f"P.Slice: axis {axis}: begin {b} must be >= 0 and size {s} >= -1")
            e = n if s == -1 else b + s
            if e > n or b > n:
                raise ShapeError(f"P.Slice: axis {axis}: begin {b} + size {s} is past its length {n} (x {shape})")
            end.append(e)
        return _Strided(begin=begin, end=tuple(end), strides=(1,) * len(shape))(x)


class _Strided(Primitive):
    """The op table's Slice(x) {begin, end, strides}."""
    op = "Slice"


def _ints(name: str, value) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise PrimitiveCallError(f"P.Slice: {name} must be a tuple of ints, got {value!r}")
    return tuple(value)
