"""Composite ops as MindSpore's graph-kernel expanders define them, each a numpy reference here and an
expander into primitives (graphkernel/expanders/):

    Identity(x)                   x
    FastGeLU(x)                   x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|)), that is x * sigmoid(1.702 x)
                                  written so no exp overflows
    FastGeLUGrad(dy, x)           dy * (e + 1.702 x e + exp(1.702 (x - |x|))) / (1 + e)^2, e = exp(-1.702 |x|):
                                  the derivative of x * sigmoid(1.702 x)
    SoftmaxGradExt(x, y, z) {axis=(-1,)}
                                  (x - sum(x * y, axis)) * y * z: SoftmaxGrad of the result y and its
                                  cotangent x, scaled by z (which broadcasts to x's shape); an empty axis
                                  reduces every axis, as MindSpore's expander does

float16 inputs are computed in float32 and rounded once.
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.errors import DTypeError, ShapeError
from ir.ops.checks import broadcast, fmt, is_int_tuple, normalize_axes, require, same_dtype
from ir.ops.composite import composite
from ir.ops.grad_ops import GRAD_API
from ir.ops.registry import Api, Attr, Form, Precision

FAST_GELU_COEF = 1.702


def _wide(*arrays):
    return [a.astype(np.float32) if a.dtype == np.float16 else a for a in arrays]


def _same_float(types, attrs):
    require(types[0].dtype, "float")
    return (types[0],)


# --- Identity ---------------------------------------------------------------------------------------

composite("Identity", 1, lambda types, attrs: (types[0],), lambda a, attrs: a[0].copy(),
          grad=lambda b, node, douts: (douts[0],), why="moves data", domain="any", moves_data=True,
          doc="x itself", api=Api(functional="identity", forms=(Form("ops", "identity", ("x",)),)))


# --- FastGeLU -----------------------------------------------------------------------------------------

def _fast_gelu(a, attrs):
    (x,) = _wide(a[0])
    ax = np.abs(x)
    c = x.dtype.type(FAST_GELU_COEF)
    with np.errstate(over="ignore"):
        return (x / (1 + np.exp(-c * ax)) * np.exp(x.dtype.type(FAST_GELU_COEF / 2) * (x - ax))).astype(a[0].dtype)


def fast_gelu_derivative(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x)
    c = x.dtype.type(FAST_GELU_COEF)
    e = np.exp(-c * ax)
    return (e + c * x * e + np.exp(c * (x - ax))) / ((1 + e) * (1 + e))


def fast_gelu_grad_ops(b, dy, x):
    """dy * FastGeLU'(x) in primitive ops on a GraphBuilder (in x's dtype; the expander widens float16 first):
    the expansion of FastGeLUGrad, and FastGeLU's gradient where FastGeLUGrad refuses the dtype."""
    c = b.scalar(FAST_GELU_COEF, x)
    ax = b.op("Abs", x)
    e = b.op("Exp", b.op("Mul", b.op("Neg", c), ax))
    numerator = b.op("Add", b.op("Add", e, b.op("Mul", b.op("Mul", c, x), e)),
                     b.op("Exp", b.op("Mul", c, b.op("Sub", x, ax))))
    one_plus_e = b.op("Add", b.scalar(1, x), e)
    return b.op("Mul", dy, b.op("RealDiv", numerator, b.op("Mul", one_plus_e, one_plus_e)))


GELU_GRAD_DTYPES = (DType.float16, DType.float32)   # what MindSpore 2.10's FastGeLUGrad takes


def _fast_gelu_rule(b, node, douts):
    """MindSpore's bprop (FastGeLUGrad) in the dtypes it takes; its formula in primitive ops in the others
    (float64, bfloat16), so every float FastGeLU has a gradient."""
    x = node.inputs[0]
    if x.dtype in GELU_GRAD_DTYPES:
        return (b.op("FastGeLUGrad", douts[0], x),)
    return (fast_gelu_grad_ops(b, douts[0], x),)


def _fast_gelu_grad(a, attrs):
    dy, x = _wide(*a)
    with np.errstate(over="ignore", invalid="ignore"):
        return (dy * fast_gelu_derivative(x)).astype(a[0].dtype)


def _fast_gelu_grad_infer(types, attrs):
    dtype = same_dtype(types)
    if dtype not in GELU_GRAD_DTYPES:   # MindSpore 2.10 refuses float64 too
        raise DTypeError(f"dy is {dtype}: FastGeLUGrad's input type should be float16 or float32")
    if types[0].shape != types[1].shape:
        raise ShapeError(f"dy {fmt(types[0].shape)} and x {fmt(types[1].shape)} must have one shape")
    return (types[0],)


composite("FastGeLU", 1, _same_float, _fast_gelu, why="bounded by its input", cann=("FastGelu",),
          grad=_fast_gelu_rule, doc="x * sigmoid(1.702 x), written without overflow", api=Api(functional="fast_gelu", forms=(Form("ops", "fast_gelu", ("x",)),)))
composite("FastGeLUGrad", 2, _fast_gelu_grad_infer, _fast_gelu_grad, why="bounded by its inputs",
          cann=("FastGeluGrad",), api=Api(primitive=False, inputs=("dy", "x"), casts=(None, 0)), doc="FastGeLU's gradient from the cotangent dy and FastGeLU's input x")


# --- SoftmaxGradExt -----------------------------------------------------------------------------------

def _softmax_grad_ext_canon(types, attrs):
    return {"axis": normalize_axes(attrs["axis"], types[0].rank)}


def _softmax_grad_ext_infer(types, attrs):
    x, y, z = types
    dtype = same_dtype(types)
    require(dtype, "float")
    if y.shape != x.shape:
        raise ShapeError(f"x {fmt(x.shape)} and y {fmt(y.shape)} must have one shape")
    if broadcast(x.shape, z.shape) != x.shape:
        raise ShapeError(f"z {fmt(z.shape)} must broadcast to x's shape {fmt(x.shape)}")
    return (x,)


def _softmax_grad_ext(a, attrs):
    x, y, z = _wide(*a)
    total = np.sum(x * y, axis=attrs["axis"], keepdims=True)
    return ((x - total) * y * z).astype(a[0].dtype)


composite("SoftmaxGradExt", 3, _softmax_grad_ext_infer, _softmax_grad_ext, (Attr("axis", (-1,), is_int_tuple),),
          _softmax_grad_ext_canon, api=GRAD_API,
          precision=Precision("black", True, "a sum over the row; its expansion stays float32"),
          doc="(x - sum(x * y, axis)) * y * z: SoftmaxGrad of y and its cotangent x, scaled by z")

__all__ = ["FAST_GELU_COEF", "fast_gelu_derivative"]
