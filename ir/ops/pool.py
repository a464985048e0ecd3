"""Pooling, as MindSpore 2.10 has it (NCHW), and the shape ops convolutional networks use around it.

    MaxPool(x) {kernel_size=1, strides=1, pad_mode="valid", data_format="NCHW"}
        the largest element of each window; "same" pads with -inf (the odd pixel at the bottom and right)
    AvgPool(x) {kernel_size=1, strides=1, pad_mode="valid", data_format="NCHW"}
        the mean of each window over the pixels inside x: "same"'s padding is not counted (MindSpore 2.10's
        CPU: a 2x2/2 window over the last column of a 5x5 input averages its 2 real pixels)
    MaxPoolGrad(x, out, dout)    dx: each window's dout goes to the first (row-major) maximum of its window
    AvgPoolGrad(x, out, dout)    dx: each window's dout spread evenly over the pixels it averaged
    AdaptiveAvgPool2D(x) {output_size}   output_size an int or (oh, ow), None keeping that size; bin i of
        an axis of n pixels averages [floor(i n / o), ceil((i + 1) n / o))
    Flatten(x)                   [N, ...] -> [N, prod(...)]
    Pad(x) {paddings}            zeros around x: paddings ((before, after), ...) one pair per axis, >= 0

kernel_size and strides are an int, (h, w) or (1, 1, h, w), positive. Windows always lie inside the
(padded) input: a "valid" window that would hang over the edge is not computed (output floor((H - k) / s) + 1).
float16 means accumulate in float32 and round once.
"""
from __future__ import annotations

import math

import numpy as np

from ir.errors import ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_int_tuple, require, same_dtype
from ir.ops.composite import composite
from ir.ops.conv import nchw, out_hw, padded, pads, pair, pool_pad_mode, windows
from ir.ops.registry import Api, Attr, Cost, OpDef, Pattern, Precision, register

POOL_ATTRS = (Attr("kernel_size", (1, 1), pair("kernel_size", lengths=(1, 2, 4))),
              Attr("strides", (1, 1), pair("strides", lengths=(1, 2, 4))),
              Attr("pad_mode", "valid", pool_pad_mode), Attr("data_format", "NCHW", nchw))


def window_attrs(attrs: dict) -> dict:
    """The pooling attributes in the names the convolution geometry reads (ir/ops/conv.py)."""
    return {"kernel_size": attrs["kernel_size"], "stride": attrs["strides"], "pad_mode": attrs["pad_mode"],
            "dilation": (1, 1)}


def pool_shape(x: tuple, attrs: dict) -> tuple[int, int, int, int]:
    if len(x) != 4:
        raise ShapeError(f"x {fmt(x)} must have rank 4 (NCHW)")
    oh, ow = out_hw(window_attrs(attrs), x[2], x[3])
    if oh < 1 or ow < 1:
        raise ShapeError(f"x {fmt(x)} is smaller than the {attrs['kernel_size']} window: no output")
    return (x[0], x[1], oh, ow)


def _pool_infer(types, attrs):
    (x,) = types
    require(x.dtype, "float")
    return (TensorType(pool_shape(x.shape, attrs), x.dtype),)


def _wide(a):
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _windows(x: np.ndarray, attrs: dict, fill) -> np.ndarray:
    w = window_attrs(attrs)
    oh, ow = pool_shape(x.shape, attrs)[2:]
    return windows(padded(x, pads(w, *x.shape[2:]), fill), oh, ow, w["kernel_size"], w["stride"], (1, 1))


def counts(shape: tuple, attrs: dict) -> np.ndarray:
    """[oh, ow]: how many pixels of x each window covers (AvgPool divides by it)."""
    inside = np.ones((1, 1) + tuple(shape[2:]), np.float32)
    return _windows(inside, attrs, 0).sum(axis=(4, 5))[0, 0]


def max_pool(x: np.ndarray, attrs: dict) -> np.ndarray:
    return _windows(x, attrs, -np.inf).max(axis=(4, 5))


def avg_pool(x: np.ndarray, attrs: dict) -> np.ndarray:
    w = _wide(x)
    return (_windows(w, attrs, 0).sum(axis=(4, 5)) / counts(x.shape, attrs).astype(w.dtype)).astype(x.dtype)


def _scatter_windows(shape: tuple, attrs: dict, per_tap) -> np.ndarray:
    """x's gradient [N, C, H, W] from per_tap(i, j) -> [N, C, oh, ow], what window tap (i, j) receives."""
    w = window_attrs(attrs)
    t, b, l, r = pads(w, *shape[2:])
    (kh, kw), (sh, sw) = w["kernel_size"], w["stride"]
    oh, ow = pool_shape(shape, attrs)[2:]
    grad = None
    for i in range(kh):
        for j in range(kw):
            part = per_tap(i, j)
            if grad is None:
                grad = np.zeros(shape[:2] + (shape[2] + t + b, shape[3] + l + r), part.dtype)
            grad[:, :, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw] += part
    return grad[:, :, t:t + shape[2], l:l + shape[3]]


