"""Elementwise and broadcasting primitives: arithmetic, math functions, comparisons, Select, Cast.

One row per op, every fact about it in the row (ir/ops/registry.py OpDef): pattern, dtypes, the numpy
reference, cost, basic-fusion membership, float16 exactness, precision list, names (MindSpore
aliases, CANN, ONNX) and the API (P.<Op>, ops.<functional>, Tensor.<method>).
"""
from __future__ import annotations

import math

import numpy as np

from ir.dtypes import DType
from ir.graph import TensorType
from ir.ops.checks import broadcast, is_dtype, require, same_dtype
from ir.ops.conversions import cast_array
from ir.ops.registry import Api, Attr, Cost, Form, OpDef, Pattern, Precision, no_gradient, register


def _binary(name: str, fn, allowed: str = "numeric", result: DType | None = None, **facts):
    def infer(types, attrs):
        dtype = same_dtype(types)
        require(dtype, allowed)
        return (TensorType(broadcast(types[0].shape, types[1].shape), result or dtype),)
    register(OpDef(name, Pattern.BROADCAST, 2, infer, lambda a, attrs: fn(a[0], a[1]), **facts))


def _unary(name: str, fn, allowed: str = "float", result: DType | None = None, **facts):
    def infer(types, attrs):
        require(types[0].dtype, allowed)
        return (TensorType(types[0].shape, result or types[0].dtype),)
    register(OpDef(name, Pattern.ELEMWISE, 1, infer, lambda a, attrs: fn(a[0]), **facts))


def _api(functional: str, method: str | None = None, n: int = 1, *forms: Form, mint: bool = True) -> Api:
    """ops.<functional> and Tensor.<method> (the functional's name unless given); with `mint`, also
    mint.<functional> of the n tensors `input`, `other` (MindSpore 2.x's mint forms of elementwise ops)."""
    more = (Form("mint", functional, ("input", "other")[:n]),) if mint else ()
    return Api(functional=functional, method=functional if method is None else method, forms=more + forms)


def _also(*names: str, params: tuple[str, ...] = ()) -> tuple[Form, ...]:
    """Other Tensor method names of an op (MindSpore's aliases: x.multiply is x.mul)."""
    return tuple(Form("Tensor", name, params) for name in names)


ELEMENTWISE = Precision("gray", True, "elementwise")
EXACT = Precision("gray", True, "elementwise, exact")
COMPARISON = Precision("gray", True, "comparison")


def _erf(x: np.ndarray) -> np.ndarray:
    """numpy has no erf: math.erf in float64, rounded once to the input's dtype."""
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    """1 / sqrt(x), one primitive: a float16 input is computed in float32 and rounded once (as numpy's
    float16 loops compute every other op, and as the kernels do)."""
    wide = x.astype(np.float32) if x.dtype == np.float16 else x
    return (np.ones((), wide.dtype) / np.sqrt(wide)).astype(x.dtype)


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.power(x, y)


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.true_divide(x, y)


def maximum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """numpy's documented rule, np.where(x >= y, x, y) with a NaN from either side: numpy's own float32
    loops return y on a tie (maximum(+0.0, -0.0) is -0.0 on x86, +0.0 for float16), so the rule is
    written out to hold on every platform, and the kernels (kernels/emitters.py) follow it."""
    with np.errstate(invalid="ignore"):
        return np.where((x >= y) | (x != x), x, y)


def minimum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where((x <= y) | (x != x), x, y)


def _sign(x: np.ndarray) -> np.ndarray:
    """-1, 0 or 1 (NaN stays NaN, and a zero keeps its sign: sign(-0.0) is -0.0, as x > 0 ? 1 : x < 0 ?
    -1 : x computes it; numpy's own loops give +0.0 or -0.0 depending on the platform's vector code)."""
    with np.errstate(invalid="ignore"):
        return np.where(x > 0, np.ones((), x.dtype), np.where(x < 0, -np.ones((), x.dtype), x))


def _wide(fn):
    """fn computed in float32 for a float16 input and rounded once, as numpy's float16 loops compute."""
    def run(x):
        with np.errstate(all="ignore"):
            return fn(x.astype(np.float32) if x.dtype == np.float16 else x).astype(x.dtype)
    return run


def _quiet(fn):
    def run(x):
        with np.errstate(all="ignore"):
            return fn(x)
    return run


# -- gradient rules (ir/autodiff.py): grad(b, node, douts) -> one cotangent per input, None for none.
# A broadcasting op sums each input's cotangent down to the input's shape (b.sum_to).

def _unbroadcast(b, node, *dins):
    return tuple(None if d is None else b.sum_to(d, v.shape) for v, d in zip(node.inputs, dins))


