"""MindSpore's explicit gradient primitives of elementwise ops (its `_grad_ops`, same inputs, attributes and
results), each a numpy reference here and an expander into primitives (graphkernel/expanders/), so a
script that calls them directly fuses like the autodiff's backward.

    TanhGrad(y, dy)                          dy * (1 - y * y)           (y: Tanh's result)
    SqrtGrad(y, dy)                          dy / (2 * y)               (y: Sqrt's result)
    SigmoidCrossEntropyWithLogitsGrad(x, label, dout)
                                             (sigmoid(x) - label) * dout
    DropoutGrad(dy, mask) {keep_prob}        dy * mask / keep_prob      (mask: Dropout's x-shaped 0/1 mask)
    MaximumGrad(x1, x2, grads) {grad_x, grad_y} -> (dx1, dx2)
                                             grads to x1 where x1 >= x2, the rest to x2, each summed down
                                             to its input's shape (numpy broadcasting); a result not asked
                                             for (grad_x/grad_y False) is zeros
    MinimumGrad(x1, x2, grads) {grad_x, grad_y}
                                             the same with x1 <= x2

Ties go to x1, as the autodiff's rule for Maximum/Minimum and MindSpore's Ascend expander do (MindSpore
2.10's CPU kernel splits a tie half and half). float16 inputs are computed in float32 and rounded once.
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.errors import DTypeError, ShapeError
from ir.ops.checks import broadcast, fmt, is_bool, require, same_dtype
from ir.ops.grad_ops import _grad_op, _like, _wide
from ir.ops.registry import Attr, Precision


def _tanh_grad(a, attrs):
    y, dy = _wide(*a)
    return (dy * (1 - y * y)).astype(a[0].dtype)


def _sqrt_grad(a, attrs):
    y, dy = _wide(*a)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (dy / (2 * y)).astype(a[0].dtype)


def _sigmoid_ce_grad(a, attrs):
    x, label, dout = _wide(*a)
    with np.errstate(over="ignore"):
        return ((1 / (1 + np.exp(-x)) - label) * dout).astype(a[0].dtype)


def _check_keep_prob(v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
        raise ValueError("keep_prob must be a number in (0, 1]")
    return float(v)


def _dropout_grad(a, attrs):
    dy, mask = _wide(*a)
    return (dy * mask * np.float32(1 / attrs["keep_prob"]).astype(dy.dtype)).astype(a[0].dtype)


_grad_op("TanhGrad", 2, _like(0), _tanh_grad, casts=(None, 0), doc="Tanh's gradient from its result y and the cotangent dy")
_grad_op("SqrtGrad", 2, _like(0), _sqrt_grad, casts=(None, 0), precision=Precision("gray", True, "a divide"),
         doc="Sqrt's gradient from its result y and the cotangent dy")
_grad_op("SigmoidCrossEntropyWithLogitsGrad", 3, _like(0), _sigmoid_ce_grad,
         doc="SigmoidCrossEntropyWithLogits' gradient in the logits x, from x, the labels and the cotangent")
_grad_op("DropoutGrad", 2, _like(0), _dropout_grad, (Attr("keep_prob", 0.5, _check_keep_prob),), casts=(None, 0),
         doc="Dropout's gradient: dy * mask / keep_prob, mask x-shaped (1 kept, 0 dropped)")


def _extremum_grad_infer(types, attrs):
    x1, x2, grads = types
    dtype = same_dtype(types)
    if not (dtype.is_float or dtype in (DType.int32, DType.int64)):   # as MindSpore 2.10
        raise DTypeError(f"dtype {dtype} not supported (needs a float dtype, int32 or int64)")
    if broadcast(x1.shape, x2.shape) != grads.shape:
        raise ShapeError(f"grads {fmt(grads.shape)} must have the broadcast shape of x1 {fmt(x1.shape)} and x2 "
                         f"{fmt(x2.shape)}")
    return (x1, x2)


def _sum_to(x: np.ndarray, shape) -> np.ndarray:
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    return np.sum(x, axis=axes, keepdims=False).reshape(shape) if axes else x.reshape(shape)


def _extremum_grad(first_wins):
    def reference(a, attrs):
        x1, x2, grads = _wide(*a)
        zero = np.zeros((), grads.dtype)
        dx1 = np.where(first_wins(x1, x2), grads, zero)
        outs = (_sum_to(dx1, x1.shape) if attrs["grad_x"] else np.zeros(x1.shape, grads.dtype),
                _sum_to(grads - dx1, x2.shape) if attrs["grad_y"] else np.zeros(x2.shape, grads.dtype))
        return tuple(o.astype(a[0].dtype) for o in outs)
    return reference


_EXTREMUM_ATTRS = (Attr("grad_x", True, is_bool), Attr("grad_y", True, is_bool))
_grad_op("MaximumGrad", 3, _extremum_grad_infer, _extremum_grad(np.greater_equal), _EXTREMUM_ATTRS,
         casts=(None, 0, 0), result_casts=(None, 1),
         precision=Precision("gray", True, "a select and a sum down to the inputs' shapes"),
         doc="Maximum's gradients (dx1, dx2) from x1, x2 and the cotangent grads; ties go to x1")
_grad_op("MinimumGrad", 3, _extremum_grad_infer, _extremum_grad(np.less_equal), _EXTREMUM_ATTRS,
         casts=(None, None, 0),
         precision=Precision("gray", True, "a select and a sum down to the inputs' shapes"),
         doc="Minimum's gradients (dx1, dx2) from x1, x2 and the cotangent grads; ties go to x1")
