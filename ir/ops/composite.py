"""Composite ops: each has a numpy reference here and an expander (graphkernel/expanders/) that
rewrites it into primitives. Until expanded they are OPAQUE: a kernel of their own, never fused."""
from __future__ import annotations

import numpy as np

from ir.errors import ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_float, is_int, is_int_tuple, is_str, normalize_axes, require, same_dtype
from ir.ops.elementwise import maximum
from ir.ops.reduce import REDUCE_ATTRS, canonical_axes, reduce_infer, reduced_shape
from ir.ops.registry import Api, Attr, Form, OpDef, Pattern, Precision, register

GELU_COEF = 0.044715
SQRT_2_OVER_PI = 0.7978845608028654


def composite(name, arity, infer, reference, attrs=(), canonicalize=None, doc="", why="elementwise", **facts):
    """A composite op: expanded into primitives (graphkernel/expanders) before fusion."""
    facts.setdefault("precision", Precision("gray", True, why))
    register(OpDef(name, Pattern.OPAQUE, arity, infer, reference, attrs, canonicalize,
                   expandable=True, doc=doc, **facts))


# -- gradient rules (ir/autodiff.py): composite ops differentiate into composite gradient ops
# (ir/ops/grad_ops.py), which the expanders turn into primitives, so a backward fuses like a forward.

def _mean_grad(b, node, douts):
    x = node.inputs[0]
    count = 1
    for axis in node.attr("axis"):
        count *= x.shape[axis]
    kept = reduced_shape(x.shape, node.attr("axis"), True)
    d = b.op("RealDiv", douts[0], b.scalar(count, douts[0]))
    d = d if d.shape == kept else b.op("Reshape", d, shape=kept)
    return (d if kept == x.shape else b.op("BroadcastTo", d, shape=x.shape),)


def _square_grad(b, node, douts):
    x = node.inputs[0]
    return (b.op("Mul", douts[0], b.op("Mul", x, b.scalar(2, x))),)


def _sigmoid_grad(b, node, douts):
    return (b.op("SigmoidGrad", node.out, douts[0]),)


def _relu_grad(b, node, douts):
    return (b.op("ReluGrad", douts[0], node.inputs[0]),)


def _gelu_grad(b, node, douts):
    return (b.op("GeLUGrad", douts[0], node.inputs[0], node.out),)


def _bias_add_grad(b, node, douts):
    return douts[0], b.op("BiasAddGrad", douts[0], data_format=node.attr("data_format"))


def _softmax_grad(op):
    def grad(b, node, douts):
        return (b.op(op, node.out, douts[0], axis=node.attr("axis")),)
    return grad


def _layer_norm_grad(b, node, douts):
    """LayerNormGrad for the cotangent of y; a cotangent of the mean (d/dx_i = 1/n) or of the variance
    (d/dx_i = 2 (x_i - mean) / n) adds its own term."""
    (x, gamma, beta), (y, mean, variance) = node.inputs, node.outputs
    dy, dmean, dvar = douts
    bna, bpa = node.attr("begin_norm_axis"), node.attr("begin_params_axis")
    dx, dgamma, dbeta = b.ops("LayerNormGrad", x, dy if dy is not None else b.fill(0, y.type), variance, mean,
                              gamma, begin_norm_axis=bna, begin_params_axis=bpa, epsilon=node.attr("epsilon"))
    count = 1
    for axis in range(bna, x.type.rank):
        count *= x.shape[axis]
    if dmean is not None:
        dx = b.op("Add", dx, b.op("BroadcastTo", b.op("RealDiv", dmean, b.scalar(count, x)), shape=x.shape))
    if dvar is not None:
        spread = b.op("Mul", b.op("Sub", x, mean), b.op("RealDiv", dvar, b.scalar(count / 2, x)))
        dx = b.op("Add", dx, spread)
    return (dx, dgamma, dbeta) if dy is not None else (dx, None, None)