def _add_grad(b, node, douts):
    return _unbroadcast(b, node, douts[0], douts[0])


def _sub_grad(b, node, douts):
    return _unbroadcast(b, node, douts[0], b.op("Neg", douts[0]))


def _mul_grad(b, node, douts):
    (x, y), (d,) = node.inputs, douts
    return _unbroadcast(b, node, b.op("Mul", d, y), b.op("Mul", d, x))


def _div_grad(b, node, douts):
    (x, y), (d,) = node.inputs, douts
    dx = b.op("RealDiv", d, y)
    return _unbroadcast(b, node, dx, b.op("Neg", b.op("Mul", dx, node.out)))


def _pow_grad(b, node, douts):
    """d/dx = y x^(y-1); d/dy = x^y log x, taken as 0 where x == 0 and y >= 0 (the limit; torch's rule)."""
    (x, y), (d,) = node.inputs, douts
    dx = b.op("Mul", d, b.op("Mul", y, b.op("Pow", x, b.op("Sub", y, b.scalar(1, y)))))
    zero = b.scalar(0, x)
    limit = b.op("LogicalAnd", b.op("Equal", x, zero), b.op("LogicalNot", b.op("Less", y, zero)))
    dy = b.op("Select", limit, zero, b.op("Mul", d, b.op("Mul", node.out, b.op("Log", x))))
    return _unbroadcast(b, node, dx, dy)


def _extremum_grad(keep):
    """Maximum/Minimum: the whole cotangent to x where x wins or ties (x >= y for Maximum), the rest to y,
    as MindSpore's rule."""
    def grad(b, node, douts):
        (x, y), (d,) = node.inputs, douts
        dx = b.op("Select", b.op("LogicalNot", b.op(keep, x, y)), d, b.scalar(0, d))
        return _unbroadcast(b, node, dx, b.op("Sub", d, dx))
    return grad


def _unary_grad(local):
    """The rule of y = f(x): dx = dout * local(b, x, y)."""
    def grad(b, node, douts):
        return (b.op("Mul", douts[0], local(b, node.inputs[0], node.out)),)
    return grad


def _neg_grad(b, node, douts):
    return (b.op("Neg", douts[0]),)


def _tanh_local(b, x, y):
    return b.op("Sub", b.scalar(1, y), b.op("Mul", y, y))


def _erf_local(b, x, y):
    square = b.op("Mul", x, x)
    return b.op("Mul", b.scalar(2 / math.sqrt(math.pi), x), b.op("Exp", b.op("Neg", square)))


def _atan_local(b, x, y):
    return b.op("Reciprocal", b.op("Add", b.scalar(1, x), b.op("Mul", x, x)))


def _softplus_local(b, x, y):
    return b.op("Reciprocal", b.op("Add", b.scalar(1, x), b.op("Exp", b.op("Neg", x))))


def _rsqrt_local(b, x, y):
    return b.op("Mul", b.scalar(-0.5, y), b.op("Mul", y, b.op("Mul", y, y)))


def _reciprocal_local(b, x, y):
    return b.op("Neg", b.op("Mul", y, y))


def _sqrt_grad(b, node, douts):
    return (b.op("RealDiv", douts[0], b.op("Mul", b.scalar(2, node.out), node.out)),)


def _log_grad(b, node, douts):
    return (b.op("RealDiv", douts[0], node.inputs[0]),)


_binary("Add", np.add, grad=_add_grad, basic_fusion=True, aliases=("TensorAdd",), cann=("AddV2",), onnx=("Add",),
        precision=ELEMENTWISE, api=_api("add", None, 2))
_binary("Sub", np.subtract, grad=_sub_grad, basic_fusion=True, onnx=("Sub",), precision=ELEMENTWISE, api=_api("sub", None, 2, *_also("subtract", params=("other",))))
_binary("Mul", np.multiply, grad=_mul_grad, basic_fusion=True, onnx=("Mul",), precision=ELEMENTWISE, api=_api("mul", None, 2, *_also("multiply", params=("other",))))
_binary("RealDiv", _div, "float", grad=_div_grad, basic_fusion=True, cost=Cost.DIVIDE, aliases=("Div",),
        precision=ELEMENTWISE, api=_api("div", None, 2, *_also("divide", "true_divide", params=("other",))))
_binary("Pow", _pow, "float", grad=_pow_grad, cost=Cost.TRANSCENDENTAL, cann=("Power",), domain="positive",
        precision=Precision("black", True, "overflows float16 quickly"), api=_api("pow", None, 2, Form("ops", "pow", ("input", "exponent")),
                                                                             Form("mint", "pow", ("input", "exponent")), mint=False))
