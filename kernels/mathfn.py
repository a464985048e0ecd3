"""Vectorizable float32 exp, log, tanh, erf and exact float16, bfloat16 and float4_e2m1fn <-> float32
conversions for numba kernels.

libm's expf/tanhf/erff are scalar calls that stop LLVM from vectorizing a kernel loop. These are
straight-line float32 code (selects, no branches, no calls) that inlines into the loop and vectorizes:

    exp(x)  = 2**n * e**r,  n = round(x / ln2), r = x - n*ln2 (Cody-Waite, fma), e**r a degree-6
              polynomial; 2**n built from exponent bits in two halves so subnormal results round once;
              x clamped on its bits with integer min (2 instructions; float compares took 7) to
              [-176, 89]: far below exp's range both halves of 2**n are exact zeros, no underflow
    log(x)  = e*ln2 + log1p(f),  x = 2**e * (1 + f) with 1 + f in [sqrt(.5), sqrt(2)) (bit
              arithmetic; subnormals pre-scaled by 2**23), log1p(f) = f - f**2/2 + f**3 * P8(f)
    tanh(a) = a + a**3 * P4(a**2) below 0.625, else 1 - 2 / (exp(2a) + 1); sign copied bitwise
    erf(a)  = a + a * P6(a**2) below 1, else 1 - exp(-a**2) * R9(1/a) up to 3.9375 (a**2 split into
              a rounded part and its exact fma residue), else 1; sign copied bitwise

Polynomials are near-minimax fits (Lawson's weighted least squares in float64) rounded to float32.
Special values follow numpy's float32: nan -> nan, exp overflows to inf and underflows to 0,
log(0) = -inf, log(<0) = nan, tanh and erf saturate to +-1 and keep -0.0.

Accuracy, exhaustive over all 2**32 inputs (bench/mathfn_ulp.py, 2026-11-22), in float32 steps:
                              exp       log       tanh      erf
  to the correctly rounded    1 (0.17%) 1 (0.05%) 1 (0.17%) 1 (0.69%)   *_MAX_ULP_EXACT; (% not equal)
  to numpy's float32          2 (4.9%)  4 (1.8%)  2 (1.5%)  -           *_MAX_ULP; numpy has no erf
"Correctly rounded" is glibc's double result rounded to float32. numpy's own float32 exp and log are
2 and 3 steps from it at worst (sampled, AVX2 loops on this machine), so a bound closer to numpy than
the sum is not reachable without copying numpy's algorithm; no result differs in nan-ness from numpy.

float16: f16_bits_to_f32, f32_to_f16_bits and f32_round_to_f16 equal numpy's conversions bit for bit
(RNE, subnormals, overflow to inf; nan stays nan), checked over all 2**16 halves and all 2**32 floats.
bfloat16: bf16_bits_to_f32 and f32_to_bf16_bits equal ml_dtypes' conversions bit for bit (RNE, subnormals,
overflow to inf, a nan to the quiet nan of its sign), checked as float16's are (tests/test_mathfn.py).
float4_e2m1fn: f4e2m1_bits_to_f32 and f32_to_f4e2m1_bits equal ml_dtypes' conversions bit for bit (RNE,
saturation at +-6, a nan to a zero of the other sign), checked over every float16, every bfloat16 and
random float32 bits (tests/test_dtypes_subbyte.py).

Speed (bench/mathfn_bench.py, 16M elements, one thread, ns per element; a copy is 0.49):
  exp 0.80 (libm 5.1, numpy 2.8)   log 0.90 (libm 5.9, numpy 2.7)   tanh 1.31 (libm 28, numpy 3.4)
  erf 1.58 (libm 23)               f32->f16 0.46 (numpy astype 5.1)  f16->f32 0.46 (numpy 3.0)
All loops are vectorized (8 float32 lanes, AVX2 here); 6-21x faster than libm, 2.6-3.5x than numpy.
exp's clamp on the bits (integer min, replacing float compares and blends) gives the same result as the
float clamp for every one of the 2**32 inputs; an exp loop takes 0.70-0.86 of the time on in-cache rows (262144 elements,
one thread; 37 -> 31 vector instructions per 8 lanes, loads and stores included); tanh and erf inherit it.

How to call them: `@njit(forceinline=True)` (with the kernels' numpy error model) marks each
function `alwaysinline` for LLVM, which is what makes a calling loop vectorize. With plain `@njit` or
`@register_jitable`, LLVM's inliner declines a body the size of erf, the loop keeps a scalar call and
runs 15-20x slower. numba's IR-level inlining (`inline="always"`) vectorizes too, but types and lowers
the body again at every call site: a kernel calling these eight times built in ~1.9 s against ~0.3 s
(the same machine code; each function is typed once per process and LLVM inlines the compiled body).
To vectorize, divisions use a bare `fdiv` intrinsic (numba's `/` branches to raise ZeroDivisionError)
and integer steps are wrapped in np.int32 (numba computes in int64, halving the vector width).
Constants are np.float32: a Python float widens the arithmetic to float64.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core.extending import intrinsic

f32 = np.float32

EXP_F32_MAX_ULP, EXP_F32_MAX_ULP_EXACT = 2, 1
LOG_F32_MAX_ULP, LOG_F32_MAX_ULP_EXACT = 4, 1
TANH_F32_MAX_ULP, TANH_F32_MAX_ULP_EXACT = 2, 1
ERF_F32_MAX_ULP = ERF_F32_MAX_ULP_EXACT = 1          # numpy has no erf: measured against math.erf


# ---------------------------------------------------------------- bit casts and fma (LLVM instructions)

@intrinsic
def f32_bits(typingctx, x):
    """The IEEE bits of a float32 as an int32 (an LLVM bitcast, free in a vector register)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int32))
    return types.int32(types.float32), codegen


