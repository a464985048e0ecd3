"""Cast's numpy reference: a numpy conversion, but those to and from the storage dtypes and those from a
float to an integer are written out here (kernels/emitters.py and kernels/mathfn.py compute the same in
a kernel).

    from a storage dtype          its value, exactly: an int8 or uint8 (the sub-byte integers), a
                                  float32 (float4_e2m1fn); then as from that dtype. The value is the
                                  byte's low bits: the bits above are ignored (ml_dtypes ignores them
                                  for the integers; for float4 it reads them, which no writer sets)
    to int4, uint4, int2, uint2   an integer or bool wraps to the type's bits (two's complement for the
                                  signed ones, as a cast between integers does: 200 to int4 is -8); a
                                  float is cast to int32 first (below), then wraps: NaN, the infinities
                                  and floats beyond int32's range give 0 (int32's lowest value has no
                                  low bits set)
    to float4_e2m1fn              the value as float32 (a float64 rounded to it first), rounded to the
                                  nearest of +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, ties to the even mantissa;
                                  beyond +-6, the infinities too, +-6; a NaN, which the type lacks, a zero
                                  of the opposite sign

    from a float to int8, int16,  the value truncated toward zero if it is within int32's range, else (NaN,
    uint8, uint16 or int32        the infinities, beyond) int32's lowest; then wrapped to the type's bits
                                  (300.0 to int8 is 44, -6.0 to uint8 is 250, 3e9 to int16 is 0)
    from a float to int64 or      truncated if within int64's range, else (NaN, the infinities, beyond)
    uint32                        int64's lowest; then wrapped to the type's bits (-6.0 to uint32 is
                                  4294967290, 5e9 is 705032704, NaN is 0)
    from a float to uint64        truncated if within [0, 2**64); at or beyond 2**64, +inf too, 0; below
                                  0, truncated and wrapped through int64 as to int64 (NaN, -inf and below
                                  -2**63: 2**63)

The conversions from a float to an integer are C's conversions on x86 (through a 32- or 64-bit
conversion that gives the lowest value when it fails), written out. C leaves a value outside the type's
range undefined: numpy's own results there depend on the array's length (float64 -2**32 to uint32 gave
0 in an array of 10 and 2**31 in one of 30, x86, numpy 2.x) and numba's conversions (LLVM's fptosi and
fptoui) give others, vectorized loops others again, so neither is the rule. Both targets compute the
rules above; numpy's astype agrees with them wherever the value is in the type's range.

The storage dtypes' conversions are ml_dtypes' conversions on x86, which onnx.reference's Cast is and
the ONNX backend node tests hold (to an integer through a C conversion to int32, whose out-of-range
result 0x80000000 has no low bits set; to float4 through float32). ONNX leaves an out-of-range float to
an integer undefined, and its float4 note sends a NaN to +6, where its reference and tests give a zero.
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType, FLOAT4_NP, as_dtype, is_float_array, widened

INT32_RANGE = (-2.0 ** 31, 2.0 ** 31 - 1)   # a float converts to a narrow integer through int32
INT64_LOW = -2.0 ** 63                      # int64's range in floats: [INT64_LOW, -INT64_LOW)
THROUGH_INT32 = (DType.int8, DType.int16, DType.uint8, DType.uint16, DType.int32)
# the midpoints between float4_e2m1fn's magnitudes, and whether a tie there goes up (to an even mantissa)
FLOAT4_MIDPOINTS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True),
                    (5.0, False))


def cast_array(x: np.ndarray, dtype: DType) -> np.ndarray:
    """`x` converted to `dtype` as Cast converts it."""
    src = as_dtype(x.dtype)
    if src == DType.float4_e2m1fn:   # its value in float32, exactly, from the low four bits
        x = (x.view(np.uint8) & 15).view(FLOAT4_NP).astype(np.float32)
    elif not src.computes:   # its value in int8 or uint8 (ml_dtypes reads the low bits)
        x = x.astype(np.uint8 if src.is_unsigned else np.int8)
    if dtype == DType.float4_e2m1fn:
        return to_float4(x)
    if not dtype.computes:
        return to_stored(x, dtype)
    if is_float_array(x) and dtype.is_int:
        return to_integer(x, dtype)
    return x.astype(dtype.np)


def to_integer(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Float `x` cast to the integer `dtype` (the module's rule), exactly, on any machine."""
    w = widened(x).astype(np.float64)
    with np.errstate(invalid="ignore"):
        if dtype in THROUGH_INT32:
            inside = (w >= INT32_RANGE[0]) & (w <= INT32_RANGE[1])
            return np.where(inside, np.trunc(w), INT32_RANGE[0]).astype(np.int32).astype(dtype.np)
        inside = (w >= INT64_LOW) & (w < -INT64_LOW)
        through = np.where(inside, np.trunc(w), INT64_LOW).astype(np.int64)
        if dtype != DType.uint64:
            return through.astype(dtype.np)
        out = through.astype(np.uint64)
        high = (w >= -INT64_LOW) & (w < 2.0 ** 64)
        out[high] = (np.trunc(w[high]) - -INT64_LOW).astype(np.int64).astype(np.uint64) + np.uint64(2 ** 63)
        out[w >= 2.0 ** 64] = 0
        return out


def to_stored(x: np.ndarray, dtype: DType) -> np.ndarray:
    """`x` cast to a sub-byte integer dtype (the module's rule)."""
    v = (to_integer(x, DType.int32) if is_float_array(x) else x).astype(np.int64) & ((1 << dtype.bits) - 1)
    if not dtype.is_unsigned:
        v = v - ((v >> (dtype.bits - 1)) << dtype.bits)   # the top bit set: the negative value
    return v.astype(np.int8).astype(dtype.np)


def to_float4(x: np.ndarray) -> np.ndarray:
    """`x` cast to float4_e2m1fn (the module's rule): the code of the magnitude is how many midpoints it
    passes (a tie passes the ones whose upper neighbour has an even mantissa), the sign bit above it."""
    w = widened(x).astype(np.float32)
    a = np.abs(w)
    code = sum(((a >= m) if up else (a > m)).astype(np.uint8) for m, up in FLOAT4_MIDPOINTS)
    negative = np.signbit(w) != np.isnan(w)
    return (code | (negative.astype(np.uint8) << 3)).view(FLOAT4_NP)
