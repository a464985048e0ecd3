"""kernels.mathfn: ulp bounds on a dense float32 sweep, special values, exact float16 and bfloat16 conversions,
and that a loop calling the functions is inlined and vectorized."""
from __future__ import annotations

import math
import platform
import re

import ml_dtypes
import numpy as np
import pytest
from numba import njit

from kernels import mathfn

# every 1021st float32 bit pattern (4.2M values: both signs, subnormals, inf, nan) plus the edges
_STRIDE_SWEEP = np.arange(0, 2**32, 1021, dtype=np.uint64).astype(np.uint32).view(np.float32)
_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38,
                   88.72283, 88.72284, -87.33654, -103.27893, -103.97208, -103.97209, -104.0,
                   0.625, 0.62499994, 1.0, 0.99999994, 3.9375, 3.9374998, 9.010913, 0.34657359,
                   -0.34657359, 0.70710677, 1.4142135, 3.4028235e38, -3.4028235e38,
                   89.0, 89.00001, 88.99999, -104.00001, -103.99999, -np.nan, -1e-30, 1e-30,
                   -176.0, -176.00002, -175.99998, -1e4, -3e38], np.float32)
SWEEP = np.concatenate([_STRIDE_SWEEP, _EDGES])


def _loop(fn, out_dtype):
    @njit
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])

    def apply(x):
        out = np.empty(x.size, out_dtype)
        loop(x, out)
        return out
    apply.loop = loop
    return apply


OURS = {name: _loop(getattr(mathfn, f"{name}_f32"), np.float32) for name in ("exp", "log", "tanh", "erf")}
_LIBM64 = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "erf": np.vectorize(math.erf, otypes=[np.float64])}
BOUNDS = {name: (getattr(mathfn, f"{name.upper()}_F32_MAX_ULP_EXACT"), getattr(mathfn, f"{name.upper()}_F32_MAX_ULP"))
          for name in OURS}                       # (to the correctly rounded value, to numpy's float32)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Float32 steps between a and b (+0 and -0 are one value); nan on both sides is 0, on one side huge."""
    ia, ib = (np.asarray(v, np.float32).view(np.int32).astype(np.int64) for v in (a, b))
    oa, ob = (np.where(i < 0, -(i & 0x7FFFFFFF), i) for i in (ia, ib))
    d = np.abs(oa - ob)
    na, nb = np.isnan(a), np.isnan(b)
    return np.where(na | nb, np.where(na == nb, 0, 2**40), d)


def exact(name: str, x: np.ndarray) -> np.ndarray:
    """The float64 result rounded to float32 (the correctly rounded value but for rare double roundings)."""
    with np.errstate(all="ignore"):
        return _LIBM64[name](x.astype(np.float64)).astype(np.float32)


def test_ulp_distance_counts_steps():
    one = np.float32(1)
    assert ulp_distance(np.array([one]), np.array([np.nextafter(one, np.float32(2))]))[0] == 1
    assert ulp_distance(np.array([1e-45], np.float32), np.array([-1e-45], np.float32))[0] == 2
    assert ulp_distance(np.array([0.0], np.float32), np.array([-0.0], np.float32))[0] == 0
    assert ulp_distance(np.array([np.nan], np.float32), np.array([1.0], np.float32))[0] > 2**32


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "erf"])
def test_dense_sweep_within_documented_ulp(name):
    x = SWEEP if name != "erf" else SWEEP[np.abs(SWEEP) < 4.5]   # erf: 1 beyond 3.92 (checked below)
    got = OURS[name](x)
    max_exact, max_numpy = BOUNDS[name]
    d = ulp_distance(got, exact(name, x))
    assert d.max() <= max_exact, f"{name}_f32({x[np.argmax(d)]!r}) is {d.max()} ulp from exact"
    if name != "erf":                                             # numpy has no erf
        with np.errstate(all="ignore"):
            d = ulp_distance(got, getattr(np, name)(x))
        assert d.max() <= max_numpy, f"{name}_f32({x[np.argmax(d)]!r}) is {d.max()} ulp from numpy"


