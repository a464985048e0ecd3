"""Composite gradient ops: the gradients of the composite ops, as MindSpore spells them (its `_grad_ops`,
same inputs, attributes and results), each a numpy reference here and an expander into primitives
(graphkernel/expanders/), so a backward fuses like any composite. And UnsortedSegmentSum, the scatter-add
that Gather's gradient is.

    LayerNormGrad(x, dy, variance, mean, gamma) -> (dx, dgamma, dbeta)   {begin_norm_axis, begin_params_axis,
                                                                          epsilon}
    SoftmaxGrad(y, dy) {axis}        y * (dy - sum(y * dy, axis))
    LogSoftmaxGrad(y, dy) {axis}     dy - exp(y) * sum(dy, axis)                 (y: LogSoftmax's result)
    GeLUGrad(dy, x, y)               dy * GeLU'(x), tanh form                   (y: GeLU's result, unused)
    SigmoidGrad(y, dy)               dy * y * (1 - y)
    ReluGrad(dy, x)                  dy where x > 0, else 0
    BiasAddGrad(dout) {data_format}  dout summed over every axis but the channel axis
    UnsortedSegmentSum(x, segment_ids, num_segments)
                                     out[s] = sum of x[i] over the i with segment_ids[i] == s; ids outside
                                     [0, num_segments) are dropped (MindSpore's rule)

float16 inputs are computed in float32 and rounded once, as the forward ops' expansions do.
"""
from __future__ import annotations

import numpy as np

from ir.errors import ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_float, is_int, is_int_tuple, is_str, require, same_dtype
from ir.ops.composite import GELU_COEF, SQRT_2_OVER_PI, _softmax_canon, bias_axis
from ir.ops.registry import Api, Attr, Form, OpDef, Pattern, Precision, register

GRAD_API = Api(primitive=False)   # MindSpore's scripts reach them through ops.operations._grad_ops


def _wide(*arrays):
    """The arrays in float32 when they are float16 (computed wide, rounded once at the end)."""
    return [a.astype(np.float32) if a.dtype == np.float16 else a for a in arrays]


def _grad_op(name, arity, infer, reference, attrs=(), canonicalize=None, why="elementwise", casts=(),
             result_casts=(), **facts):
    """A gradient primitive's row; `casts` and `result_casts` are MindSpore 2.10's conversion of mixed
    float widths (Api.casts: each float input to the dtype of the input named, results back)."""
    facts.setdefault("precision", Precision("gray", True, why))
    api = Api(primitive=False, casts=casts, result_casts=result_casts)
    register(OpDef(name, Pattern.OPAQUE, arity, infer, reference, attrs, canonicalize, expandable=True,
                   api=api, **facts))


def _like(index: int, allowed: str = "float"):
    """Inference: the inputs share a dtype (a float one, or `allowed`) and a shape; the result is input
    `index`'s type."""
    def infer(types, attrs):
        dtype = same_dtype(types)
        require(dtype, allowed)
        if any(t.shape != types[0].shape for t in types):
            raise ShapeError(f"inputs must have one shape, got {', '.join(fmt(t.shape) for t in types)}")
        return (types[index],)
    return infer


# --- softmax, log-softmax -----------------------------------------------------------------------

def _softmax_grad(a, attrs):
    y, dy = _wide(*a)
    ax = attrs["axis"]
    return (y * (dy - np.sum(y * dy, axis=ax, keepdims=True))).astype(a[0].dtype)


def _log_softmax_grad(a, attrs):
    y, dy = _wide(*a)
    ax = attrs["axis"]
    with np.errstate(over="ignore"):
        return (dy - np.exp(y) * np.sum(dy, axis=ax, keepdims=True)).astype(a[0].dtype)


_grad_op("SoftmaxGrad", 2, _like(1), _softmax_grad, (Attr("axis", (-1,), is_int_tuple),), _softmax_canon,
         casts=(None, 0), precision=Precision("black", True, "a sum over the row; its expansion stays float32"),
         doc="Softmax's gradient from its result y and the result's cotangent dy")
_grad_op("LogSoftmaxGrad", 2, _like(1), _log_softmax_grad, (Attr("axis", (-1,), is_int_tuple),),
         _softmax_canon, casts=(None, 0), precision=Precision("black", True, "exp and a sum over the row"),
         doc="LogSoftmax's gradient from its result y and the result's cotangent dy")


