"""`ops.clip_by_global_norm(x, clip_norm=1.0, use_norm=None)`, MindSpore's: every tensor of x scaled by
clip_norm / max(global_norm, clip_norm), global_norm = sqrt(sum of every tensor's sum of squares) (or
`use_norm` when given), so the whole set's norm is at most clip_norm. Written with primitives: it
traces, fuses and runs eagerly like any op."""
from __future__ import annotations

from ir.errors import GraphKernelError
from graphkernel.ops import operations as P


class ClipError(GraphKernelError, ValueError):
    """clip_by_global_norm called with something other than a tuple of float tensors."""


def global_norm(x):
    """sqrt of the sum of squares of every tensor of x (a float32 scalar)."""
    total = None
    for t in x:
        square = P.ReduceSum()(P.Cast()(t, "float32") ** 2.0, ())
        total = square if total is None else total + square
    return P.Sqrt()(total)


def clip_by_global_norm(x, clip_norm=1.0, use_norm=None):
    if not isinstance(x, (tuple, list)) or not x:
        raise ClipError(f"clip_by_global_norm: x must be a non-empty tuple or list of tensors, got {type(x).__name__}")
    if not all(t.dtype.is_float for t in x):
        raise ClipError("clip_by_global_norm: every tensor of x must be a float tensor")
    if not clip_norm > 0:
        raise ClipError(f"clip_by_global_norm: clip_norm must be > 0, got {clip_norm}")
    norm = global_norm(x) if use_norm is None else P.Cast()(use_norm, "float32")
    scale = P.Reciprocal()(P.Maximum()(norm, float(clip_norm))) * float(clip_norm)
    return tuple(t * P.Cast()(scale, t.dtype) for t in x)