def _float32_between(hi: float, lo: float) -> np.ndarray:
    """Every float32 from `hi` down to `lo` (both negative), in order."""
    first, last = (np.array([v], np.float32).view(np.uint32)[0] for v in (hi, lo))
    return np.arange(first, last + 1, dtype=np.uint32).view(np.float32)


def test_exp_every_float_of_the_negative_tail():
    """exp's clamp: every float32 from -87 (subnormal results begin near -87.3) to -176 (the clamp, where
    2**n's two halves are exact zeros) within the bounds, and every one from -104 down exactly +0.0;
    below -176, -inf included, +0.0 (a stride: 2**31 values)."""
    x = _float32_between(-87.0, -176.0)
    got = OURS["exp"](x)
    max_exact, max_numpy = BOUNDS["exp"]
    assert ulp_distance(got, exact("exp", x)).max() <= max_exact
    assert ulp_distance(got, np.exp(x)).max() <= max_numpy
    zero = x <= np.float32(-104.0)
    assert (got[zero].view(np.uint32) == 0).all()
    below = np.concatenate([np.arange(np.array([-176.0], np.float32).view(np.uint32)[0] + 1, 0xFF800000, 4099,
                                      dtype=np.uint32).view(np.float32), np.array([-3.4028235e38, -np.inf], np.float32)])
    assert (OURS["exp"](below).view(np.uint32) == 0).all()


def test_erf_saturates_to_one():
    x = np.linspace(3.92, 1e4, 100_001, dtype=np.float32)
    assert (OURS["erf"](x) == 1).all() and (OURS["erf"](-x) == -1).all()


SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-30, -1e-30, 1.0, -1.0,
                     88.72283, 88.72284, 100.0, -103.9, -104.0, -200.0, 9.5, -9.5, 20.0, -20.0,
                     3.4028235e38, -3.4028235e38], np.float32)


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "erf"])
def test_special_values_as_numpy(name):
    got = OURS[name](SPECIALS)
    want = exact(name, SPECIALS)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite_or_inf = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[finite_or_inf]), np.signbit(want[finite_or_inf]))
    exact_here = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1) | (np.abs(want) > 3e38)
    np.testing.assert_array_equal(got[exact_here], want[exact_here])


def test_special_values_spelled_out():
    exp, log, tanh, erf = (OURS[n] for n in ("exp", "log", "tanh", "erf"))
    f = lambda *v: np.array(v, np.float32)  # noqa: E731
    np.testing.assert_array_equal(exp(f(np.inf, -np.inf, 89.0, -104.0, 0.0, -0.0)), f(np.inf, 0, np.inf, 0, 1, 1))
    np.testing.assert_array_equal(log(f(0.0, -0.0, np.inf, 1.0)), f(-np.inf, -np.inf, np.inf, 0))
    assert np.isnan(log(f(-1.0, -np.inf, -1e-45, np.nan))).all()
    for fn in (tanh, erf):
        got = fn(f(-0.0, 0.0, 50.0, -50.0, np.inf, -np.inf))
        np.testing.assert_array_equal(got, f(-0.0, 0.0, 1, -1, 1, -1))
        assert np.signbit(got[0]) and not np.signbit(got[1])
        assert np.isnan(fn(f(np.nan))).all()


# ---------------------------------------------------------------- float16

f16_to_f32 = _loop(mathfn.f16_bits_to_f32, np.float32)
f32_to_f16 = _loop(mathfn.f32_to_f16_bits, np.uint16)
ALL_HALF_BITS = np.arange(65536, dtype=np.uint16)


