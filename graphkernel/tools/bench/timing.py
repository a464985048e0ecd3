"""How the benchmark takes times: interleaved rounds, medians with the interquartile range, per-kernel
profiles through the executor's hook, the copy that bounds a memory-bound kernel, a progress line.

    warm-up   every implementation called `warmup` times (first-call costs: output buffers, arenas)
    rounds    round r runs every implementation in turn, the order rotated by r: it waits while the
              previous implementation's threads still spin (Impl.spins_s: ONNX Runtime's pool kept a
              core ~50 ms after a run), makes untimed calls for SETTLE_S (at least one: sleeping
              workers wake, the clock ramps up), then `per_round` timed calls. Each side is timed in
              its steady state, and drift of a shared machine hits every side alike.
    figures   median and the interquartile range (q25, q75) of all timed calls, and the minimum
              (the call least disturbed by other processes), in seconds
"""
from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

OPAQUE_OPS = ("MatMul", "BatchMatMul")


SETTLE_S = 0.05   # untimed calls before an implementation's timed ones: after the wait below, a parallel
                  # launch's first calls took 0.6-0.9 ms against 0.26 back to back (256x1024 Softmax)


@dataclass
class Impl:
    """One way of running a workload: `call()` runs a step and returns its result."""
    name: str
    call: Callable[[], object]
    before: Callable[[], None] = lambda: None   # e.g. set the context this implementation runs under
    spins_s: float = 0.0   # how long its threads keep spinning on a core after a call: the next one waits


def summary(times: list[float]) -> dict:
    q25, q50, q75 = np.percentile(times, [25, 50, 75])
    return {"median_s": float(q50), "q25_s": float(q25), "q75_s": float(q75), "min_s": float(min(times)),
            "calls": len(times)}


def estimate_call(impl: Impl, warmup: int) -> float:
    """Warm up `impl` and return the time of its last warm-up call."""
    impl.before()
    t = 0.0
    for _ in range(max(1, warmup)):
        t0 = time.perf_counter()
        impl.call()
        t = time.perf_counter() - t0
    return t


def interleaved(impls: list[Impl], rounds: int, per_round: int, tick=None) -> dict[str, list[float]]:
    """Timed calls of every implementation over `rounds` interleaved rounds."""
    times: dict[str, list[float]] = {impl.name: [] for impl in impls}
    previous = None
    for r in range(rounds):
        for k in range(len(impls)):
            impl = impls[(k + r) % len(impls)]
            if previous is not None and previous is not impl:
                time.sleep(previous.spins_s)
            impl.before()
            settle(impl)
            previous = impl
            for _ in range(per_round):
                t0 = time.perf_counter()
                impl.call()
                times[impl.name].append(time.perf_counter() - t0)
        if tick is not None:
            tick(f"round {r + 1}/{rounds}")
    return times


def settle(impl: Impl, seconds: float = SETTLE_S) -> None:
    """Untimed calls of `impl` for `seconds`, at least one."""
    end = time.perf_counter() + seconds
    impl.call()
    while time.perf_counter() < end:
        impl.call()


@dataclass
class StepProfile:
    """The executor's profiler hook: `record(kernel_info, seconds)` for each kernel call of a step."""
    kernels: dict = field(default_factory=lambda: defaultdict(float))
    infos: dict = field(default_factory=dict)

    def record(self, info, seconds: float) -> None:
        self.kernels[info.name] += seconds
        self.infos[info.name] = info

    def opaque_s(self) -> float:
        return sum(t for name, t in self.kernels.items() if is_opaque(self.infos[name]))

    def total_s(self) -> float:
        return sum(self.kernels.values())

    def phase_s(self, phase: str) -> float:
        return sum(t for name, t in self.kernels.items() if self.infos[name].phase == phase)


def is_opaque(info) -> bool:
    return any(op in OPAQUE_OPS for op in info.op_types)


def profile(programs: dict, calls: int, top: int = 10) -> dict[str, dict]:
    """Per-kernel times of `calls` steps of each {name: (kernels.Program, Impl)}, the steps of the
    programs interleaved: per program, the medians per step of the time in all kernels, in opaque (MatMul)
    kernels and outside them, and the top kernels by time."""
    steps: dict[str, list[StepProfile]] = {name: [] for name in programs}
    for _ in range(calls):
        for name, (program, impl) in programs.items():
            impl.before()
            impl.call()     # settle, as in the timed rounds
            prof = StepProfile()
            program.profiler = prof
            try:
                impl.call()
            finally:
                program.profiler = None
            steps[name].append(prof)
    return {name: _profile_summary(profs, top) for name, profs in steps.items()}


