"""Speed of kernels.mathfn in a numba loop, against libm (math.*) in the same loop and numpy.

Each function runs over 16M float32 elements (64 MB in, 64 MB out, preallocated) in a sequential
numba loop; the median of several runs is printed in ns per element, with the ratio to ours, and
whether the compiled loop is vectorized (256/512-bit instructions in it, no call left). A parallel
(prange over blocks, all threads) run of ours and a plain copy loop show where memory bandwidth caps it.

    python bench/mathfn_bench.py

Measured 2026-11-22 (2-core AMD Zen4 VM, AVX2, numba 0.68; shared and noisy, +-20% run to run),
ns per element; prange = 2 threads over 64 blocks:
    copy: 0.49 sequential, 0.41 parallel
    function  ours  libm  numpy  libm/ours numpy/ours  prange  vectorized
    exp_f32   0.80  5.11   2.78        6.4        3.5    0.50  yes (54 ymm instructions)
    log_f32   0.90  5.90   2.65        6.6        3.0    0.66  yes (73)
    tanh_f32  1.31  28.0   3.37       21.4        2.6    0.88  yes (92)
    erf_f32   1.58  23.5      -       14.9          -    1.11  yes (132)
    f32->f16  0.46     -   5.06          -       11.0       -  yes (30)
    f16->f32  0.46     -   2.96          -        6.4       -  yes (22)
    round f16 0.57 (the two conversions composed: 0.67)     yes
On a loaded machine (other sessions, load average 2-5) the prange column fell to one-thread speed.
"""
from __future__ import annotations

import math
import re
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernels import mathfn  # noqa: E402

N = 1 << 24
REPEATS = 7


def sequential(fn):
    @njit
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])
    return loop


def parallel(fn, blocks=64):
    """prange over blocks, each a loop from 0 over its slice (a prange loop over elements runs from s
    to e in each thread, keeps wrap-around checks and does not vectorize)."""
    @njit(parallel=True)
    def loop(x, out):
        per_block = (x.size + blocks - 1) // blocks
        for b in prange(blocks):
            xs, os = x[b * per_block:(b + 1) * per_block], out[b * per_block:(b + 1) * per_block]
            for i in range(xs.size):
                os[i] = fn(xs[i])
    return loop


@njit(inline="always")
def _copy(v):
    return v


@njit(inline="always")
def _round_by_conversions(v):
    return mathfn.f16_bits_to_f32(mathfn.f32_to_f16_bits(v))


def median_ns(call, *args) -> float:
    call(*args)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / N * 1e9


def vectorized(loop) -> str:
    asm = loop.inspect_asm(loop.signatures[0]).split(".Lfunc_end0")[0]
    wide = len(re.findall(r"\bv\w+\s[^\n]*%[yz]mm", asm))
    calls = "7kernels6mathfn" in asm
    return f"yes ({wide} ymm/zmm instructions)" if wide >= 8 and not calls else f"no ({wide} wide, call={calls})"


FUNCTIONS = {   # ours, libm through numba, numpy (or None), input range
    "exp": (mathfn.exp_f32, njit(inline="always")(lambda v: math.exp(v)), np.exp, (-80.0, 80.0)),
    "log": (mathfn.log_f32, njit(inline="always")(lambda v: math.log(v)), np.log, (1e-30, 1e30)),
    "tanh": (mathfn.tanh_f32, njit(inline="always")(lambda v: math.tanh(v)), np.tanh, (-10.0, 10.0)),
    "erf": (mathfn.erf_f32, njit(inline="always")(lambda v: math.erf(v)), None, (-5.0, 5.0)),
}


def main() -> None:
    rng = np.random.default_rng(0)
    out = np.empty(N, np.float32)
    base = rng.random(N, dtype=np.float32)
    copy_seq = median_ns(sequential(_copy), base, out)
    copy_par = median_ns(parallel(_copy), base, out)
    print(f"{N} float32 elements; copy: {copy_seq:.2f} ns/element sequential, {copy_par:.2f} parallel\n")
    print(f"{'function':10}{'ours':>8}{'libm':>8}{'numpy':>8}{'libm/ours':>11}{'numpy/ours':>12}"
          f"{'ours, prange':>14}  vectorized")
    for name, (ours, libm, numpy_fn, (lo, hi)) in FUNCTIONS.items():
        x = (lo + (hi - lo) * base).astype(np.float32) if name != "log" else \
            np.exp(rng.uniform(np.log(lo), np.log(hi), N)).astype(np.float32)
        loop = sequential(ours)
        t_ours = median_ns(loop, x, out)
        t_libm = median_ns(sequential(libm), x, out)
        t_par = median_ns(parallel(ours), x, out)
        t_np = median_ns(lambda a, o: numpy_fn(a, out=o), x, out) if numpy_fn else math.nan
        print(f"{name + '_f32':10}{t_ours:8.2f}{t_libm:8.2f}{t_np:8.2f}{t_libm / t_ours:11.1f}"
              f"{t_np / t_ours:12.1f}{t_par:14.2f}  {vectorized(loop)}")
    bits = np.empty(N, np.uint16)
    x = rng.standard_normal(N).astype(np.float32)
    down = sequential(mathfn.f32_to_f16_bits)
    t_down = median_ns(down, x, bits)
    t_down_np = median_ns(lambda a, o: o.view(np.float16).__setitem__(slice(None), a), x, bits)
    up = sequential(mathfn.f16_bits_to_f32)
    t_up = median_ns(up, bits, out)
    t_up_np = median_ns(lambda b, o: o.__setitem__(slice(None), b.view(np.float16)), bits, out)
    print(f"\n{'f32->f16':10}{t_down:8.2f}{'':>8}{t_down_np:8.2f}{'':>11}{t_down_np / t_down:12.1f}{'':>14}"
          f"  {vectorized(down)}")
    print(f"{'f16->f32':10}{t_up:8.2f}{'':>8}{t_up_np:8.2f}{'':>11}{t_up_np / t_up:12.1f}{'':>14}"
          f"  {vectorized(up)}")
    rnd = sequential(mathfn.f32_round_to_f16)
    t_rnd = median_ns(rnd, x, out)
    t_two = median_ns(sequential(_round_by_conversions), x, out)
    print(f"{'round f16':10}{t_rnd:8.2f}  (f16_bits_to_f32(f32_to_f16_bits(x)): {t_two:.2f})"
          f"{'':>14}  {vectorized(rnd)}")


if __name__ == "__main__":
    main()
