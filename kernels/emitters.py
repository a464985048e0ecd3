"""The scalar emitter of every primitive: a table keyed by op name.

An emitter turns the Python expressions of a node's operands into the expression of its result, for
one element, in the node's dtype:

    EMITTERS["Mul"](Operands(["x", "y"], (f32, f32), (f32,), attrs, consts))  ->  "(x * y)"

Every kernel, fused or single-op, is built from these strings, so fusion changes no bits. Rules the
expressions keep: float32 stays float32 (numba widens to float64 on a Python float, so constants are
np.float32 values); int32 arithmetic is wrapped back to int32 (numba computes it in int64);
transcendental float32 functions come from kernels.mathfn when it provides them (vectorizable),
otherwise from math (libm). REDUCERS give a reduction's identity, its combine and accumulator dtype.

The half floats (float16, bfloat16) live in memory as their uint16 bits and in a kernel as float32
values: `load`/`store` convert exactly (round to nearest even), and `emit` rounds every primitive's
float32 result to the half dtype, so a fused chain gives the unfused chain's bits. HALF names the
conversion functions of each; reductions of a half float accumulate in float32 and round once.

The sub-byte integers (int4, uint4, int2, uint2: storage dtypes, ir/dtypes.py) live in memory as one
byte each, the value in its low bits, and in a kernel as an int8 or uint8 value (STORED): `load` takes
the low bits (sign-extended for the signed types) and `store` writes them. float4_e2m1fn, a storage
dtype too, lives as one byte and in a kernel as a float32 (FLOAT4 names its exact conversions). Only
Cast computes with them: to an integer one a value wraps to its bits (a float truncated first, through
int32), to float4_e2m1fn it rounds as ir/ops/conversions.py says, as the reference does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ir.dtypes import DType
from ir.ops import OPS, Pattern, get
from ir.ops.conversions import INT32_RANGE, INT64_LOW, THROUGH_INT32
from kernels import lanes, mathfn, views

NP_NAME = {DType.float16: "np.float32", DType.bfloat16: "np.float32", DType.float32: "np.float32",
           DType.float64: "np.float64", DType.int8: "np.int8", DType.int16: "np.int16", DType.int32: "np.int32",
           DType.int64: "np.int64", DType.uint8: "np.uint8", DType.uint16: "np.uint16", DType.uint32: "np.uint32",
           DType.uint64: "np.uint64", DType.int4: "np.int8", DType.uint4: "np.uint8", DType.int2: "np.int8",
           DType.uint2: "np.uint8", DType.float4_e2m1fn: "np.float32", DType.bool: "np.bool_"}

# a half float: (bits -> float32, float32 -> bits), the kernels.mathfn functions converting it exactly
HALF = {DType.float16: ("f16_bits_to_f32", "f32_to_f16_bits"),
        DType.bfloat16: ("bf16_bits_to_f32", "f32_to_bf16_bits")}


# a sub-byte integer: the dtype a kernel holds its value in
STORED = {DType.int4: DType.int8, DType.uint4: DType.uint8, DType.int2: DType.int8, DType.uint2: DType.uint8}
# float4_e2m1fn: (bits -> float32, float32 -> bits), held as float32
FLOAT4 = ("f4e2m1_bits_to_f32", "f32_to_f4e2m1_bits")


def compute_dtype(dtype: DType) -> DType:
    """The dtype a kernel holds a value of `dtype` in (NP_NAME): a half float or a float4_e2m1fn is
    computed in float32, a sub-byte integer held in int8 or uint8."""
    return DType.float32 if dtype in HALF or dtype == DType.float4_e2m1fn else STORED.get(dtype, dtype)


def float16_supported() -> bool:
    """Half-float kernels need kernels.mathfn's exact conversions of both half floats."""
    names = math_functions()
    return all(fn in names for pair in HALF.values() for fn in pair)


def half_round(expr: str, dtype: DType) -> str:
    """A float32 expression rounded to the nearest value of the half float `dtype` (kept as float32)."""
    to_f32, to_bits = HALF[dtype]
    return f"{to_f32}({to_bits}({expr}))"


def f16_round(expr: str) -> str:
    """A float32 expression rounded to the nearest float16 (kept as float32)."""
    return half_round(expr, DType.float16)


def load(dtype: DType, element: str) -> str:
    """An element read from a buffer of `dtype`: a half float's bits converted to float32, a sub-byte
    integer's byte to its value."""
    if dtype in STORED:
        return wrap_bits(element, dtype)
    if dtype == DType.float4_e2m1fn:
        return f"{FLOAT4[0]}({element})"
    return f"{HALF[dtype][0]}({element})" if dtype in HALF else element