def _profile_summary(steps: list[StepProfile], top: int) -> dict:
    per_kernel: dict[str, list[float]] = defaultdict(list)
    for prof in steps:
        for name, t in prof.kernels.items():
            per_kernel[name].append(t)
    infos = steps[0].infos
    ranked = sorted(per_kernel, key=lambda n: -statistics.median(per_kernel[n]))
    total = statistics.median(p.total_s() for p in steps)
    phases = sorted({info.phase for info in infos.values()})
    optimizer = [info for info in infos.values() if info.phase == "optimizer"]
    return {
        "calls": len(steps),
        "phase_s": {ph: statistics.median(p.phase_s(ph) for p in steps) for ph in phases},
        # the bytes the optimizer's kernels must move: every buffer they read and write, once
        "optimizer_bytes": sum(t.nbytes for info in optimizer for t in info.inputs + info.outputs),
        "kernels_s": total,
        "opaque_s": statistics.median(p.opaque_s() for p in steps),
        "outside_opaque_s": statistics.median(p.total_s() - p.opaque_s() for p in steps),
        "top": [{"name": n, "op_types": list(infos[n].op_types), "variant": infos[n].variant,
                 "block_dim": infos[n].block_dim, "opaque": is_opaque(infos[n]),
                 "s": statistics.median(per_kernel[n]),
                 "share": statistics.median(per_kernel[n]) / total if total else 0.0}
                for n in ranked[:top]],
    }


_copy_kernel = None


def copy_impl(elements: int) -> Impl:
    """A parallel float32 copy of `elements` into a preallocated output (numba, as bench/calibrate.py
    measures the bandwidth), timed in the same interleaved rounds as a workload: the bound of a memory-bound kernel
    is its minimal bytes / the bandwidth this copy reaches (2 * 4 * elements bytes per call)."""
    global _copy_kernel
    if _copy_kernel is None:
        from numba import njit, prange

        @njit(parallel=True, cache=False)
        def copy(src, dst, blocks):
            n = src.size
            for b in prange(blocks):
                lo, hi = b * n // blocks, (b + 1) * n // blocks
                s, d = src[lo:hi], dst[lo:hi]
                for i in range(hi - lo):  # from 0 over a slice: `range(lo, hi)` does not vectorize
                    d[i] = s[i]
        _copy_kernel = copy
    src = np.random.default_rng(0).random(elements, np.float32)
    dst = np.empty_like(src)
    return Impl("copy", lambda: _copy_kernel(src, dst, 64))


def stream_impl(elements: int, threads: int | None = None) -> Impl:
    """A float32 copy of `elements` through libc's memmove, one contiguous share per thread (ctypes
    releases the GIL): for large sizes libc streams the destination with non-temporal stores, which
    skip the read of each destination line a plain store loop pays, so it reaches nearer what the
    memory gives than `copy_impl` (ONNX Runtime's Softmax beat that copy). The bound takes the faster."""
    import ctypes
    from concurrent.futures import ThreadPoolExecutor
    if threads is None:
        import numba
        threads = numba.get_num_threads()
    src = np.random.default_rng(1).random(elements, np.float32)
    dst = np.empty_like(src)
    cuts = [elements * k // threads for k in range(threads + 1)]
    parts = [(dst.ctypes.data + 4 * lo, src.ctypes.data + 4 * lo, 4 * (hi - lo)) for lo, hi in zip(cuts, cuts[1:])]
    pool = ThreadPoolExecutor(max(1, threads - 1))

    def call():
        waits = [pool.submit(ctypes.memmove, *part) for part in parts[1:]]
        ctypes.memmove(*parts[0])
        for w in waits:
            w.result()
        return dst
    call.src = src
    return Impl("stream", call)


class Progress:
    """A plain-text progress line on stderr: `[ 3/26] 0:42 W3 bias+GeLU 4096x1024: round 4/9`."""

    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.total, self.done, self.enabled = total, 0, enabled
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()
        self.label = ""
        self.tty = getattr(self.stream, "isatty", lambda: False)()

    def begin(self, label: str) -> None:
        self.label = label
        self.show("start")

    def show(self, phase: str) -> None:
        if not self.enabled:
            return
        elapsed = int(time.perf_counter() - self.start)
        line = f"[{self.done + 1:>2}/{self.total}] {elapsed // 60}:{elapsed % 60:02d} {self.label}: {phase}"
        if self.tty:
            self.stream.write("\r" + line[:119].ljust(119))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def end(self) -> None:
        self.done += 1
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