# --- elementwise activations --------------------------------------------------------------------

def gelu_derivative(x: np.ndarray) -> np.ndarray:
    """d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)."""
    t = np.tanh(SQRT_2_OVER_PI * (x + GELU_COEF * x * x * x))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * GELU_COEF * x * x)


def _gelu_grad(a, attrs):
    dy, x, _ = _wide(*a)
    with np.errstate(over="ignore", invalid="ignore"):
        return (dy * gelu_derivative(x)).astype(a[0].dtype)


def _sigmoid_grad(a, attrs):
    y, dy = _wide(*a)
    return (dy * y * (1 - y)).astype(a[0].dtype)


def _relu_grad(a, attrs):
    dy, x = a
    return np.where(x > 0, dy, np.zeros((), dy.dtype))


_grad_op("GeLUGrad", 3, _like(0), _gelu_grad, why="bounded by its inputs", casts=(None, 0, 0),
         doc="GeLU's gradient (tanh form) from the cotangent dy, GeLU's input x and its result y")
_grad_op("SigmoidGrad", 2, _like(0), _sigmoid_grad, casts=(None, 0), doc="Sigmoid's gradient from its result y and dy")
def _relu_grad_grad(b, node, douts):
    """ReluGrad is linear in dy (a mask by x > 0); in x its derivative is 0 almost everywhere."""
    return b.op("ReluGrad", douts[0], node.inputs[1]), None


_grad_op("ReluGrad", 2, _like(0, "any"), _relu_grad, why="elementwise, exact", grad=_relu_grad_grad,
         casts=(None, 0), domain="any", doc="ReLU's gradient: dy where x > 0, else 0 (any dtype, bool too, as "
                                            "MindSpore 2.10)")


# --- BiasAdd ----------------------------------------------------------------------------------------

def _bias_add_grad_infer(types, attrs):
    (d,) = types
    require(d.dtype, "numeric")
    if d.rank < 2:
        raise ShapeError(f"needs a cotangent of rank >= 2, got {fmt(d.shape)}")
    return (TensorType((d.shape[bias_axis(d.rank, attrs["data_format"])],), d.dtype),)


def _bias_add_grad(a, attrs):
    (d,) = a
    axis = bias_axis(d.ndim, attrs["data_format"])
    acc = np.float32 if d.dtype == np.float16 else d.dtype
    return np.sum(d, axis=tuple(i for i in range(d.ndim) if i != axis), dtype=acc).astype(d.dtype)


_grad_op("BiasAddGrad", 1, _bias_add_grad_infer, _bias_add_grad,
         (Attr("data_format", "NCHW", is_str("NCHW", "NHWC")),), why="a sum over every axis but the channel",
         doc="BiasAdd's bias gradient: the cotangent summed over every axis but the channel axis")


# --- LayerNorm --------------------------------------------------------------------------------------

def _layer_norm_grad_canon(types, attrs):
    rank = types[0].rank
    out = dict(attrs)
    for key in ("begin_norm_axis", "begin_params_axis"):
        if not -rank <= attrs[key] < rank:
            raise ShapeError(f"{key}={attrs[key]} out of range for rank {rank}")
        out[key] = attrs[key] % rank
    return out


def _layer_norm_grad_infer(types, attrs):
    x, dy, variance, mean, gamma = types
    same_dtype(types)
    require(x.dtype, "float")
    b, p = attrs["begin_norm_axis"], attrs["begin_params_axis"]
    stat = x.shape[:b] + (1,) * (x.rank - b)
    for label, t, want in (("dy", dy, x.shape), ("variance", variance, stat), ("mean", mean, stat),
                           ("gamma", gamma, x.shape[p:])):
        if t.shape != want:
            raise ShapeError(f"{label} {fmt(t.shape)} must have shape {fmt(want)} (x {fmt(x.shape)}, "
                             f"begin_norm_axis {b}, begin_params_axis {p})")
    return (x, gamma, gamma)


