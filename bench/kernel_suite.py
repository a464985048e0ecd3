"""Kernel suite: W1..W6 fused (one composite), unfused (one kernel per primitive) and numpy, at three
sizes, as fractions of the bandwidth bound (minimal bytes / a STREAM-like copy timed in the same run).

    python bench/kernel_suite.py [--sizes 256,4096,16384] [--repeat N]
    -> bench/results/kernel_suite.json and a table on stdout

Run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset. `--threads 1` measures one thread against a
one-thread copy: on a loaded shared machine a parallel launch waits for its second thread to be
scheduled (whole milliseconds), which the one-thread figures do not suffer. The lowering time of
each program is recorded beside its timings (`*_lower_s`: compile or cache load).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
from numba import njit, prange

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kernels import DeviceConfig, lower  # noqa: E402
from tests.kernel_graphs import Builder, fused  # noqa: E402

COLS = 1024
GELU_C, SQRT_2_OVER_PI = 0.044715, 0.7978845608028654


def w1(rows):
    b = Builder()
    x = b.input((rows, COLS))
    return b.graph(b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0))), lambda x: x * np.float32(2) + np.float32(1)


def w2(rows):
    b = Builder()
    x = b.input((rows, COLS))
    y = b.op("Pow", b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0)), b.const(3.0))
    return b.graph(y), lambda x: (x * np.float32(2) + np.float32(1)) ** np.float32(3)


def w3(rows):
    b = Builder()
    x, bias = b.input((rows, COLS)), b.input((COLS,))
    h = b.op("Add", x, bias)
    cube = b.op("Mul", b.op("Mul", h, h), h)
    inner = b.op("Mul", b.op("Add", h, b.op("Mul", cube, b.const(GELU_C))), b.const(SQRT_2_OVER_PI))
    y = b.op("Mul", b.op("Mul", h, b.const(0.5)), b.op("Add", b.op("Tanh", inner), b.const(1.0)))

    def ref(x, bias):
        h = x + bias
        return np.float32(0.5) * h * (np.float32(1) + np.tanh(np.float32(SQRT_2_OVER_PI) * (h + np.float32(GELU_C) * h * h * h)))
    return b.graph(y), ref


def w4(rows):
    b = Builder()
    x, gamma, beta = b.input((rows, COLS)), b.input((COLS,)), b.input((COLS,))
    inv_n = b.const(1.0 / COLS)
    mean = b.op("Mul", b.op("ReduceSum", x, axis=(1,), keep_dims=True), inv_n)
    c = b.op("Sub", x, mean)
    var = b.op("Mul", b.op("ReduceSum", b.op("Mul", c, c), axis=(1,), keep_dims=True), inv_n)
    y = b.op("Add", b.op("Mul", b.op("Mul", c, b.op("Rsqrt", b.op("Add", var, b.const(1e-5)))), gamma), beta)

    def ref(x, gamma, beta):
        m = x.mean(axis=1, keepdims=True)
        c = x - m
        v = (c * c).mean(axis=1, keepdims=True)
        return c / np.sqrt(v + np.float32(1e-5)) * gamma + beta
    return b.graph(y), ref


def w5(rows):
    b = Builder()
    x = b.input((rows * COLS // 128, 128))
    e = b.op("Exp", b.op("Sub", x, b.op("ReduceMax", x, axis=(1,), keep_dims=True)))
    y = b.op("RealDiv", e, b.op("ReduceSum", e, axis=(1,), keep_dims=True))

    def ref(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return b.graph(y), ref


def w6(rows):
    b = Builder()
    x = b.input((rows, COLS))
    return b.graph(b.op("ReduceSum", b.op("Mul", x, x), axis=())), lambda x: np.sum(x * x)


WORKLOADS = {"W1 x*2+1": w1, "W2 (x*2+1)**3": w2, "W3 bias+GeLU": w3, "W4 LayerNorm(1024)": w4,
             "W5 Softmax(128)": w5, "W6 sum of squares": w6}


@njit(parallel=True)
def _copy(src, dst, blocks):
    n = src.size
    for b in prange(blocks):
        s, e = b * n // blocks, (b + 1) * n // blocks
        d, t = dst[s:e], src[s:e]
        for i in range(e - s):
            d[i] = t[i]


def median_seconds(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def minimal_bytes(graph) -> int:
    return sum(v.type.nbytes for v in graph.inputs) + sum(v.type.nbytes for v in graph.outputs)


def run(sizes, repeat) -> dict:
    results = {"machine": platform.processor() or platform.machine(), "numba_threads": None, "rows": {}}
    import numba
    results["numba_threads"] = numba.get_num_threads()
    cfg = DeviceConfig()
    for rows in sizes:
        n = rows * COLS
        src, dst = np.random.rand(n).astype(np.float32), np.empty(n, np.float32)
        copy_s = median_seconds(lambda: _copy(src, dst, 64), repeat)
        copy_bw = 2 * 4 * n / copy_s
        row = {"copy_GBps": copy_bw / 1e9, "workloads": {}}
        for label, make in WORKLOADS.items():
            graph, ref = make(rows)
            rng = np.random.default_rng(0)
            arrays = [rng.standard_normal(v.shape).astype(np.float32) for v in graph.inputs]
            bound = minimal_bytes(graph) / copy_bw
            entry = {"bound_ms": bound * 1e3}
            for mode, g in (("fused", fused(graph)), ("unfused", graph)):
                t = time.perf_counter()
                program = lower(g, cfg)
                entry[f"{mode}_lower_s"] = time.perf_counter() - t
                entry[f"{mode}_kernels"] = len(program.kernels)
                entry[f"{mode}_ms"] = median_seconds(lambda: program.run(arrays), repeat) * 1e3
            entry["numpy_ms"] = median_seconds(lambda: ref(*arrays), repeat) * 1e3
            for mode in ("fused", "unfused", "numpy"):
                entry[f"{mode}_of_bound"] = entry["bound_ms"] / entry[f"{mode}_ms"]
            entry["fused_speedup_vs_unfused"] = entry["unfused_ms"] / entry["fused_ms"]
            row["workloads"][label] = entry
            print(f"{rows:>6}x{COLS} {label:<20} fused {entry['fused_ms']:8.3f} ms ({entry['fused_of_bound']:4.0%})"
                  f"  unfused {entry['unfused_ms']:8.3f} ms ({entry['unfused_of_bound']:4.0%})"
                  f"  numpy {entry['numpy_ms']:8.3f} ms ({entry['numpy_of_bound']:4.0%})"
                  f"  fused/unfused x{entry['fused_speedup_vs_unfused']:.2f}", flush=True)
        results["rows"][str(rows)] = row
    return results


def seed_net_call_us(repeat: int = 20000) -> float:
    graph, _ = w2(4)
    b = Builder()
    x = b.input((4, 4))
    g = fused(b.graph(b.op("Pow", b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0)), b.const(3.0))))
    program = lower(g, DeviceConfig())
    a = np.random.randn(4, 4).astype(np.float32)
    for _ in range(100):
        program.run([a])
    t = time.perf_counter()
    for _ in range(repeat):
        program.run([a])
    return (time.perf_counter() - t) / repeat * 1e6


COMPILE_SCRIPT = """
import json, time
t0 = time.perf_counter()
from kernels import CACHE_STATS, DeviceConfig, lower
from tests.kernel_graphs import Builder, fused
b = Builder()
x = b.input((4, 4))
g = fused(b.graph(b.op("Pow", b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0)), b.const(3.0))))
t = time.perf_counter()
lower(g, DeviceConfig(cache_dir=%r))
print(json.dumps({"lower_s": time.perf_counter() - t, "stats": dict(CACHE_STATS)}))
"""


def compile_times() -> dict:
    """The seed net's lowering in a fresh process: cold (empty cache dir), then from the disk cache."""
    import subprocess
    import tempfile
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        for label in ("cold", "disk_cache"):
            proc = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT % cache], cwd=root, capture_output=True,
                                  text=True, env={**os.environ, "PYTHONPATH": root}, check=True)
            out[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="256,4096,16384")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--threads", type=int, default=0, help="numba threads (0: numba's default)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                 "kernel_suite.json"))
    args = p.parse_args(argv)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            print(f"warning: {var} is set; the figures may not compare with ANCHORS.md")
    if args.threads:
        import numba
        numba.set_num_threads(args.threads)
    results = run([int(s) for s in args.sizes.split(",")], args.repeat)
    results["load_average"] = os.getloadavg()
    results["seed_net_4x4_call_us"] = seed_net_call_us()
    print(f"seed net 4x4 call: {results['seed_net_4x4_call_us']:.2f} us")
    results["seed_net_compile"] = compile_times()
    print("seed net lowering: cold {cold[lower_s]:.3f} s, from the disk cache {disk_cache[lower_s]:.3f} s".format(
        **results["seed_net_compile"]))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