def test_f16_bits_to_f32_exhaustive():
    got = f16_to_f32(ALL_HALF_BITS)
    want = ALL_HALF_BITS.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def _conversion_cases() -> np.ndarray:
    halves = ALL_HALF_BITS.view(np.float16).astype(np.float32)
    finite = np.unique(halves[np.isfinite(halves)].astype(np.float64))
    midpoints = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)           # exact in float32
    beyond_max = np.float32(65520.0)                                          # midpoint of 65504 and "65536"
    midpoints = np.concatenate([midpoints, [beyond_max, -beyond_max]])
    up, down = np.float32(np.inf), np.float32(-np.inf)
    rng = np.random.default_rng(2026)
    random_bits = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([halves, midpoints, np.nextafter(midpoints, up), np.nextafter(midpoints, down),
                           random_bits, np.array([np.inf, -np.inf, 1e-45, -1e-45, 3e38], np.float32)])


def test_f32_to_f16_bits_round_to_nearest_even():
    x = _conversion_cases()
    got = f32_to_f16(x)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    nan = np.isnan(x)
    assert np.isnan(got[nan].view(np.float16)).all()
    np.testing.assert_array_equal(got[~nan], want[~nan])


round_to_f16 = _loop(mathfn.f32_round_to_f16, np.float32)


def test_f32_round_to_f16_equals_the_two_conversions():
    x = _conversion_cases()
    got = round_to_f16(x)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    nan = np.isnan(x)
    assert np.isnan(got[nan]).all()
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))   # -0.0 kept too


def test_f16_round_trip_is_identity():
    halves = ALL_HALF_BITS[~np.isnan(ALL_HALF_BITS.view(np.float16))]
    np.testing.assert_array_equal(f32_to_f16(f16_to_f32(halves)), halves)


bf16_to_f32 = _loop(mathfn.bf16_bits_to_f32, np.float32)
f32_to_bf16 = _loop(mathfn.f32_to_bf16_bits, np.uint16)


def test_bf16_bits_to_f32_exhaustive():
    got = bf16_to_f32(ALL_HALF_BITS)
    want = ALL_HALF_BITS.view(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))   # nan payloads too


def _bf16_conversion_cases() -> np.ndarray:
    """Every bfloat16, the midpoints between neighbours (ties), one float32 step either side of each,
    a sweep of float32 bit patterns and the edges (the largest finite float32 rounds to inf)."""
    values = ALL_HALF_BITS.view(ml_dtypes.bfloat16).astype(np.float32)
    bits = ALL_HALF_BITS.astype(np.uint32) << 16
    midpoints = (bits | 0x8000).view(np.float32)            # halfway to the next bfloat16 away from zero
    with np.errstate(invalid="ignore"):                     # the nan "midpoints" stay nan
        up, down = np.nextafter(midpoints, np.float32(np.inf)), np.nextafter(midpoints, np.float32(-np.inf))
    return np.concatenate([values, midpoints, up, down, SWEEP])


def test_f32_to_bf16_bits_round_to_nearest_even():
    x = _bf16_conversion_cases()
    with np.errstate(all="ignore"):
        want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(f32_to_bf16(x), want)     # nan: 0x7FC0 with its sign, as ml_dtypes


# ---------------------------------------------------------------- code quality of the calling loop

def _has_avx() -> bool:
    from llvmlite import binding
    return platform.machine() in ("x86_64", "AMD64") and binding.get_host_cpu_features().get("avx", False)


@pytest.mark.skipif(not _has_avx(), reason="reads x86 AVX assembly")
@pytest.mark.parametrize("loop", [*OURS.values(), f16_to_f32, f32_to_f16, round_to_f16],
                         ids=[*OURS, "f16_to_f32", "f32_to_f16", "round_to_f16"])
def test_loop_is_inlined_and_vectorized(loop):
    loop(np.ones(8, np.float32) if loop is not f16_to_f32 else np.ones(8, np.uint16))
    asm = loop.loop.inspect_asm(loop.loop.signatures[0]).split(".Lfunc_end0")[0]   # the loop's own function
    assert "7kernels6mathfn" not in asm, "a kernels.mathfn function is called, not inlined"
    packed = re.findall(r"\bv\w+\s[^\n]*%[yz]mm", asm)
    assert len(packed) >= 8, "the loop body has no 256/512-bit vector arithmetic"
