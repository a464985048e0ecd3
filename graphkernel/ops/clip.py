"""Clipping, MindSpore's, written with primitives (it traces, fuses and runs eagerly like any op):

    ops.clip_by_global_norm(x, clip_norm=1.0, use_norm=None)
        every tensor of x scaled by clip_norm / max(global_norm, clip_norm), global_norm = sqrt(sum of every
        tensor's sum of squares) (or `use_norm` when given), so the whole set's norm is at most clip_norm
    ops.clip_by_value(x, clip_value_min=None, clip_value_max=None)
        min(max(x, clip_value_min), clip_value_max), for a tensor or a tuple/list of them
    ops.clip_by_norm(x, max_norm, norm_type=2.0) / nn.ClipByNorm()(x, clip_norm)
        x * clip_norm / max(l2 norm of x, clip_norm), computed in float32, returned in x's dtype
"""
from __future__ import annotations

import numpy as np

from ir.errors import GraphKernelError
from graphkernel.ops import operations as P
from graphkernel.tensor import Tensor, TensorOps


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


def clip_by_value(x, clip_value_min=None, clip_value_max=None):
    if isinstance(x, (tuple, list)):
        return type(x)(clip_by_value(t, clip_value_min, clip_value_max) for t in x)
    if clip_value_min is None and clip_value_max is None:
        raise ClipError("clip_by_value: clip_value_min and clip_value_max cannot both be None")
    if clip_value_min is not None:
        x = P.Maximum()(x, clip_value_min)
    if clip_value_max is not None:
        x = P.Minimum()(x, clip_value_max)
    return x


def clip_by_norm(x, max_norm, norm_type=2.0):
    """x scaled so that its l2 norm is at most max_norm (a number or a one-element tensor)."""
    if isinstance(x, (tuple, list)):
        return type(x)(clip_by_norm(t, max_norm, norm_type) for t in x)
    if norm_type != 2.0:
        raise ClipError(f"clip_by_norm: only norm_type 2.0 is supported, got {norm_type!r}")
    if not x.dtype.is_float:
        raise ClipError(f"clip_by_norm: x must be a float tensor, got {x.dtype}")
    x32 = P.Cast()(x, "float32")
    norm = P.Sqrt()(P.ReduceSum()(x32 * x32, ()))
    limit = max_norm if isinstance(max_norm, TensorOps) else Tensor(np.float32(max_norm))
    limit = P.Reshape()(P.Cast()(limit, "float32"), ())
    return P.Cast()(x32 * limit / P.Maximum()(norm, limit), x.dtype)