def store(dtype: DType, value: str) -> str:
    """A float32 value written to a buffer of `dtype`: a half float as its bits; a sub-byte integer's
    value (in range) as its bits in a byte."""
    if dtype in STORED:
        return f"np.uint8({value} & {(1 << dtype.bits) - 1})"
    if dtype == DType.float4_e2m1fn:
        return f"{FLOAT4[1]}({value})"
    return f"{HALF[dtype][1]}({value})" if dtype in HALF else value


def wrap_bits(integer: str, dtype: DType) -> str:
    """An integer expression wrapped to the sub-byte `dtype`'s bits, as its kernel value (int8 or uint8):
    the low bits, and for a signed dtype the top one of them as the sign (x ^ h) - h)."""
    mask, half = (1 << dtype.bits) - 1, 1 << (dtype.bits - 1)
    if dtype.is_unsigned:
        return f"np.uint8({integer} & {mask})"
    return f"np.int8((({integer} & {mask}) ^ {half}) - {half})"


# the modules whose functions generated kernels import, and those functions
HELPERS = {
    "kernels.mathfn": {fn: getattr(mathfn, fn) for fn in ("exp_f32", "log_f32", "tanh_f32", "erf_f32",
                                                          "f16_bits_to_f32", "f32_to_f16_bits",
                                                          "bf16_bits_to_f32", "f32_to_bf16_bits", *FLOAT4)},
    "kernels.lanes": dict(lanes.FUNCTIONS),
    "kernels.views": dict(views.FUNCTIONS),
}


def math_functions() -> dict[str, object]:
    """The kernels.mathfn functions the emitted expressions may call."""
    return HELPERS["kernels.mathfn"]


def kernel_functions() -> dict[str, object]:
    """Every function a generated kernel may call beside numpy and math, by name (its globals)."""
    return {name: fn for functions in HELPERS.values() for name, fn in functions.items()}


@dataclass(frozen=True)
class Operands:
    args: list[str]                    # operand expressions
    in_dtypes: tuple[DType, ...]
    dtypes: tuple[DType, ...]          # result dtypes
    attrs: dict
    consts: tuple                      # per operand: its value when a scalar Const, else None

    @property
    def dtype(self) -> DType:
        return self.dtypes[0]


def const_literal(value, dtype: DType) -> str:
    """A Python expression of a scalar constant in exactly `dtype`."""
    if dtype == DType.bool:
        return "True" if value else "False"
    if dtype.is_int:
        return f"{NP_NAME[dtype]}({int(value)})"
    v = float(value)
    text = "np.inf" if v == float("inf") else "-np.inf" if v == float("-inf") else \
        "np.nan" if v != v else repr(v)
    return f"{NP_NAME[dtype]}({text})"


def _wrap_int32(expr: str, dtype: DType) -> str:
    """Integers narrower than int64 wrapped back to their dtype (numba computes them in int64)."""
    return f"{NP_NAME[dtype]}({expr})" if dtype.is_int and dtype != DType.int64 else expr


def _arith(symbol: str) -> Callable[[Operands], str]:
    return lambda o: _wrap_int32(f"({o.args[0]} {symbol} {o.args[1]})", o.dtype)


def _maximum(o: Operands) -> str:
    """numpy's rule (a NaN operand gives NaN; a >= b gives a), as numba's np.maximum: selects only."""
    return f"np.maximum({o.args[0]}, {o.args[1]})"


def _minimum(o: Operands) -> str:
    return f"np.minimum({o.args[0]}, {o.args[1]})"


def _float_fn(mathfn_name: str | None, libm: str) -> Callable[[Operands], str]:
    def emit(o: Operands) -> str:
        if o.dtype in (DType.float32, DType.float16, DType.bfloat16) and mathfn_name and mathfn_name in math_functions():
            return f"{mathfn_name}({o.args[0]})"
        return f"{NP_NAME[o.dtype]}(math.{libm}({o.args[0]}))"
    return emit


def _libm64(name: str) -> Callable[[Operands], str]:
    """libm's function in float64, rounded once to the result's dtype: within 0.5 ulp of the exact
    result but for a rare double rounding (never past 1 ulp). Scalar code: slower than kernels.mathfn."""
    return lambda o: f"{NP_NAME[o.dtype]}(math.{name}(np.float64({o.args[0]})))"


def _softplus(o: Operands) -> str:
    """max(x, 0) + log1p(exp(-|x|)) in float64, rounded once: no overflow, exact log1p near 0."""
    x = f"np.float64({o.args[0]})"
    return f"{NP_NAME[o.dtype]}(max({x}, 0.0) + math.log1p(math.exp(-abs({x}))))"


