"""How close a result must be to the numpy reference (the dtype's tolerance), and how far it is.

    dtype     agrees when, for every element
    float32   |a - e| <= 1e-5 |e| + 1e-6 s        s = max(1, max |e| over the finite expected values)
    float16   |a - e| <= 1e-3 |e| + 1e-3 s
    bfloat16  |a - e| <= 8e-3 |e| + 8e-3 s
    float64   |a - e| <= 1e-12 |e| + 1e-13 s
    others    a == e (integers and bools: exact)

NaN agrees with NaN (whatever its bits); an infinity only with the same infinity. These are the numbers
of tests/tolerance.py, the helper every test asserts with; this module reports rather than asserts
(graphkernel.tools.debug.compare, the benchmarks' verification).

    measure(actual, expected) -> Errors(max_abs, max_rel, max_ulp, ok)

max_abs is the largest |a - e| (inf where a non-finite value is not matched), max_rel the largest
|a - e| / |e| over the nonzero expected values, max_ulp the largest distance in units in the last place:
how many floats of the dtype lie between a and e, counted on the bit patterns mapped to integers in
the floats' order (+0 and -0 are one point). Integer and bool results have no ulp (None).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ir.dtypes import BFLOAT16_NP

# bfloat16: 8e-3 is its epsilon (2**-7) rounded up, as float16's 1e-3 is its 2**-10
RTOL = {np.dtype(np.float16): 1e-3, BFLOAT16_NP: 8e-3, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}
ATOL = {np.dtype(np.float16): 1e-3, BFLOAT16_NP: 8e-3, np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-13}


@dataclass(frozen=True)
class Errors:
    max_abs: float
    max_rel: float
    max_ulp: int | None         # None: no floating-point values compared
    ok: bool                    # within the dtype's tolerance

    @staticmethod
    def worst(errors: list[Errors]) -> Errors:
        """The errors of several results together (a kernel's outputs): the maxima, ok when all are."""
        ulps = [e.max_ulp for e in errors if e.max_ulp is not None]
        return Errors(max((e.max_abs for e in errors), default=0.0), max((e.max_rel for e in errors), default=0.0),
                      max(ulps) if ulps else None, all(e.ok for e in errors))


def tolerance_text(dtype) -> str:
    """The rule for `dtype` in words, for messages: `rtol 1e-05, atol 1e-06 x max(1, max|expected|)`."""
    dtype = np.dtype(dtype)
    if dtype not in RTOL:
        return "exact"
    return f"rtol {RTOL[dtype]:g}, atol {ATOL[dtype]:g} x max(1, max|expected|)"


def ordered_bits(a: np.ndarray) -> np.ndarray:
    """The floats of `a` as int64 in the same order: consecutive floats are consecutive integers,
    -0.0 and +0.0 are both 0, negative floats are negative."""
    signed = np.ascontiguousarray(a).view(f"i{a.itemsize}").astype(np.int64)
    sign_bit = np.int64(-(1 << (8 * a.itemsize - 1)))
    return np.where(signed < 0, sign_bit - np.minimum(signed, 0), signed)


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Elementwise distance in ulps (uint64); 0 where both are NaN."""
    actual, expected = np.asarray(actual).reshape(-1), np.asarray(expected).reshape(-1)
    a, e = ordered_bits(actual), ordered_bits(expected)
    hi, lo = np.maximum(a, e), np.minimum(a, e)
    dist = hi.view(np.uint64) - lo.view(np.uint64)   # exact: hi - lo lies in [0, 2**64)
    return np.where(np.isnan(actual) & np.isnan(expected), np.uint64(0), dist)


def measure(actual, expected) -> Errors:
    """How far `actual` is from `expected` (same shape and dtype) and whether it is within tolerance."""
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape or a.dtype != e.dtype:
        raise ValueError(f"cannot compare {a.dtype}{list(a.shape)} with {e.dtype}{list(e.shape)}")
    a, e = a.reshape(-1), e.reshape(-1)
    if a.size == 0:
        return Errors(0.0, 0.0, 0 if e.dtype in RTOL else None, True)
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    with np.errstate(all="ignore"):
        diff = np.abs(a64 - e64)
        diff[(a64 == e64) | (np.isnan(a64) & np.isnan(e64))] = 0.0   # equal infinities, NaN and NaN
        diff[np.isnan(diff)] = np.inf                                   # NaN against a number
        nonzero = (e64 != 0) & ~np.isnan(e64)
        rel = diff[nonzero] / np.abs(e64[nonzero])                      # inf where diff is
        rel[np.isnan(rel)] = np.inf                                     # inf / inf: -inf for inf
    max_abs, max_rel = float(diff.max()), float(rel.max(initial=0.0))
    if e.dtype not in RTOL:
        return Errors(max_abs, max_rel, None, bool(np.array_equal(a, e)))
    finite = np.isfinite(e64)
    scale = max(1.0, float(np.max(np.abs(e64[finite]), initial=1.0)))
    limit = RTOL[e.dtype] * np.where(finite, np.abs(e64), 0.0) + ATOL[e.dtype] * scale
    return Errors(max_abs, max_rel, int(ulp_distance(a, e).max()), bool(np.all(diff <= limit)))
