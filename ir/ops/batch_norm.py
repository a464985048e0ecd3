"""Batch normalization as MindSpore's BatchNorm and BatchNormGrad have it, composite ops (an expander each,
graphkernel/expanders/), expanded by default into reductions and elementwise ops that fuse with the
convolution's ReLU and residual Add around them, as MindSpore's graph-kernel expanders do (measured on
[8, 64, 28, 28], BatchNorm + Add + ReLU in training on a loaded machine: forward 0.7 ms expanded and fused
against 16 ms as one op of its own; forward and backward 0.9 ms against 77 ms).
`--disable_expand_ops=BatchNorm` (or BatchNormGrad) keeps one as an op of its own, on the numpy reference.

    BatchNorm(x, scale, bias, mean, variance) {is_training=False, epsilon=1e-5, momentum=0.1, data_format}
        -> (y, batch_mean, batch_variance, reserve_space_1, reserve_space_2)
        x of rank >= 2, the channel axis 1 (NCHW) or the last (NHWC); scale, bias, mean, variance [C].
        training:   m, v = the mean and the (biased) variance of x over every axis but the channel's;
                    y = (x - m) / sqrt(v + epsilon) * scale + bias;
                    batch_mean = m, batch_variance = v * n / (n - 1) (unbiased: what the moving variance
                    takes in; n the count per channel), reserve_space_1 = m, reserve_space_2 = v
        inference:  y from the given mean and variance; the other four results are mean, variance,
                    mean, variance
    The moving statistics' update, (1 - momentum) * old + momentum * batch (batch_mean, batch_variance), is
    the caller's: P.BatchNorm writes it into the mean and variance Parameters (graphkernel/ops/batch_norm.py).

    BatchNormGrad(dy, x, scale, saved_mean, saved_variance, reserve) {is_training, epsilon, data_format}
        -> (dx, dscale, dbias), saved_* the forward's reserve spaces in training, the moving statistics in
        inference; `reserve` is not read (MindSpore's CPU kernel does not read it either).

float16 x is computed in float32 and rounded once; the per-channel values take scale's dtype.
"""
from __future__ import annotations

import math

import numpy as np

from ir.errors import ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_bool, is_float, is_str, require, same_dtype
from ir.ops.composite import bias_axis, composite
from ir.ops.registry import Api, Attr, Precision


def _epsilon(v) -> float:
    v = is_float(v)
    if not 0 < v <= 1:
        raise ValueError(f"must be in (0, 1], got {v}")
    return v


def _momentum(v) -> float:
    v = is_float(v)
    if not 0 <= v <= 1:
        raise ValueError(f"must be in [0, 1], got {v}")
    return v


_FORMAT = Attr("data_format", "NCHW", is_str("NCHW", "NHWC"))
ATTRS = (Attr("is_training", False, is_bool), Attr("epsilon", 1e-5, _epsilon), Attr("momentum", 0.1, _momentum),
         _FORMAT)
GRAD_ATTRS = (Attr("is_training", False, is_bool), Attr("epsilon", 1e-5, _epsilon), _FORMAT)


def channel_axis(rank: int, data_format: str) -> int:
    return bias_axis(rank, data_format)


def reduced_axes(rank: int, data_format: str) -> tuple[int, ...]:
    """Every axis but the channel's: the axes a batch statistic reduces."""
    axis = channel_axis(rank, data_format)
    return tuple(a for a in range(rank) if a != axis)


def per_channel(rank: int, data_format: str, channels: int) -> tuple[int, ...]:
    """The shape a [C] vector takes to broadcast along x's channel axis."""
    axis = channel_axis(rank, data_format)
    return tuple(channels if a == axis else 1 for a in range(rank))