@intrinsic
def bits_f32(typingctx, i):
    """The float32 whose IEEE bits are the low 32 bits of the integer `i`."""
    if not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        low = builder.trunc(args[0], context.get_value_type(types.int32)) if i.bitwidth > 32 else args[0]
        return builder.bitcast(low, context.get_value_type(types.float32))
    return types.float32(i), codegen


@intrinsic
def fma_f32(typingctx, a, b, c):
    """a * b + c rounded once (llvm.fma: one vfmadd instruction on x86 with FMA3)."""
    if not (a == b == c == types.float32):
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return types.float32(types.float32, types.float32, types.float32), codegen


@intrinsic
def div_f32(typingctx, a, b):
    """a / b as a bare IEEE division: numba's `/` adds a zero-divisor branch that stops vectorization."""
    if not (a == b == types.float32):
        return None

    def codegen(context, builder, signature, args):
        return builder.fdiv(*args)
    return types.float32(types.float32, types.float32), codegen


# ---------------------------------------------------------------- exp

_LOG2E = f32(1.4426950408889634)
_ROUND_SHIFT = f32(12582912.0)              # 1.5 * 2**23: adding it rounds |v| < 2**22 to an integer
_LN2_HI = f32(0.6931471805599453)
_LN2_LO = f32(0.6931471805599453 - 0.693147182464599609375)
_EXP_C2, _EXP_C3, _EXP_C4, _EXP_C5, _EXP_C6 = (f32(0.4999999403953552), f32(0.1666652113199234),
                                               f32(0.04166838899254799), f32(0.008368710055947304),
                                               f32(0.001381461275741458))


_EXP_LO_BITS = np.int32(-1020264448)        # bits of -176.0: exp is 0 from -104, and at -176 both
                                            # halves of 2**n are +0.0 (n = -254): see exp_f32
_EXP_HI_BITS = np.int32(0x42B20000)         # bits of 89.0: exp(89) is inf
_EXP_ONE_BITS = np.int32(127 << 23)         # bits of 1.0: 2**k is (k << 23) + these