def _same_float(types, attrs):
    require(types[0].dtype, "float")
    return (types[0],)


def _c(x, v):
    return np.asarray(v, dtype=x.dtype)


def _mean(a, attrs):
    x = a[0]
    acc = np.float32 if x.dtype == np.float16 else x.dtype
    return np.mean(x, axis=attrs["axis"], keepdims=attrs["keep_dims"], dtype=acc).astype(x.dtype)


composite("ReduceMean", 1, lambda t, a: reduce_infer(t, a, "float"), _mean, REDUCE_ATTRS, canonical_axes,
          why="a float16 mean accumulates in float32 and rounds once", cann=("ReduceMeanD",), grad=_mean_grad,
          api=Api(call_attrs=("axis",), method="mean", method_args=("axis", "keep_dims"),
                  forms=(Form("ops", "mean", ("x", "axis", "keep_dims")),
                         Form("mint", "mean", ("input", "dim=axis", "keepdim=keep_dims")))))
composite("Square", 1, lambda t, a: (require(t[0].dtype, "numeric"), t[0])[1:], lambda a, _: a[0] * a[0],
          grad=_square_grad,
          api=Api(functional="square", method="square", forms=(Form("mint", "square", ("input",)),)))


def _sigmoid(a, attrs):
    x = a[0]
    with np.errstate(over="ignore"):
        return _c(x, 1) / (_c(x, 1) + np.exp(-x))


composite("Sigmoid", 1, _same_float, _sigmoid, why="bounded result", onnx=("Sigmoid",), grad=_sigmoid_grad,
          api=Api(functional="sigmoid", method="sigmoid", forms=(Form("mint", "sigmoid", ("input",)),
                                                                 Form("mint.nn.functional", "sigmoid", ("input",)))))
composite("ReLU", 1, lambda t, a: (require(t[0].dtype, "numeric"), t[0])[1:],
          lambda a, _: maximum(a[0], _c(a[0], 0)), why="elementwise, exact", cann=("Relu",), onnx=("Relu",),
          grad=_relu_grad,
          api=Api(functional="relu", method="relu", forms=(Form("mint.nn.functional", "relu", ("input",)),)))


def _gelu(a, attrs):
    x = a[0]
    inner = _c(x, SQRT_2_OVER_PI) * (x + _c(x, GELU_COEF) * (x * x * x))
    return _c(x, 0.5) * x * (_c(x, 1) + np.tanh(inner))


composite("GeLU", 1, _same_float, _gelu, doc="tanh form, as BERT", why="bounded by its input", cann=("Gelu",),
          grad=_gelu_grad, api=Api())   # ops.gelu's default is erf's GELU: graphkernel/ops/functional.py


def bias_axis(rank: int, data_format: str) -> int:
    return rank - 1 if data_format == "NHWC" or rank < 2 else 1


def _bias_add_infer(types, attrs):
    x, b = types
    same_dtype(types)
    require(x.dtype, "numeric")
    if x.rank < 2 or b.rank != 1:
        raise ShapeError(f"needs x of rank >= 2 and a 1-D bias, got {fmt(x.shape)} and {fmt(b.shape)}")
    axis = bias_axis(x.rank, attrs["data_format"])
    if x.shape[axis] != b.shape[0]:
        raise ShapeError(f"bias {fmt(b.shape)} does not match channel axis {axis} of {fmt(x.shape)}")
    return (x,)


def _bias_add(a, attrs):
    x, b = a
    axis = bias_axis(x.ndim, attrs["data_format"])
    return x + b.reshape((-1,) + (1,) * (x.ndim - 1 - axis))


composite("BiasAdd", 2, _bias_add_infer, _bias_add, (Attr("data_format", "NCHW", is_str("NCHW", "NHWC")),),
          doc="adds a 1-D bias along the channel axis (1 for NCHW, last for NHWC)", api=Api(inputs=("x", "bias")),
          grad=_bias_add_grad)