def _check(x: TensorType, params, names, data_format: str) -> int:
    require(x.dtype, "float")
    if x.rank < 2:
        raise ShapeError(f"x {fmt(x.shape)} must have rank >= 2 (N, C, ...)")
    c = x.shape[channel_axis(x.rank, data_format)]
    dtype = same_dtype(params)
    require(dtype, "float")
    for name, t in zip(names, params):
        if t.shape != (c,):
            raise ShapeError(f"{name} {fmt(t.shape)} must be [C] = ({c},), x's channels ({data_format} "
                             f"{fmt(x.shape)})")
    return c


def _batch_norm_infer(types, attrs):
    x, *params = types
    _check(x, params, ("scale", "bias", "mean", "variance"), attrs["data_format"])
    return (x,) + (params[0],) * 4


def _wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _channel(v: np.ndarray, x: np.ndarray, attrs) -> np.ndarray:
    return v.astype(x.dtype).reshape(per_channel(x.ndim, attrs["data_format"], v.size))


def count_per_channel(shape, data_format: str) -> int:
    return math.prod(shape[a] for a in reduced_axes(len(shape), data_format))   # a symbolic size stays one


def _batch_norm(a, attrs):
    x, scale, bias, mean, variance = a
    w = _wide(x)
    axes = reduced_axes(x.ndim, attrs["data_format"])
    if attrs["is_training"]:
        m = np.mean(w, axis=axes)
        centered = w - _channel(m, w, attrs)
        v = np.mean(centered * centered, axis=axes)
        n = count_per_channel(x.shape, attrs["data_format"])
        stats = (m, v * (n / max(n - 1, 1)), m, v)
    else:
        m, v = mean, variance
        centered = w - _channel(m, w, attrs)
        stats = (mean, variance, mean, variance)
    rstd = 1 / np.sqrt(_channel(v, w, attrs) + w.dtype.type(attrs["epsilon"]))
    y = centered * rstd * _channel(scale, w, attrs) + _channel(bias, w, attrs)
    return (y.astype(x.dtype),) + tuple(np.asarray(s).astype(scale.dtype) for s in stats)


def _batch_norm_grad_rule(b, node, douts):
    """dy through BatchNormGrad. Training: a cotangent of a batch statistic adds its own term (the mean's
    d/dx_i = 1/n, the variance's 2 (x_i - m) / n, times n / (n - 1) for the unbiased one); the moving
    statistics given as inputs do not reach y. Inference: the four statistics are the inputs passed
    through, and y's derivative in mean and variance is given too (MindSpore's bprop gives them none)."""
    x, scale, bias, mean, variance = node.inputs
    y, batch_mean, batch_var, saved_mean, saved_var = node.outputs
    dy, dbm, dbv, dsm, dsv = douts
    fmt_, eps, training = node.attr("data_format"), node.attr("epsilon"), node.attr("is_training")
    shape = per_channel(x.type.rank, fmt_, scale.shape[0])
    dx = dscale = dbias = dmean = dvar = None
    if dy is not None:
        dx, dscale, dbias = b.ops("BatchNormGrad", dy, x, scale, saved_mean, saved_var, saved_var,
                                  is_training=training, epsilon=eps, data_format=fmt_)
    if training:
        n = count_per_channel(x.shape, fmt_)
        wx = b.wide(x)[0]

        def spread(d, factor):       # a [C] cotangent, times factor, along x's channel axis
            d = b.cast(d, wx.dtype)
            return b.op("Mul", b.op("Reshape", d, shape=shape), b.scalar(factor, wx))

        terms = []
        for d, unbiased in ((dbv, True), (dsv, False)):
            if d is not None:
                centered = b.op("Sub", wx, b.op("Reshape", b.cast(saved_mean, wx.dtype), shape=shape))
                terms.append(b.op("Mul", centered, spread(d, 2 / n * (n / max(n - 1, 1) if unbiased else 1))))
        for d in (dbm, dsm):
            if d is not None:
                terms.append(b.op("BroadcastTo", spread(d, 1 / n), shape=x.shape))
        for t in terms:
            t = b.cast(t, x.dtype)
            dx = t if dx is None else b.op("Add", dx, t)
        return dx, dscale, dbias, None, None
    for d in (dbm, dsm):
        if d is not None:
            dmean = d if dmean is None else b.op("Add", dmean, d)
    for d in (dbv, dsv):
        if d is not None:
            dvar = d if dvar is None else b.op("Add", dvar, d)
    if dy is not None:
        # y = (x - mean) * rstd * scale + bias: d/dmean = -sum(dy) * rstd * scale = -dbias * rstd * scale,
        # d/dvariance = -0.5 * sum(dy * xhat) * scale / (variance + eps) = -0.5 * dscale * scale / (variance + eps)
        var_eps = b.op("Add", variance, b.scalar(eps, variance))
        rstd = b.op("Rsqrt", var_eps)
        through_mean = b.op("Neg", b.op("Mul", b.op("Mul", dbias, rstd), scale))
        through_var = b.op("Mul", b.scalar(-0.5, variance), b.op("RealDiv", b.op("Mul", dscale, scale), var_eps))
        dmean = through_mean if dmean is None else b.op("Add", dmean, through_mean)
        dvar = through_var if dvar is None else b.op("Add", dvar, through_var)
    return dx, dscale, dbias, dmean, dvar