_binary("Maximum", maximum, grad=_extremum_grad("Less"), basic_fusion=True, float16_exact=True, precision=EXACT, api=_api("maximum", None, 2))
_binary("Minimum", minimum, grad=_extremum_grad("Greater"), basic_fusion=True, float16_exact=True, precision=EXACT, api=_api("minimum", None, 2))
_binary("Greater", np.greater, "any", DType.bool, basic_fusion=True, float16_exact=True, onnx=("Greater",),
        precision=COMPARISON, api=_api("greater", "gt", 2, *_also("greater", params=("other",)), Form("mint", "gt", ("input", "other")), mint=True))
_binary("Less", np.less, "any", DType.bool, basic_fusion=True, float16_exact=True, onnx=("Less",),
        precision=COMPARISON, api=_api("less", "lt", 2, *_also("less", params=("other",)), Form("mint", "lt", ("input", "other")), mint=True))
_binary("GreaterEqual", np.greater_equal, "any", DType.bool, basic_fusion=True, float16_exact=True,
        onnx=("GreaterOrEqual",), precision=COMPARISON, api=_api("greater_equal", "ge", 2, *_also("greater_equal", params=("other",)), Form("mint", "ge", ("input", "other")), mint=True))
_binary("LessEqual", np.less_equal, "any", DType.bool, basic_fusion=True, float16_exact=True,
        onnx=("LessOrEqual",), precision=COMPARISON, api=_api("less_equal", "le", 2, *_also("less_equal", params=("other",)), Form("mint", "le", ("input", "other")), mint=True))
_binary("Equal", np.equal, "any", DType.bool, basic_fusion=True, float16_exact=True, onnx=("Equal",),
        precision=COMPARISON, api=_api("equal", "eq", 2, *_also("equal", params=("other",)), Form("mint", "eq", ("input", "other")), mint=False))
_binary("NotEqual", np.not_equal, "any", DType.bool, basic_fusion=True, float16_exact=True,
        precision=COMPARISON, api=_api("not_equal", "ne", 2, *_also("not_equal", params=("other",)), Form("mint", "ne", ("input", "other")), mint=True))

_unary("Neg", np.negative, "numeric", grad=_neg_grad, basic_fusion=True, float16_exact=True, onnx=("Neg",), precision=EXACT,
       api=_api("neg", None, 1, *_also("negative"), Form("mint", "negative", ("input",))))
_unary("Abs", np.abs, "numeric", grad=_unary_grad(lambda b, x, y: b.op("Sign", x)), basic_fusion=True, float16_exact=True, onnx=("Abs",), precision=EXACT,
       api=_api("abs", None, 1, *_also("absolute")))
_unary("Exp", _quiet(np.exp), grad=_unary_grad(lambda b, x, y: y), cost=Cost.TRANSCENDENTAL, onnx=("Exp",),
       precision=Precision("black", True, "overflows float16 above 11.1"), api=_api("exp"))
_unary("Log", _quiet(np.log), grad=_log_grad, cost=Cost.TRANSCENDENTAL, onnx=("Log",), domain="positive",
       precision=Precision("black", True, "loses relative precision near 1 and underflows for small inputs"),
       api=_api("log"))
_unary("Sqrt", _quiet(np.sqrt), grad=_sqrt_grad, cost=Cost.DIVIDE, onnx=("Sqrt",), domain="positive",
       precision=Precision("gray", True, "elementwise, well conditioned"), api=_api("sqrt", None, 1, Form("ops", "sqrt", ("x",))))
_unary("Rsqrt", _quiet(_rsqrt), grad=_unary_grad(_rsqrt_local), cost=Cost.DIVIDE, domain="positive",
       precision=Precision("gray", True, "elementwise, well conditioned"), api=_api("rsqrt"))
_unary("Tanh", np.tanh, grad=_unary_grad(_tanh_local), cost=Cost.TRANSCENDENTAL, onnx=("Tanh",), precision=Precision("gray", True, "bounded result"),
       api=_api("tanh"))
_unary("Erf", _erf, grad=_unary_grad(_erf_local), cost=Cost.TRANSCENDENTAL, onnx=("Erf",), precision=Precision("gray", True, "bounded result"),
       api=_api("erf"))
_unary("Sin", np.sin, grad=_unary_grad(lambda b, x, y: b.op("Cos", x)), cost=Cost.TRANSCENDENTAL, onnx=("Sin",), precision=Precision("gray", True, "bounded result"),
       api=_api("sin"))
_unary("Cos", np.cos, grad=_unary_grad(lambda b, x, y: b.op("Neg", b.op("Sin", x))), cost=Cost.TRANSCENDENTAL, onnx=("Cos",), precision=Precision("gray", True, "bounded result"),
       api=_api("cos"))
