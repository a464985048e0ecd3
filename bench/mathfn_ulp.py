"""Exhaustive ulp sweep of kernels.mathfn over all 2**32 float32 bit patterns.

For every float32 x, each function's result is compared with two references:
  exact  - the double-precision libm result (math.exp, ... in float64) rounded to float32, i.e. the
           correctly rounded value except where the double lies within 2**-29 ulp of a float32 midpoint;
  numpy  - numpy's own float32 function (its AVX2/AVX512 loops on this machine); numpy has no erf.
The distance is counted in float32 steps (ordered integer bits, so +0 and -0 are one value); a nan
on one side only is counted as a nan mismatch. Prints per function: max distance to each reference,
where it occurs, and how many results are not exactly the reference. The figures go into the
kernels/mathfn.py docstring and its *_MAX_ULP constants.

    python bench/mathfn_ulp.py [exp log tanh erf f16]  # 5-7 minutes per function on 2 cores

`f16` checks f32_to_f16_bits and f32_round_to_f16 against numpy's astype(float16) for every float32
(expected: 0 mismatches; any nan bits count as equal for a nan input).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernels import mathfn  # noqa: E402

CHUNK = 1 << 24


@njit(inline="always")
def _distance(a, b):
    """Steps between float32 a and b; -1 when exactly one of them is nan."""
    if a != a or b != b:
        return 0 if (a != a) == (b != b) else -1
    ia = np.int64(mathfn.f32_bits(a))
    ib = np.int64(mathfn.f32_bits(b))
    ia = ia if ia >= 0 else -(ia & 0x7FFFFFFF)
    ib = ib if ib >= 0 else -(ib & 0x7FFFFFFF)
    return abs(ia - ib)


BLOCKS = 64


@njit(parallel=True)
def _fill(start, x):
    for i in prange(x.size):
        x[i] = mathfn.bits_f32(np.uint32(start + i))


def _make_sweep(ours, exact64):
    @njit(parallel=True)
    def sweep(x, numpy_ref, stats):
        """Per block b: stats[b, ref] = (max distance, its index, results not equal, nan mismatches)."""
        per_block = x.size // BLOCKS
        for b in prange(BLOCKS):
            for ref in range(2):
                stats[b, ref, :] = 0
            for i in range(b * per_block, (b + 1) * per_block):
                y = ours(x[i])
                for ref in range(2):
                    want = np.float32(exact64(np.float64(x[i]))) if ref == 0 else numpy_ref[i]
                    d = _distance(y, want)
                    if d < 0:
                        stats[b, ref, 3] += 1
                    elif d > 0:
                        stats[b, ref, 2] += 1
                        if d > stats[b, ref, 0]:
                            stats[b, ref, 0] = d
                            stats[b, ref, 1] = i
    return sweep


FUNCTIONS = {   # ours, the float64 libm reference (compiled: no Python exceptions on overflow), numpy's
    "exp": (mathfn.exp_f32, njit(lambda v: math.exp(v)), np.exp),
    "log": (mathfn.log_f32, njit(lambda v: math.log(v)), np.log),
    "tanh": (mathfn.tanh_f32, njit(lambda v: math.tanh(v)), np.tanh),
    "erf": (mathfn.erf_f32, njit(lambda v: math.erf(v)), None),
}


def run(name: str) -> None:
    ours, exact64, numpy_fn = FUNCTIONS[name]
    sweep = _make_sweep(ours, exact64)
    worst = np.zeros((2, 2), np.float64)              # per reference: max distance, x of it
    counts = np.zeros((2, 2), np.int64)               # per reference: not equal, nan mismatches
    x, ref = np.empty(CHUNK, np.float32), np.full(CHUNK, np.nan, np.float32)
    stats = np.empty((BLOCKS, 2, 4), np.int64)
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):
        for start in range(0, 2**32, CHUNK):
            _fill(start, x)
            if numpy_fn:
                numpy_fn(x, out=ref)
            sweep(x, ref, stats)
            counts += stats[:, :, 2:].sum(axis=0)
            for r in range(2):
                b = int(np.argmax(stats[:, r, 0]))
                if stats[b, r, 0] > worst[r, 0]:
                    worst[r] = stats[b, r, 0], x[stats[b, r, 1]]
    print(f"{name}_f32 ({time.perf_counter() - t0:.0f} s)")
    for r, label in enumerate(["exact", "numpy"] if numpy_fn else ["exact"]):
        print(f"  vs {label}: max {worst[r, 0]:.0f} ulp at x={np.float32(worst[r, 1])!r}, "
              f"not equal {counts[r, 0] / 2**32:.4%}, nan mismatches {counts[r, 1]}")


@njit(parallel=True)
def _convert(start, x, bits, rounded):
    per_block = x.size // BLOCKS
    for b in prange(BLOCKS):
        for i in range(b * per_block, (b + 1) * per_block):
            x[i] = mathfn.bits_f32(np.uint32(start + i))
            bits[i] = mathfn.f32_to_f16_bits(x[i])
            rounded[i] = mathfn.f32_round_to_f16(x[i])


def run_f16() -> None:
    x, bits, rounded = np.empty(CHUNK, np.float32), np.empty(CHUNK, np.uint16), np.empty(CHUNK, np.float32)
    bad_bits = bad_rounded = 0
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):
        for start in range(0, 2**32, CHUNK):
            _convert(start, x, bits, rounded)
            half, nan = x.astype(np.float16), np.isnan(x)
            bad_bits += int(((bits != half.view(np.uint16)) & ~nan).sum()
                            + (nan & ~np.isnan(bits.view(np.float16))).sum())
            want = half.astype(np.float32).view(np.uint32)
            bad_rounded += int(((rounded.view(np.uint32) != want) & ~nan).sum() + (nan & ~np.isnan(rounded)).sum())
    print(f"float16 ({time.perf_counter() - t0:.0f} s): mismatches f32_to_f16_bits {bad_bits}, "
          f"f32_round_to_f16 {bad_rounded}")


if __name__ == "__main__":
    for fn_name in sys.argv[1:] or [*FUNCTIONS, "f16"]:
        run_f16() if fn_name == "f16" else run(fn_name)