def max_pool_grad(x: np.ndarray, dout: np.ndarray, attrs: dict) -> np.ndarray:
    cols = _windows(x, attrs, -np.inf)
    n, c, oh, ow, kh, kw = cols.shape
    first = np.argmax(cols.reshape(n, c, oh, ow, kh * kw), axis=-1)   # the first maximum, row-major
    d = _wide(dout)
    grad = _scatter_windows(x.shape, attrs, lambda i, j: np.where(first == i * kw + j, d, 0).astype(d.dtype))
    return grad.astype(x.dtype)


def avg_pool_grad(shape: tuple, dout: np.ndarray, attrs: dict) -> np.ndarray:
    d = _wide(dout)
    share = d / counts(shape, attrs).astype(d.dtype)
    return _scatter_windows(shape, attrs, lambda i, j: share).astype(dout.dtype)


def _pool_grad_infer(types, attrs):
    x, out, dout = types
    same_dtype(types)
    require(x.dtype, "float")
    want = pool_shape(x.shape, attrs)
    for name, t in (("out", out), ("dout", dout)):
        if t.shape != want:
            raise ShapeError(f"{name} {fmt(t.shape)} must be the pooled shape {fmt(want)} of x {fmt(x.shape)}")
    return (x,)


def _max_pool_grad_rule(b, node, douts):
    return (b.op("MaxPoolGrad", node.inputs[0], node.out, douts[0], **node.attr_dict),)


def _avg_pool_grad_rule(b, node, douts):
    return (b.op("AvgPoolGrad", node.inputs[0], node.out, douts[0], **node.attr_dict),)


def _avg_pool_grad_grad(b, node, douts):
    """AvgPoolGrad is AvgPool's transpose, linear in dout: dout's cotangent is AvgPool of g."""
    return None, None, b.op("AvgPool", douts[0], **node.attr_dict)


_POOL_API = Api(inputs=("x",))
_GRAD_API = Api(primitive=False, inputs=("x", "out", "dout"))
register(OpDef("MaxPool", Pattern.OPAQUE, 1, _pool_infer, lambda a, attrs: max_pool(a[0], attrs), POOL_ATTRS,
               grad=_max_pool_grad_rule, api=_POOL_API, cost=Cost.ARITH,
               precision=Precision("gray", True, "exact in any float dtype"),
               doc="the maximum of each kernel_size window, strides apart"))
register(OpDef("AvgPool", Pattern.OPAQUE, 1, _pool_infer, lambda a, attrs: avg_pool(a[0], attrs), POOL_ATTRS,
               grad=_avg_pool_grad_rule, api=_POOL_API,
               precision=Precision("gray", True, "a mean over a window: float16 accumulates in float32"),
               doc="the mean of each kernel_size window, strides apart; padding not counted"))
register(OpDef("MaxPoolGrad", Pattern.OPAQUE, 3, _pool_grad_infer,
               lambda a, attrs: max_pool_grad(a[0], a[2], attrs), POOL_ATTRS, api=_GRAD_API,
               precision=Precision("gray", True, "moves dout"),
               doc="MaxPool's gradient: each window's dout to the first maximum of its window"))
register(OpDef("AvgPoolGrad", Pattern.OPAQUE, 3, _pool_grad_infer,
               lambda a, attrs: avg_pool_grad(a[0].shape, a[2], attrs), POOL_ATTRS, api=_GRAD_API,
               grad=_avg_pool_grad_grad, precision=Precision("gray", True, "sums of shares"),
               doc="AvgPool's gradient: each window's dout spread evenly over the pixels it averaged"))


# --- AdaptiveAvgPool2D ---------------------------------------------------------------------------

def _output_size(v):
    if v is None or isinstance(v, int):
        v = (v, v)
    if not isinstance(v, (tuple, list)) or len(v) != 2:
        raise ValueError(f"must be an int or a pair of ints or None, got {v!r}")
    out = []
    for d in v:
        if d is None:
            out.append(None)
            continue
        (d,) = is_int_tuple(d)
        if d < 1:
            raise ValueError(f"every size must be >= 1 (or None), got {v!r}")
        out.append(d)
    return tuple(out)


def adaptive_size(x: tuple, attrs) -> tuple[int, int]:
    return tuple(n if o is None else o for n, o in zip(x[-2:], attrs["output_size"]))