@njit(forceinline=True, error_model="numpy")
def exp_f32(x):
    """e**x for float32 x, within EXP_F32_MAX_ULP of numpy's np.exp."""
    xb = f32_bits(x)                                   # x clamped to [-176, 89] on its bits: two integer
    xb = xb if np.uint32(xb) < np.uint32(_EXP_LO_BITS) else _EXP_LO_BITS   # min (vpminud, vpminsd), where
    xb = xb if xb < _EXP_HI_BITS else _EXP_HI_BITS     # float compares cost a compare, a blend and an and each
    xc = bits_f32(xb)
    t = fma_f32(xc, _LOG2E, _ROUND_SHIFT)              # bits(t) = bits(_ROUND_SHIFT) + n, n = round(x / ln2)
    nf = t - _ROUND_SHIFT
    r = fma_f32(-nf, _LN2_HI, xc)                      # exact
    r = fma_f32(-nf, _LN2_LO, r)                       # |r| <= ln2 / 2
    q = fma_f32(fma_f32(fma_f32(fma_f32(_EXP_C6, r, _EXP_C5), r, _EXP_C4), r, _EXP_C3), r, _EXP_C2)
    s = f32(1.0) + r                                   # Fast2Sum: e**r = s + ((1 - s) + r + r*r*q)
    p = s + fma_f32(r * r, q, (f32(1.0) - s) + r)
    tb = f32_bits(t)                                   # 2**n as two normal powers of two, 2**n1 * 2**(n - n1),
    half = np.int32(np.int32(tb >> 1) << 23)           # n1 = n >> 1, shifted straight from t's bits (the
    whole = np.int32(tb << 23)                         # bits of _ROUND_SHIFT shift out): n1 << 23, n << 23
    # at x = -176 (n = -254) both halves are +0.0, so y is an exact 0: a product that underflows to 0
    # or a subnormal takes the processor's slow path (~2x the whole exp here), and an attention mask
    # of -10000 would pay it in every vector it touches; between -176 and -104 y rounds to 0 as well
    y = p * bits_f32(np.int32(half + _EXP_ONE_BITS)) * bits_f32(np.int32(np.int32(whole + _EXP_ONE_BITS) - half))
    return x if x != x else y


# ---------------------------------------------------------------- log

_SQRT_HALF_BITS = 0x3F3504F3                # bits of sqrt(0.5): mantissas are reduced to [sqrt(.5), sqrt(2))
_MIN_NORMAL = f32(1.1754943508222875e-38)
_TWO_23 = f32(8388608.0)
_LN2_HI16 = f32(0.693145751953125)          # 16 significant bits: e * _LN2_HI16 is exact for |e| < 256
_LN2_LO16 = f32(0.6931471805599453 - 0.693145751953125)
_LOG_C = tuple(f32(c) for c in (0.3333331346511841, -0.25000008940696716, 0.2000211924314499,
                                -0.1666799634695053, 0.14219552278518677, -0.1240558922290802,
                                0.11888162791728973, -0.11675651371479034, 0.0674663856625557))
_LOG_C0, _LOG_C1, _LOG_C2, _LOG_C3, _LOG_C4, _LOG_C5, _LOG_C6, _LOG_C7, _LOG_C8 = _LOG_C
_INF = f32(np.inf)
_NAN = f32(np.nan)