_unary("Atan", np.arctan, grad=_unary_grad(_atan_local), cost=Cost.TRANSCENDENTAL, onnx=("Atan",),
       precision=Precision("gray", True, "bounded result"), api=_api("atan", None, 1, *_also("arctan"), Form("mint", "arctan", ("input",))))
_unary("Softplus", _wide(lambda x: np.logaddexp(np.zeros((), x.dtype), x)), grad=_unary_grad(_softplus_local), cost=Cost.TRANSCENDENTAL,
       onnx=("Softplus",), precision=Precision("gray", True, "bounded below by its input"),
       doc="log(1 + exp(x)), computed without overflow", api=_api("softplus", "", mint=False))
_unary("Floor", np.floor, grad=no_gradient, float16_exact=True, onnx=("Floor",), precision=EXACT, api=_api("floor"))
_unary("Ceil", np.ceil, grad=no_gradient, float16_exact=True, onnx=("Ceil",), precision=EXACT, api=_api("ceil"))
_unary("Round", np.rint, grad=no_gradient, float16_exact=True, onnx=("Round",), precision=EXACT, doc="half to even",
       api=_api("round"))
_unary("Sign", _sign, "numeric", grad=no_gradient, float16_exact=True, onnx=("Sign",), precision=EXACT, api=_api("sign"))
_unary("Reciprocal", _quiet(lambda x: np.ones((), x.dtype) / x), grad=_unary_grad(_reciprocal_local), cost=Cost.DIVIDE, onnx=("Reciprocal",),
       precision=ELEMENTWISE, api=_api("reciprocal"))
_unary("IsNan", np.isnan, result=DType.bool, onnx=("IsNaN",), precision=COMPARISON, api=_api("isnan", None, 1, Form("mint", "isnan", ("tensor",)), mint=False))
_unary("IsInf", np.isinf, result=DType.bool, precision=COMPARISON, api=_api("isinf"))
_unary("IsFinite", np.isfinite, "numeric", result=DType.bool, precision=COMPARISON, api=_api("isfinite"),
       doc="neither inf nor NaN (an integer always is)")
_unary("LogicalNot", np.logical_not, "bool", domain="bool", onnx=("Not",), precision=COMPARISON,
       api=_api("logical_not"))
_binary("LogicalAnd", np.logical_and, "bool", domain="bool", onnx=("And",), precision=COMPARISON,
        api=_api("logical_and", None, 2))
_binary("LogicalOr", np.logical_or, "bool", domain="bool", onnx=("Or",), precision=COMPARISON,
        api=_api("logical_or", None, 2))


def _select_infer(types, attrs):
    cond, x, y = types
    require(cond.dtype, "bool")
    dtype = same_dtype((x, y))
    return (TensorType(broadcast(cond.shape, x.shape, y.shape), dtype),)


def _select_grad(b, node, douts):
    (cond, x, y), (d,) = node.inputs, douts
    zero = b.scalar(0, d)
    return _unbroadcast(b, node, None, b.op("Select", cond, d, zero), b.op("Select", cond, zero, d))


register(OpDef("Select", Pattern.BROADCAST, 3, _select_infer, lambda a, attrs: np.where(a[0], a[1], a[2]),
               grad=_select_grad,
               basic_fusion=True, float16_exact=True, cann=("SelectV2",), precision=Precision("gray", True, "moves data"),
               api=Api(functional="select", inputs=("cond", "x", "y"),
                       forms=(Form("ops", "select", ("condition", "input", "other", )),))))


def _cast_infer(types, attrs):
    return (TensorType(types[0].shape, attrs["dtype"]),)


def _cast(a, attrs):
    with np.errstate(all="ignore"):
        return cast_array(a[0], attrs["dtype"])


def _cast_grad(b, node, douts):
    x = node.inputs[0]
    return (b.op("Cast", douts[0], dtype=x.dtype) if x.dtype.is_float else None,)


register(OpDef("Cast", Pattern.ELEMWISE, 1, _cast_infer, _cast, (Attr("dtype", check=is_dtype),), grad=_cast_grad,
               basic_fusion=True, domain="any", moves_data=True,
               precision=Precision("gray", True, "its result dtype is its attribute and never changes"),
               api=Api(call_attrs=("dtype",), functional="cast", method="astype", method_args=("dtype",),
                       forms=tuple(Form("Tensor", name, fixed=(("dtype", dtype),)) for name, dtype in (
                           ("float", DType.float32), ("half", DType.float16), ("double", DType.float64),
                           ("int", DType.int32), ("long", DType.int64), ("short", DType.int16),
                           ("byte", DType.uint8), ("bool", DType.bool), ("bfloat16", DType.bfloat16))))))