def bins(n: int, o: int) -> np.ndarray:
    """[o, n]: row i averages the pixels of bin i of an axis of n pixels."""
    m = np.zeros((o, n))
    for i in range(o):
        start, end = (i * n) // o, -(-((i + 1) * n) // o)
        m[i, start:end] = 1.0 / (end - start)
    return m


def _adaptive_infer(types, attrs):
    (x,) = types
    require(x.dtype, "float")
    if x.rank not in (3, 4):
        raise ShapeError(f"x {fmt(x.shape)} must have rank 3 or 4 ([N,] C, H, W)")
    return (TensorType(x.shape[:-2] + adaptive_size(x.shape, attrs), x.dtype),)


def adaptive_avg_pool(x: np.ndarray, attrs) -> np.ndarray:
    oh, ow = adaptive_size(x.shape, attrs)
    w = _wide(x)
    mh, mw = bins(x.shape[-2], oh).astype(w.dtype), bins(x.shape[-1], ow).astype(w.dtype)
    return np.matmul(np.matmul(mh, w), mw.T).astype(x.dtype)


def _adaptive_grad(b, node, douts):
    """out = Mh x Mw^T per channel: dx = Mh^T dout Mw, as two batched products with constant bin matrices."""
    x = node.inputs[0]
    h, w = x.shape[-2:]
    oh, ow = node.out.shape[-2:]
    lead = math.prod(x.shape[:-2])   # a symbolic batch stays symbolic (ir/symbolic.py)
    d = b.op("Reshape", douts[0], shape=(lead, oh, ow))
    mh = b.const(bins(h, oh).T.reshape(1, h, oh).astype(x.dtype.np), x.dtype)
    mw = b.const(bins(w, ow).reshape(1, ow, w).astype(x.dtype.np), x.dtype)
    d = b.op("BatchMatMul", b.op("BatchMatMul", mh, d), mw)
    return (b.op("Reshape", d, shape=x.shape),)


composite("AdaptiveAvgPool2D", 1, _adaptive_infer, lambda a, attrs: adaptive_avg_pool(a[0], attrs),
          (Attr("output_size", check=_output_size),), grad=_adaptive_grad, api=Api(inputs=("x",)),
          why="a mean over bins: float16 accumulates in float32",
          doc="the mean over each of output_size bins of the last two axes")


# --- Flatten, Pad ---------------------------------------------------------------------------------

def _flatten_infer(types, attrs):
    (x,) = types
    if x.rank < 1:
        raise ShapeError("x must have rank >= 1 (N, ...)")
    return (TensorType((x.shape[0], math.prod(x.shape[1:])), x.dtype),)   # symbolic sizes stay so


composite("Flatten", 1, _flatten_infer, lambda a, attrs: a[0].reshape(a[0].shape[0], -1), domain="any",
          grad=lambda b, node, douts: (b.op("Reshape", douts[0], shape=node.inputs[0].shape),),
          api=Api(inputs=("input_x",)), why="moves data", doc="[N, ...] -> [N, prod(...)]")


def _paddings(v):
    if not isinstance(v, (tuple, list)):
        raise ValueError(f"must be a tuple of (before, after) pairs, one per axis, got {v!r}")
    out = []
    for p in v:
        pair_ = is_int_tuple(p)
        if len(pair_) != 2 or min(pair_) < 0:
            raise ValueError(f"every entry must be a (before, after) pair of ints >= 0, got {v!r}")
        out.append(pair_)
    return tuple(out)


def _pad_infer(types, attrs):
    (x,) = types
    p = attrs["paddings"]
    if len(p) != x.rank:
        raise ShapeError(f"paddings has {len(p)} pairs, x {fmt(x.shape)} has {x.rank} axes: one pair per axis")
    return (TensorType(tuple(d + a + b for d, (a, b) in zip(x.shape, p)), x.dtype),)


def _pad_grad(b, node, douts):
    x, p = node.inputs[0], node.attr("paddings")
    return (b.op("Slice", douts[0], begin=tuple(a for a, _ in p),
                 end=tuple(a + d for (a, _), d in zip(p, x.shape)), strides=(1,) * len(p)),)


register(OpDef("Pad", Pattern.OPAQUE, 1, _pad_infer, lambda a, attrs: np.pad(a[0], attrs["paddings"]),
               (Attr("paddings", check=_paddings),), grad=_pad_grad, domain="any", cann=("PadD",),
               precision=Precision("gray", True, "moves data"), api=Api(inputs=("x",)),
               doc="zeros around x, (before, after) per axis"))

__all__ = ["adaptive_avg_pool", "avg_pool", "avg_pool_grad", "bins", "counts", "max_pool", "max_pool_grad",
           "pool_shape", "window_attrs"]