composite("BatchNorm", 5, _batch_norm_infer, _batch_norm, ATTRS, grad=_batch_norm_grad_rule,
          cann=("BNTrainingReduce", "BNTrainingUpdate", "BNInfer"),
          precision=Precision("black", True, "a mean and a variance per channel lose precision in float16"),
          doc="(y, batch_mean, batch_variance, reserve_space_1, reserve_space_2); training normalizes by the "
              "batch's statistics, inference by the given mean and variance",
          api=Api(primitive=False, inputs=("x", "scale", "bias", "mean", "variance")))


# --- BatchNormGrad ------------------------------------------------------------------------------------

def _batch_norm_grad_infer(types, attrs):
    dy, x, *params = types
    if dy != x:
        raise ShapeError(f"dy {dy} must have x's type {x}")
    _check(x, params, ("scale", "saved_mean", "saved_variance", "reserve"), attrs["data_format"])
    return (x, params[0], params[0])


def batch_norm_grad(dy, x, scale, mean, variance, attrs):
    """(dx, dscale, dbias) in the arrays' own dtype (numpy)."""
    axes = reduced_axes(x.ndim, attrs["data_format"])
    rstd = 1 / np.sqrt(_channel(variance, x, attrs) + x.dtype.type(attrs["epsilon"]))
    xhat = (x - _channel(mean, x, attrs)) * rstd
    dbias = np.sum(dy, axis=axes)
    dscale = np.sum(dy * xhat, axis=axes)
    g = _channel(scale, x, attrs) * rstd
    if attrs["is_training"]:
        n = count_per_channel(x.shape, attrs["data_format"])
        dx = g * (dy - _channel(dbias, x, attrs) / n - xhat * _channel(dscale, x, attrs) / n)
    else:
        dx = g * dy
    return dx, dscale, dbias


def _batch_norm_grad(a, attrs):
    dy, x, scale, mean, variance, _ = a
    dx, dscale, dbias = batch_norm_grad(_wide(dy), _wide(x), scale, mean, variance, attrs)
    return dx.astype(x.dtype), dscale.astype(scale.dtype), dbias.astype(scale.dtype)


composite("BatchNormGrad", 6, _batch_norm_grad_infer, _batch_norm_grad, GRAD_ATTRS,
          cann=("BNTrainingReduceGrad", "BNTrainingUpdateGrad", "BNInferGrad"),
          api=Api(primitive=False, inputs=("dy", "x", "scale", "saved_mean", "saved_variance", "reserve")),
          precision=Precision("black", True, "sums per channel; its expansion stays float32"),
          doc="BatchNorm's gradients (dx, dscale, dbias) from dy, x, scale and the saved mean and variance")

__all__ = ["batch_norm_grad", "channel_axis", "count_per_channel", "per_channel", "reduced_axes"]