def layer_norm_grad(x, dy, variance, mean, gamma, attrs):
    """(dx, dgamma, dbeta) in the arrays' dtype (numpy)."""
    b, p = attrs["begin_norm_axis"], attrs["begin_params_axis"]
    norm = tuple(range(b, x.ndim))
    lead = tuple(range(p))
    rstd = 1 / np.sqrt(variance + np.asarray(attrs["epsilon"], x.dtype))
    xhat = (x - mean) * rstd
    g = dy * gamma
    dx = rstd * (g - np.mean(g, axis=norm, keepdims=True) - xhat * np.mean(g * xhat, axis=norm, keepdims=True))
    return dx, np.sum(dy * xhat, axis=lead), np.sum(dy, axis=lead)


def _layer_norm_grad(a, attrs):
    dtype = a[0].dtype
    return tuple(r.astype(dtype) for r in layer_norm_grad(*_wide(*a), attrs))


_grad_op("LayerNormGrad", 5, _layer_norm_grad_infer, _layer_norm_grad,
         (Attr("begin_norm_axis", 1, is_int), Attr("begin_params_axis", 1, is_int),
          Attr("epsilon", 1e-12, is_float)), _layer_norm_grad_canon, casts=(None, 0, 0, 0, 0),
         result_casts=(None, 4, 4),
         precision=Precision("black", True, "sums over rows and columns; its expansion stays float32"),
         doc="LayerNorm's gradients (dx, dgamma, dbeta) from x, the cotangent dy, the forward's variance and "
             "mean, and gamma")


# --- UnsortedSegmentSum -----------------------------------------------------------------------------

def _segment_infer(types, attrs):
    x, ids = types
    if not ids.dtype.is_int:
        raise ShapeError(f"segment_ids must be int32 or int64, got {ids.dtype}")
    require(x.dtype, "numeric")
    if x.shape[:ids.rank] != ids.shape:
        raise ShapeError(f"segment_ids {fmt(ids.shape)} must be the leading dims of x {fmt(x.shape)}")
    if attrs["num_segments"] < 0:
        raise ShapeError(f"num_segments must be >= 0, got {attrs['num_segments']}")
    return (TensorType((attrs["num_segments"],) + x.shape[ids.rank:], x.dtype),)


def unsorted_segment_sum(x: np.ndarray, ids: np.ndarray, n: int) -> np.ndarray:
    rows = x.reshape((ids.size,) + x.shape[ids.ndim:])
    flat = ids.reshape(-1).astype(np.int64)
    keep = (flat >= 0) & (flat < n)
    acc = np.float32 if x.dtype == np.float16 else x.dtype
    out = np.zeros((n,) + x.shape[ids.ndim:], acc)
    np.add.at(out, flat[keep], rows[keep].astype(acc))
    return out.astype(x.dtype)


def _segment_sum_grad(b, node, douts):
    """Each x[i] receives its segment's cotangent: a Gather by the ids, 0 where an id was dropped."""
    (x, ids), (d,) = node.inputs, douts
    n = node.attr("num_segments")
    valid = b.op("LogicalAnd", b.op("LogicalNot", b.op("Less", ids, b.scalar(0, ids))),
                 b.op("Less", ids, b.scalar(n, ids)))
    gathered = b.op("Gather", d, b.op("Select", valid, ids, b.scalar(0, ids)), axis=0) if n else b.fill(0, x.type)
    valid = b.op("Reshape", valid, shape=ids.shape + (1,) * (x.type.rank - ids.type.rank))
    return b.op("Select", valid, gathered, b.scalar(0, x)), None


register(OpDef("UnsortedSegmentSum", Pattern.OPAQUE, 2, _segment_infer,
               lambda a, attrs: unsorted_segment_sum(a[0], a[1], attrs["num_segments"]),
               (Attr("num_segments", check=is_int),), domain="any", cann=("UnsortedSegmentSumD",),
               grad=_segment_sum_grad,
               doc="out[s] = sum of x[i] with segment_ids[i] == s; ids outside [0, num_segments) are dropped",
               precision=Precision("gray", True, "a sum: float16 accumulates in float32"),
               api=Api(call_attrs=("num_segments",), functional="unsorted_segment_sum",
                       inputs=("x", "segment_ids"),
                       forms=(Form("ops", "unsorted_segment_sum", ("input_x", "segment_ids", "num_segments")),))))

__all__ = ["gelu_derivative", "layer_norm_grad", "unsorted_segment_sum"]