def _softmax_canon(types, attrs):
    """Canonical axes; an empty one is refused, as ReduceMax refuses it (the expansion takes the max)."""
    axes = normalize_axes(attrs["axis"], types[0].rank, empty_means_all=False)
    empty = [a for a in axes if types[0].shape[a] == 0]
    if empty:
        raise ShapeError(f"cannot normalize over axis {empty[0]} of {fmt(types[0].shape)}: it is empty")
    return {"axis": axes}


def _softmax(a, attrs):
    x = a[0]
    ax = attrs["axis"]
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=ax, keepdims=True))
        return e / np.sum(e, axis=ax, keepdims=True, dtype=np.float32 if x.dtype == np.float16 else x.dtype
                          ).astype(x.dtype)


def _log_softmax(a, attrs):
    x = a[0]
    ax = attrs["axis"]
    with np.errstate(all="ignore"):
        s = x - np.max(x, axis=ax, keepdims=True)
        return s - np.log(np.sum(np.exp(s), axis=ax, keepdims=True))


composite("Softmax", 1, _same_float, _softmax, (Attr("axis", (-1,), is_int_tuple),), _softmax_canon,
          cann=("SoftmaxV2",), grad=_softmax_grad("SoftmaxGrad"), api=Api(functional="softmax", forms=(
              Form("Tensor", "softmax", ("axis",)), Form("mint", "softmax", ("input", "dim=axis")),
              Form("mint.nn.functional", "softmax", ("input", "dim=axis")))), precision=Precision("black", True, "exp and a long sum; its expansion stays float32"))
composite("LogSoftmax", 1, _same_float, _log_softmax, (Attr("axis", (-1,), is_int_tuple),), _softmax_canon,
          cann=("LogSoftmaxV2",), grad=_softmax_grad("LogSoftmaxGrad"), api=Api(functional="log_softmax", forms=(
              Form("ops", "log_softmax", ("logits", "axis")), Form("mint.nn.functional", "log_softmax", ("input", "dim=axis")))),
          precision=Precision("black", True, "exp, log and a long sum; its expansion stays float32"))


def _layer_norm_canon(types, attrs):
    rank = types[0].rank
    out = dict(attrs)
    for key in ("begin_norm_axis", "begin_params_axis"):
        ax = attrs[key]
        if not -rank <= ax < rank:
            raise ShapeError(f"{key}={ax} out of range for rank {rank}")
        out[key] = ax % rank
    return out


def _layer_norm_infer(types, attrs):
    x, gamma, beta = types
    same_dtype(types)
    require(x.dtype, "float")
    params = x.shape[attrs["begin_params_axis"]:]
    for label, t in (("gamma", gamma), ("beta", beta)):
        if t.shape != params:
            raise ShapeError(f"{label} {fmt(t.shape)} must have shape {fmt(params)} "
                             f"(x.shape[begin_params_axis:] of {fmt(x.shape)})")
    b = attrs["begin_norm_axis"]
    stat = TensorType(x.shape[:b] + (1,) * (x.rank - b), x.dtype)
    return (x, stat, stat)


def _layer_norm(a, attrs):
    x, gamma, beta = a
    axes = tuple(range(attrs["begin_norm_axis"], x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    y = centered / np.sqrt(var + _c(x, attrs["epsilon"])) * gamma + beta
    return y, mean, var


composite("LayerNorm", 3, _layer_norm_infer, _layer_norm,
          (Attr("begin_norm_axis", -1, is_int), Attr("begin_params_axis", -1, is_int),
           Attr("epsilon", 1e-7, is_float)), _layer_norm_canon,
          doc="returns (y, mean, variance); mean/variance keep the normalized axes as 1",
          cann=("LayerNormV3", "LayerNormV4"), api=Api(inputs=("x", "gamma", "beta")), grad=_layer_norm_grad,
          precision=Precision("black", True, "mean and variance of a row lose precision in float16; its expansion "
                              "stays float32"))