@njit(forceinline=True, error_model="numpy")
def log_f32(x):
    """The natural log of float32 x, within LOG_F32_MAX_ULP of numpy's np.log."""
    subnormal = x < _MIN_NORMAL
    xs = x * _TWO_23 if subnormal else x
    i = np.int32(f32_bits(xs) - _SQRT_HALF_BITS)
    e = np.int32((i >> 23) - (23 if subnormal else 0))
    f = bits_f32((i & 0x7FFFFF) + _SQRT_HALF_BITS) - f32(1.0)     # x = 2**e * (1 + f)
    p = fma_f32(fma_f32(fma_f32(fma_f32(_LOG_C8, f, _LOG_C7), f, _LOG_C6), f, _LOG_C5), f, _LOG_C4)
    p = fma_f32(fma_f32(fma_f32(fma_f32(p, f, _LOG_C3), f, _LOG_C2), f, _LOG_C1), f, _LOG_C0)
    ef = f32(e)
    corr = fma_f32(f * f, fma_f32(f, p, f32(-0.5)), ef * _LN2_LO16)   # log1p(f) - f + e * ln2_lo
    hi = ef * _LN2_HI16
    s = hi + f                                         # Fast2Sum: |hi| >= |f| unless hi == 0
    y = s + (((hi - s) + f) + corr)
    y = y if x < _INF else x
    y = -_INF if x == f32(0.0) else y
    return _NAN if x < f32(0.0) else y


# ---------------------------------------------------------------- tanh

_SIGN_BIT = np.int32(-2147483648)
_TANH_POLY_END = f32(0.625)                 # below: a + a**3 * P(a**2); above: 1 - 2 / (e**2a + 1)
_TANH_C0, _TANH_C1, _TANH_C2, _TANH_C3, _TANH_C4 = (f32(-0.3333328068256378), f32(0.13331441581249237),
                                                    f32(-0.05373971536755562), f32(0.0206390880048275),
                                                    f32(-0.005704987328499556))


@njit(forceinline=True, error_model="numpy")
def copysign_f32(magnitude, sign_of):
    """`magnitude` (sign bit clear) with the sign bit of `sign_of`: keeps -0.0 and the sign of nan."""
    return bits_f32(f32_bits(magnitude) | (f32_bits(sign_of) & _SIGN_BIT))


@njit(forceinline=True, error_model="numpy")
def tanh_f32(x):
    """tanh of float32 x, within TANH_F32_MAX_ULP of numpy's np.tanh."""
    a = abs(x)
    a2 = a * a
    p = fma_f32(fma_f32(fma_f32(fma_f32(_TANH_C4, a2, _TANH_C3), a2, _TANH_C2), a2, _TANH_C1), a2, _TANH_C0)
    near0 = fma_f32(a * a2, p, a)
    far = f32(1.0) - div_f32(f32(2.0), exp_f32(f32(2.0) * a) + f32(1.0))   # 1 for a > 9.01, inf and beyond
    return copysign_f32(near0 if a < _TANH_POLY_END else far, x)


# ---------------------------------------------------------------- erf

_ERF_POLY_END = f32(1.0)                    # below: a + a * P(a**2); above: 1 - e**-a**2 * R(1 / a)
_ERF_ONE_FROM = f32(3.9375)                 # erf rounds to 1 from 3.9192 on
_ERF_P = tuple(f32(c) for c in (0.12837916612625122, -0.3761262595653534, 0.1128358542919159,
                                -0.026853812858462334, 0.005188329145312309, -0.0008010203600861132,
                                7.853891293052584e-05))
_ERF_P0, _ERF_P1, _ERF_P2, _ERF_P3, _ERF_P4, _ERF_P5, _ERF_P6 = _ERF_P
_ERF_R = tuple(f32(c) for c in (0.0001282141456613317, 0.5616435408592224, 0.021472547203302383,
                                -0.3798619210720062, 0.24107162654399872, 0.21982616186141968,
                                -0.5160919427871704, 0.42348670959472656, -0.17376023530960083,
                                0.029668837785720825))
_ERF_R0, _ERF_R1, _ERF_R2, _ERF_R3, _ERF_R4, _ERF_R5, _ERF_R6, _ERF_R7, _ERF_R8, _ERF_R9 = _ERF_R