def _sign(o: Operands) -> str:
    """x > 0 ? 1 : (x < 0 ? -1 : x): a zero keeps its sign, NaN stays NaN (the reference's rule)."""
    x, one = o.args[0], const_literal(1, o.dtype)
    return f"({one} if {x} > 0 else (-{one} if {x} < 0 else {x}))"


def _rsqrt(o: Operands) -> str:
    one = const_literal(1, o.dtype)
    return f"({one} / math.sqrt({o.args[0]}))"


def _pow(o: Operands) -> str:
    """x ** c for a scalar constant c that is a small integer or 0.5 is multiplications or a sqrt."""
    x, y = o.args
    c = o.consts[1]
    one = const_literal(1, o.dtype)
    if c is not None and float(c) == int(c) and abs(int(c)) <= 4:
        n = abs(int(c))
        power = {0: one, 1: x, 2: f"({x} * {x})", 3: f"({x} * {x} * {x})",
                 4: f"(({x} * {x}) * ({x} * {x}))"}[n]
        return power if c >= 0 else f"({one} / {power})"
    if c is not None and float(c) == 0.5:
        return f"math.sqrt({x})"
    if c is not None and float(c) == -0.5:
        return f"({one} / math.sqrt({x}))"
    return f"{NP_NAME[o.dtype]}({x} ** {y})"


def _cast(o: Operands) -> str:
    src, dst = o.in_dtypes[0], o.dtype
    if src == dst:
        return o.args[0]
    if dst == DType.bool:
        return f"({o.args[0]} != 0)"
    if dst in STORED:   # wraps; a float cast to int32 first, as the reference
        x = _float_to_integer(o.args[0], DType.int32) if src.is_float else o.args[0]
        return wrap_bits(f"np.int64({x})", dst)
    if dst == DType.float4_e2m1fn:   # rounded to one, through float32 (a float64 rounded to it first)
        return f"{FLOAT4[0]}({FLOAT4[1]}(np.float32({o.args[0]})))"
    if src.is_float and dst.is_int:
        return _float_to_integer(o.args[0], dst)
    return f"{NP_NAME[dst]}({o.args[0]})"


def _float_to_integer(x: str, dst: DType) -> str:
    """A float cast to an integer as ir/ops/conversions.py's rule says: numba's own conversion (LLVM's
    fptosi and fptoui) is undefined outside the type's range, and only ever converts values inside the
    range it is given here."""
    if dst in THROUGH_INT32:
        low, high = INT32_RANGE
        through = f"(np.int32({x}) if ({x} >= {low!r} and {x} <= {high!r}) else np.int32({int(low)}))"
        return through if dst == DType.int32 else f"{NP_NAME[dst]}({through})"
    int64 = (f"(np.int64({x}) if ({x} >= {INT64_LOW!r} and {x} < {-INT64_LOW!r}) "
             f"else np.int64({int(INT64_LOW)}))")
    if dst != DType.uint64:
        return int64 if dst == DType.int64 else f"{NP_NAME[dst]}({int64})"
    return (f"(np.uint64(0) if {x} >= {2.0 ** 64!r} else ((np.uint64(np.int64({x} - {-INT64_LOW!r})) + "
            f"np.uint64({2 ** 63})) if {x} >= {-INT64_LOW!r} else np.uint64({int64})))")


# ops whose emitter writes code for a constant operand's value (Operands.consts): their constants stay
# literals in the kernel (kernels.layout.argument_consts)
VALUE_SPECIALIZED = {"Pow"}

