"""ONNX activation functions as chains of our primitives, following the ONNX reference formulas:

    LeakyRelu        x > 0 ? x : x * alpha                 PRelu       x > 0 ? x : x * slope
    Elu              x > 0 ? x : alpha * (exp(x) - 1)      Selu        (x > 0 ? x : alpha*(exp(x)-1)) * gamma
    Celu             max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    ThresholdedRelu  x > alpha ? x : 0                     Softsign    x / (1 + |x|)
    HardSigmoid      max(0, min(1, x * alpha + beta))      HardSwish   x * HardSigmoid(x; 1/6, 1/2)
(Softplus and Sign are ops of our own: graphkernel/onnx/ops_math.py converts them from the op table.)

(exp(x) - 1 stands for numpy's expm1: within the float32 tolerance except for |x| < 1e-6, where the
absolute error stays below 1e-7. A half-float x (float16, bfloat16) computes Elu, Selu and Celu in float32
and rounds once, as numpy's expm1 on a half float does: rounding exp(x) before subtracting 1 would lose
the low bits of a small result, one bfloat16 step at x = -0.5.)
"""
from __future__ import annotations

from ir.dtypes import DType
from graphkernel.onnx.builder import Builder, NodeInfo, dtype_of
from graphkernel.onnx.registry import converter


def _select_positive(b: Builder, x, negative, threshold=0):
    return b.op("Select", [b.binary("Greater", x, threshold), x, negative])


def _expm1(b: Builder, x):
    return b.binary("Sub", b.op("Exp", [x]), 1)


def _in_float32(b: Builder, x, compute):
    """compute(x) for a float32 or float64 x; a half-float x widened to float32 and the result rounded once."""
    dtype = dtype_of(x)
    if not dtype.is_half:
        return compute(x)
    return b.cast(compute(b.cast(x, DType.float32)), dtype)


@converter("LeakyRelu", min_version=6)
def leaky_relu(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    return [_select_positive(b, x, b.binary("Mul", x, n.attr("alpha", 0.01)))]


@converter("PRelu", min_version=7)   # 7: slope broadcast to X (6: none)
def prelu(b: Builder, n: NodeInfo):
    x, slope = n.inputs[:2]
    return [_select_positive(b, x, b.op("Mul", [x, slope]))]


@converter("Elu", min_version=6)
def elu(b: Builder, n: NodeInfo):
    return [_in_float32(b, n.inputs[0],
                        lambda x: _select_positive(b, x, b.binary("Mul", _expm1(b, x), n.attr("alpha", 1.0))))]


@converter("Selu", min_version=6)
def selu(b: Builder, n: NodeInfo):
    def compute(x):
        negative = b.binary("Mul", _expm1(b, x), n.attr("alpha", 1.67326319217681884765625))
        return b.binary("Mul", _select_positive(b, x, negative), n.attr("gamma", 1.05070102214813232421875))
    return [_in_float32(b, n.inputs[0], compute)]


@converter("Celu", min_version=12)
def celu(b: Builder, n: NodeInfo):
    alpha = n.attr("alpha", 1.0)

    def compute(x):
        negative = b.binary("Mul", _expm1(b, b.binary("RealDiv", x, alpha)), alpha)
        return b.op("Add", [b.binary("Maximum", x, 0), b.binary("Minimum", negative, 0)])
    return [_in_float32(b, n.inputs[0], compute)]


@converter("ThresholdedRelu", min_version=10)
def thresholded_relu(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    return [_select_positive(b, x, b.const(0, x), n.attr("alpha", 1.0))]


@converter("Softsign", min_version=1)
def softsign(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    return [b.op("RealDiv", [x, b.binary("Add", b.op("Abs", [x]), 1)])]


def _hard_sigmoid(b: Builder, x, alpha: float, beta: float):
    linear = b.binary("Add", b.binary("Mul", x, alpha), beta)
    return b.binary("Maximum", b.binary("Minimum", linear, 1), 0)


@converter("HardSigmoid", min_version=6)
def hard_sigmoid(b: Builder, n: NodeInfo):
    return [_hard_sigmoid(b, n.inputs[0], n.attr("alpha", 0.2), n.attr("beta", 0.5))]


@converter("HardSwish", min_version=14)
def hard_swish(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    return [b.op("Mul", [x, _hard_sigmoid(b, x, 1 / 6, 0.5)])]