@njit(forceinline=True, error_model="numpy")
def erf_f32(x):
    """The error function of float32 x, within ERF_F32_MAX_ULP of math.erf rounded to float32."""
    a = abs(x)
    a2 = a * a
    p = fma_f32(fma_f32(fma_f32(_ERF_P6, a2, _ERF_P5), a2, _ERF_P4), a2, _ERF_P3)
    p = fma_f32(fma_f32(fma_f32(p, a2, _ERF_P2), a2, _ERF_P1), a2, _ERF_P0)
    near0 = fma_f32(a, p, a)
    b = a if a < _ERF_ONE_FROM else _ERF_ONE_FROM
    b2 = b * b
    b2_err = fma_f32(b, b, -b2)                        # b*b = b2 + b2_err exactly
    gauss = exp_f32(-b2)
    gauss = fma_f32(-gauss, b2_err, gauss)             # e**-(b2 + b2_err)
    t = div_f32(f32(1.0), b)
    r = fma_f32(fma_f32(fma_f32(fma_f32(_ERF_R9, t, _ERF_R8), t, _ERF_R7), t, _ERF_R6), t, _ERF_R5)
    r = fma_f32(fma_f32(fma_f32(fma_f32(fma_f32(r, t, _ERF_R4), t, _ERF_R3), t, _ERF_R2), t, _ERF_R1), t, _ERF_R0)
    far = f32(1.0) - gauss * r                         # r ~ erfc(b) * e**b**2
    y = near0 if a < _ERF_POLY_END else far
    y = y if a < _ERF_ONE_FROM else f32(1.0)
    return copysign_f32(y if a == a else a, x)


# ---------------------------------------------------------------- float16 <-> float32, exact

_F16_TO_F32_REBIAS = (127 - 15) << 23       # half exponent bias to float32 bias, at float32's exponent field
_F16_SUBNORMAL_BIAS = f32(6.103515625e-05)  # 2**-14: a half subnormal m * 2**-24 is (2**-14 + m * 2**-24) - 2**-14
_F32_INF_BITS = 0x7F800000
_F16_EXPONENT_AT_F32 = np.int32(0x1F << 23)         # the half exponent field, shifted to float32 place
_ZERO_I32 = np.int32(0)
_F16_ROUNDS_TO_INF = (127 + 16) << 23      # float32 bits of 65536.0; 65520 and above round to inf on the normal path
_F16_NORMAL_FROM = 113 << 23                # float32 bits of 2**-14, the smallest normal half
_HALF_BITS = 126 << 23                      # float32 bits of 0.5: adding 0.5 rounds to a multiple of 2**-24 (RNE)


@njit(forceinline=True, error_model="numpy")
def f16_bits_to_f32(u):
    """The float32 of the half whose bits are `u` (uint16), exactly (nan payloads kept)."""
    h = np.int32(u)
    magnitude = np.int32((h & 0x7FFF) << 13)
    exponent = np.int32(magnitude & _F16_EXPONENT_AT_F32)
    o = np.int32(magnitude + _F16_TO_F32_REBIAS)
    o = np.int32(o + _F16_TO_F32_REBIAS) if exponent == _F16_EXPONENT_AT_F32 else o   # inf, nan: exponent 255
    y = bits_f32(o + (1 << 23)) - _F16_SUBNORMAL_BIAS if exponent == _ZERO_I32 else bits_f32(o)
    return bits_f32(f32_bits(y) | np.int32((h & 0x8000) << 16))


@njit(forceinline=True, error_model="numpy")
def f32_to_f16_bits(x):
    """The bits (uint16) of the half nearest to float32 `x`, ties to even; overflow to inf, nan to a quiet nan.

    Integer steps are wrapped in np.int32: numba computes in int64, which halves the vector width.
    """
    bits = f32_bits(x)
    magnitude = np.int32(bits & 0x7FFFFFFF)
    rounded = np.int32(magnitude - _F16_TO_F32_REBIAS + 0xFFF + ((magnitude >> 13) & 1))  # RNE, low 13 bits
    normal = np.int32(rounded >> 13)
    subnormal = np.int32(f32_bits(bits_f32(magnitude) + bits_f32(_HALF_BITS)) - _HALF_BITS)
    special = np.int32(0x7E00) if magnitude > _F32_INF_BITS else np.int32(0x7C00)
    o = subnormal if magnitude < _F16_NORMAL_FROM else normal
    o = special if magnitude >= _F16_ROUNDS_TO_INF else o
    return np.uint16(o | ((bits >> 16) & 0x8000))


