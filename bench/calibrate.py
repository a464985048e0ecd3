"""Calibrate the timing figures of kernels/aicore.py (the cost model's inputs) on this machine.

    python bench/calibrate.py [--json bench/results/calibration.json]

Each figure is measured through the real backend (kernels.lower on small generated graphs; the parallel
launch with a bare numba prange), as the minimum over repeated calls, and printed beside the value
aicore.py holds. Copy the measured values into aicore.py by hand when they disagree by more than the
machine's noise (shared machines: ±20%, more under load; the load average is printed).

    launch            (11 single-op kernels - 1) / 10, tiny inputs, one block
    parallel launch   an empty prange over two items, minus an empty sequential call
    bandwidth         Neg over 1M (cached) and 16M (DRAM) float32 elements: bytes read + written / time
    one-thread share  the cached bandwidth with one block against two
    ops per thread    (17 chained Muls - 1 Mul) over 64K elements, one block: 16 ops per element
    transcendental    (9 chained Exps - 1 Mul) over 64K elements, one block, in Mul-equivalents
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
from numba import njit, prange

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ir.dtypes import DType  # noqa: E402
from ir.graph import Graph, Literal, TensorType  # noqa: E402
from ir.ops import make_node  # noqa: E402
from kernels import aicore  # noqa: E402
from kernels.lower import DeviceConfig, lower  # noqa: E402


def chain(op: str, length: int, elements: int, *, fused: bool) -> Graph:
    """`length` chained `op`s over a float32 vector, as one composite (fused) or one kernel each."""
    (x,) = Graph.with_inputs([TensorType((elements,), DType.float32)])
    nodes, y = [], x
    for _ in range(length):
        if op == "Mul":
            const = make_node("Const", (), {"value": Literal(np.float32(1.0001))})
            nodes.append(const)
            nodes.append(make_node("Mul", (y, const.out)))
        else:
            nodes.append(make_node(op, (y,)))
        y = nodes[-1].out
    graph = Graph([x], nodes, [y])
    if not fused:
        return graph
    from graphkernel.passes.fusion_utils import fuse_groups
    return fuse_groups(graph, [[n for n in nodes if n.op != "Const"]])


def best_time(graph: Graph, core_num: int, repeat: int) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = lower(graph, DeviceConfig(core_num=core_num))
    x = (np.random.default_rng(0).random(graph.inputs[0].shape, dtype=np.float32) * 0.1).astype(np.float32)
    program.run([x])
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        program.run([x])
        times.append(time.perf_counter() - start)
    return min(times)


@njit(parallel=True)
def _empty_parallel(out):
    for i in prange(out.size):
        out[i] = i


@njit
def _empty_sequential(out):
    out[0] = 0


def parallel_launch(repeat: int) -> float:
    out = np.zeros(2, np.int64)
    _empty_parallel(out)
    _empty_sequential(out)
    par, seq = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        _empty_parallel(out)
        par.append(time.perf_counter() - start)
        start = time.perf_counter()
        _empty_sequential(out)
        seq.append(time.perf_counter() - start)
    return max(0.0, float(np.median(par) - np.median(seq)))


def measure(repeat: int) -> dict:
    tiny, small, cached, dram = 8, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024
    one = best_time(chain("Neg", 1, tiny, fused=False), 1, repeat)
    eleven = best_time(chain("Neg", 11, tiny, fused=False), 1, repeat)
    neg_cached_2 = best_time(chain("Neg", 1, cached, fused=False), 2, repeat)
    neg_cached_1 = best_time(chain("Neg", 1, cached, fused=False), 1, repeat)
    neg_dram = best_time(chain("Neg", 1, dram, fused=False), 2, max(3, repeat // 20))
    mul_1 = best_time(chain("Mul", 1, small, fused=True), 1, repeat)
    mul_17 = best_time(chain("Mul", 17, small, fused=True), 1, repeat)
    exp_9 = best_time(chain("Exp", 9, small, fused=True), 1, repeat)
    per_op = max(1e-12, (mul_17 - mul_1) / (16 * small))
    return {
        "LAUNCH_SECONDS": (eleven - one) / 10,
        "PARALLEL_LAUNCH_SECONDS": parallel_launch(repeat),
        "BANDWIDTH_CACHED": 2 * 4 * cached / neg_cached_2,
        "BANDWIDTH_DRAM": 2 * 4 * dram / neg_dram,
        "SINGLE_THREAD_BANDWIDTH_SHARE": neg_cached_2 / neg_cached_1,
        "OPS_PER_SECOND_PER_THREAD": 1.0 / per_op,
        "TRANSCENDENTAL_COST": (exp_9 - mul_1) / (9 * small) / per_op,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--json", help="also write the measured figures to this JSON file")
    args = parser.parse_args(argv)
    measured = measure(args.repeat)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"numba threads {aicore.host_threads()}")
    print(f"{'figure':32s} {'aicore.py':>12s} {'measured':>12s}")
    for name, value in measured.items():
        print(f"{name:32s} {getattr(aicore, name):12.4g} {value:12.4g}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"load_average": os.getloadavg()[0], "figures": measured}, f, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