EMITTERS: dict[str, Callable[[Operands], str]] = {
    "Add": _arith("+"),
    "Sub": _arith("-"),
    "Mul": _arith("*"),
    "RealDiv": lambda o: f"({o.args[0]} / {o.args[1]})",
    "Pow": _pow,
    "Maximum": _maximum,
    "Minimum": _minimum,
    "Greater": lambda o: f"({o.args[0]} > {o.args[1]})",
    "GreaterEqual": lambda o: f"({o.args[0]} >= {o.args[1]})",
    "Less": lambda o: f"({o.args[0]} < {o.args[1]})",
    "Equal": lambda o: f"({o.args[0]} == {o.args[1]})",
    "NotEqual": lambda o: f"({o.args[0]} != {o.args[1]})",
    "LessEqual": lambda o: f"({o.args[0]} <= {o.args[1]})",
    "Neg": lambda o: _wrap_int32(f"(-{o.args[0]})", o.dtype),
    "Abs": lambda o: _wrap_int32(f"abs({o.args[0]})", o.dtype),
    "Exp": _float_fn("exp_f32", "exp"),
    "Log": _float_fn("log_f32", "log"),
    "Sqrt": lambda o: f"math.sqrt({o.args[0]})",
    "Rsqrt": _rsqrt,
    "Tanh": _float_fn("tanh_f32", "tanh"),
    "Erf": _float_fn("erf_f32", "erf"),
    "Sin": _libm64("sin"),
    "Cos": _libm64("cos"),
    "Atan": _libm64("atan"),
    "Softplus": _softplus,
    "Floor": lambda o: f"np.floor({o.args[0]})",
    "Ceil": lambda o: f"np.ceil({o.args[0]})",
    "Round": lambda o: f"np.rint({o.args[0]})",
    "Sign": _sign,
    "Reciprocal": lambda o: f"({const_literal(1, o.dtype)} / {o.args[0]})",
    "IsNan": lambda o: f"({o.args[0]} != {o.args[0]})",
    "IsInf": lambda o: f"(abs({o.args[0]}) == np.inf)",
    "IsFinite": lambda o: f"(abs({o.args[0]}) < np.inf)",
    "LogicalNot": lambda o: f"(not {o.args[0]})",
    "LogicalAnd": lambda o: f"({o.args[0]} and {o.args[1]})",
    "LogicalOr": lambda o: f"({o.args[0]} or {o.args[1]})",
    "Select": lambda o: f"({o.args[1]} if {o.args[0]} else {o.args[2]})",
    "Cast": _cast,
    "BroadcastTo": lambda o: o.args[0],
}


@dataclass(frozen=True)
class Reducer:
    """How a reduction accumulates: identity, combine(acc, x) and the accumulator dtype."""
    identity: Callable[[DType], str]
    combine: Callable[[str, str, DType], str]
    acc_dtype: Callable[[DType], DType]


def _lowest(dtype: DType) -> str:
    return f"{NP_NAME[dtype]}({np.iinfo(dtype.np).min})" if dtype.is_int else f"{NP_NAME[dtype]}(-np.inf)"


def _highest(dtype: DType) -> str:
    return f"{NP_NAME[dtype]}({np.iinfo(dtype.np).max})" if dtype.is_int else f"{NP_NAME[dtype]}(np.inf)"


def _extremum(emit):
    return lambda acc, x, dtype: emit(Operands([acc, x], (dtype, dtype), (dtype,), {}, (None, None)))


def _sum_dtype(dtype: DType) -> DType:
    """Where a sum of `dtype` accumulates: narrower integers in int64 (uint64 in itself), the half floats
    in float32, float32 and float64 in themselves."""
    if dtype.is_int:
        return DType.uint64 if dtype == DType.uint64 else DType.int64
    return DType.float32 if dtype.is_half else dtype


REDUCERS: dict[str, Reducer] = {
    # narrower integer sums accumulate in int64 and wrap once at the end: the bits of wrap-around
    "ReduceSum": Reducer(lambda d: const_literal(0, d), lambda acc, x, d: f"({acc} + {x})",
                         _sum_dtype),
    "ReduceMax": Reducer(_lowest, _extremum(_maximum), lambda d: d),
    "ReduceMin": Reducer(_highest, _extremum(_minimum), lambda d: d),
}


def emit(op: str, operands: Operands) -> str:
    """The result expression, rounded to its half float when the result is one (every primitive's
    float16 or bfloat16 result is rounded, so results match the reference op by op). An op that gives
    a value of its operand's half dtype already (`float16_exact`: a max, a negation, a select) needs no
    rounding when its operands are of the result's dtype."""
    expr = EMITTERS[op](operands)
    out = operands.dtypes[0]
    if out in HALF:
        same = all(d == out for d in operands.in_dtypes if d.is_float)
        exact = get(op).float16_exact and same
        if not exact and not (op == "Cast" and operands.in_dtypes[0] == out):
            expr = half_round(expr, out)
    return expr


def _check_table() -> None:
    """Every op fusion may put in a kernel (ELEMWISE, BROADCAST and REDUCE primitives but Const, which
    kernels inline) has its emitter or reducer here: an op row added without one fails at import, not
    with a KeyError and a fallback at the first kernel that holds it."""
    kernel_ops = {name for name, d in OPS.items()
                  if d.pattern in (Pattern.ELEMWISE, Pattern.BROADCAST, Pattern.REDUCE) and not d.expandable}
    missing = sorted(kernel_ops - set(EMITTERS) - set(REDUCERS) - {"Const"})
    if missing:
        raise ImportError(f"kernels/emitters.py has no emitter for {', '.join(missing)} (ops fusion may put in a "
                          "kernel); add one, or give the op a pattern no kernel holds")


_check_table()