_F32_EXPONENT = np.int32(0x7F800000)
_F16_STEP_FLOOR = np.int32(113 << 23)      # below 2**-14 half values are multiples of 2**-24, as at 2**-14
_F16_OVERFLOW = f32(65520.0)                # the midpoint of 65504 and 2**16: ties to even round up to inf


@njit(forceinline=True, error_model="numpy")
def f32_round_to_f16(x):
    """x rounded to the nearest float16 value, ties to even, kept as float32: the same result as
    f16_bits_to_f32(f32_to_f16_bits(x)) in fewer instructions. Adding c, a power of two whose
    float32 step is the half step at |x|, rounds |x| to that step; subtracting c again is exact."""
    a = abs(x)
    exponent = np.int32(f32_bits(a) & _F32_EXPONENT)
    exponent = exponent if exponent > _F16_STEP_FLOOR else _F16_STEP_FLOOR
    c = bits_f32(exponent + (13 << 23))
    y = (a + c) - c
    return copysign_f32(_INF if a >= _F16_OVERFLOW else y, x)


# ---------------------------------------------------------------- bfloat16 <-> float32, exact

_BF16_QUIET_NAN = np.int32(0x7FC0)


@njit(forceinline=True, error_model="numpy")
def bf16_bits_to_f32(u):
    """The float32 of the bfloat16 whose bits are `u` (uint16): its bits are float32's top half."""
    return bits_f32(np.int32(u) << 16)


@njit(forceinline=True, error_model="numpy")
def f32_to_bf16_bits(x):
    """The bits (uint16) of the bfloat16 nearest to float32 `x`, ties to even (subnormals too; overflow
    to inf); a nan becomes the quiet nan 0x7FC0 with x's sign, as ml_dtypes' conversion gives."""
    bits = f32_bits(x)
    rounded = np.int32((np.int32(bits + np.int32(0x7FFF) + ((bits >> 16) & 1)) >> 16) & 0xFFFF)
    nan = np.int32(_BF16_QUIET_NAN | ((bits >> 16) & 0x8000))
    return np.uint16(nan if (bits & 0x7FFFFFFF) > _F32_INF_BITS else rounded)


# ---------------------------------------------------------------- float4_e2m1fn <-> float32, exact

@njit(forceinline=True, error_model="numpy")
def f4e2m1_bits_to_f32(u):
    """The float32 of the float4_e2m1fn whose bits are the low four of `u` (uint8): exponent e and
    mantissa m give m / 2 when e is 0, else (1 + m / 2) * 2**(e - 1); bit 3 is the sign."""
    b = np.int32(u)
    e = (b >> 1) & 3
    m = f32(b & 1)
    magnitude = m * f32(0.5) if e == 0 else (f32(1.0) + m * f32(0.5)) * f32(np.int32(1) << (e - 1))
    return -magnitude if b & 8 else magnitude


@njit(forceinline=True, error_model="numpy")
def f32_to_f4e2m1_bits(x):
    """The bits (uint8) of the float4_e2m1fn nearest to float32 `x`, ties to the even mantissa; beyond +-6
    (the infinities too) +-6; a NaN a zero of the opposite sign: ml_dtypes' conversion (the magnitude's
    code counts the midpoints it passes, ir/ops/conversions.py's FLOAT4_MIDPOINTS)."""
    a = abs(x)
    code = (np.int32(a > f32(0.25)) + np.int32(a >= f32(0.75)) + np.int32(a > f32(1.25)) + np.int32(a >= f32(1.75))
            + np.int32(a > f32(2.5)) + np.int32(a >= f32(3.5)) + np.int32(a > f32(5.0)))
    negative = (f32_bits(x) < 0) != (x != x)
    return np.uint8(code | 8) if negative else np.uint8(code)
