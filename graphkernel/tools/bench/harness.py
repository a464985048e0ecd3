"""Measure a workload, all in one process: the reference, then fusion off and on on the emulated device,
the numpy baseline and the peers, each verified before it is timed, then timed interleaved.

    reference   the Cell on device_target="CPU", fusion off (ir.interpret, the numpy reference)
    compile     cold:   kernels.cache.clear_memory() and an empty kernel cache directory: numba builds
                        every kernel (measured once per family: kernels are shape-generic)
                cached: clear_memory() again, same directory, a fresh Cell: every kernel comes from
                        numba's disk cache (in-process; what a second process would load)
                first:  without --cold (quick runs): the first compile against the default cache,
                        whatever it holds; `kernels_from` says where each kernel came from
    memory      tracemalloc's peak during the first call after compile: numpy allocations (the
                executor's temporaries arena, the outputs, anything transient); numba allocates none
    verify      every implementation's result against the reference, with the rule of
                graphkernel/settings/tolerance.py (the numbers of tests/tolerance.py): float32
                |a - e| <= 1e-5 |e| + 1e-6 max(1, max|e|)
    time        timing.interleaved: unfused, fused, numpy, jax, onnxruntime in rotating order
    profile     per-kernel times through Program.profiler: time in opaque (MatMul) kernels and outside
"""
from __future__ import annotations

import os
import statistics
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass

import numpy as np

from kernels import CACHE_STATS, threads
from kernels.cache import clear_memory
from graphkernel import Tensor, context
from graphkernel.tools.bench import peers, timing
from graphkernel.tools.bench.timing import Impl
from graphkernel.settings.tolerance import ATOL, RTOL


@dataclass(frozen=True)
class Settings:
    mode: str                                   # full | quick | tiny
    w_rows: tuple[int, ...]                     # W1..W6 at rows x 1024
    seed_shapes: tuple[tuple[int, int], ...]
    bert: dict | None                           # bert() arguments; None: no BERT layer
    models: tuple | None = None                 # workloads.onnx_suite() arguments; None: no ONNX models
    warmup: int = 2
    per_round: int = 3
    min_rounds: int = 3
    max_rounds: int = 15
    budget_s: float = 4.0                       # timed seconds per workload, every implementation together
    profile_calls: int = 5
    cold_compile: bool = True
    peers: bool = True
    progress: bool = True
    threads: int | None = None                  # numba's, ORT's and XLA's threads; None: their defaults


BERT_LARGE = dict(hidden=1024, heads=16, seq=128, batch=2)
MODELS = ((2, 16, 128, 128), (2, 1, 1, 128), (256, 1024))   # BERT-large attention scores, its mask; LN rows
FULL = Settings("full", (256, 4096, 16384), ((4, 4), (4096, 1024)), BERT_LARGE, MODELS)
QUICK = Settings("quick", (256, 4096), ((4, 4), (4096, 1024)), dict(BERT_LARGE, batch=1), MODELS, warmup=1,
                 per_round=1, min_rounds=2, max_rounds=6, budget_s=1.0, profile_calls=2, cold_compile=False)
TINY = Settings("tiny", (8,), ((4, 4),), dict(hidden=64, heads=4, seq=8, batch=2),
                ((1, 2, 8, 8), (1, 1, 1, 8), (8, 64)), warmup=1, per_round=1,
                min_rounds=1, max_rounds=2, budget_s=0.01, profile_calls=1, cold_compile=False)
MODES = {s.mode: s for s in (FULL, QUICK, TINY)}
# The copy bound means something where a launch costs little beside the traffic (docs/benchmarks.md quotes
# it at 16M elements); below 4M elements (16 MB) launch and scheduling costs dominate both the copy and the kernel.
BOUND_MIN_ELEMENTS = 4 * 1024 * 1024


def verify(actual, expected) -> dict:
    """tests/tolerance.py's rule, reporting rather than asserting: ok, max error, worst error/limit."""
    worst, max_err = 0.0, 0.0
    for a, e in zip(actual, expected):
        a, e = np.asarray(a), np.asarray(e)
        if a.size != e.size:
            return {"ok": False, "reason": f"shape {list(a.shape)} != {list(e.shape)}"}
        a = a.reshape(e.shape).astype(e.dtype, copy=False)
        if e.dtype not in RTOL:
            same = bool(np.array_equal(a, e))
            worst = max(worst, 0.0 if same else np.inf)
            continue
        finite = np.isfinite(e)
        scale = max(1.0, float(np.max(np.abs(e[finite]), initial=1.0)))
        err = np.abs(a.astype(np.float64) - e.astype(np.float64))
        err = np.where(np.isnan(a) & np.isnan(e), 0.0, err)
        limit = RTOL[e.dtype] * np.abs(e.astype(np.float64)) + ATOL[e.dtype] * scale
        max_err = max(max_err, float(np.nanmax(err, initial=0.0)))
        worst = max(worst, float(np.nanmax(err / limit, initial=0.0)) if err.size else 0.0)
    return {"ok": bool(worst <= 1.0) and len(actual) == len(expected), "max_abs_err": max_err,
            "worst_err_over_limit": worst}


def arrays_of(result) -> list[np.ndarray]:
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [np.asarray(t.asnumpy() if isinstance(t, Tensor) else t) for t in items]


def first_call(call):
    """(result, tracemalloc peak bytes) of one call."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        result = call()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, peak


def _compile(workload, tensors, ctx: dict, cold_dir: str | None) -> tuple[dict, object, object]:
    """Compile figures, and the Cell and CompiledGraph the timing uses."""
    context.set_context(**ctx)
    figures = {}
    kinds = ("cold", "cached") if cold_dir is not None else ("first",)
    for kind in kinds:
        if kind != "first":
            clear_memory()
        cell = workload.make_cell()
        before = Counter(CACHE_STATS)
        t0 = time.perf_counter()
        compiled = cell.compile(*tensors)
        figures[f"{kind}_s"] = time.perf_counter() - t0
        figures[f"{kind}_kernels_from"] = dict(Counter(CACHE_STATS) - before)
    return figures, cell, compiled


class Runner:
    """Runs workloads one after another in this process; remembers which families were compiled cold."""

    def __init__(self, settings: Settings, scratch_dir: str, progress: timing.Progress, log=print):
        self.settings, self.scratch_dir, self.progress, self.log = settings, scratch_dir, progress, log
        self.cold_families: set[str] = set()
        self.missing: dict[str, str] = {}   # peers not installed: announced once, then skipped quietly

    def measure(self, workload) -> dict:
        s, show = self.settings, self.progress.show
        arrays = workload.inputs(np.random.default_rng(0))
        tensors = [Tensor(a) for a in arrays]
        entry = {"name": workload.name, "family": workload.family, "loadavg": list(os.getloadavg()),
                 "inputs": [f"{a.dtype}{list(a.shape)}" for a in arrays], "impls": {}}
        show("reference")
        context.set_context(device_target="CPU", enable_graph_kernel=False, op_compiler_cache_dir=None)
        reference = arrays_of(workload.make_cell()(*tensors))
        impls, programs = [], {}
        cold_dir = None
        family = workload.kernel_family or workload.family
        if s.cold_compile and family not in self.cold_families:
            self.cold_families.add(family)
            cold_dir = os.path.join(self.scratch_dir, family.replace(" ", "_"))
        for name, fuse in (("unfused", False), ("fused", True)):
            show(f"compile {name}")
            mode_dir = os.path.join(cold_dir, name) if cold_dir else None
            ctx = dict(device_target="Ascend", enable_graph_kernel=fuse, op_compiler_cache_dir=mode_dir)
            figures, cell, compiled = _compile(workload, tensors, ctx, mode_dir)
            result, peak = first_call(lambda: cell(*tensors))
            kernels = compiled.kernels
            entry["impls"][name] = {
                "compile": figures, "peak_bytes": peak, "verify": verify(arrays_of(result), reference),
                "kernels": len(kernels), "opaque_kernels": sum(timing.is_opaque(k) for k in kernels),
                "temp_bytes": getattr(compiled.program, "temp_bytes", None),
                "planned_peak_bytes": getattr(compiled.program, "peak_bytes", None),
                "kernel_list": [f"{k.name}[{'+'.join(k.op_types)}]" for k in kernels],
                "phases": {phase: sum(k.phase == phase for k in kernels)
                           for phase in sorted({k.phase for k in kernels})}}
            impls.append(Impl(name, lambda cell=cell: cell(*tensors),
                              before=lambda ctx=ctx: context.set_context(**ctx)))
            programs[name] = (compiled.program, impls[-1])
        if workload.arrays is not None:
            numpy_impl = Impl("numpy", lambda: workload.arrays(np, workload.consts, *arrays))
            result, peak = first_call(numpy_impl.call)
            entry["impls"]["numpy"] = {"peak_bytes": peak, "verify": verify(arrays_of(result), reference)}
            impls.append(numpy_impl)
        else:
            entry["no_array_code"] = "numpy cannot differentiate: timed fused against unfused only"
        if s.peers and workload.arrays is not None:
            impls += self._peers(workload, arrays, reference, entry)
        elements = max(a.size for a in arrays)
        if workload.bound and elements >= BOUND_MIN_ELEMENTS:   # the bound's copies, in the same rounds
            impls += [timing.copy_impl(elements), timing.stream_impl(elements, self.settings.threads)]
            entry["impls"]["copy"] = {"elements": elements}
            entry["impls"]["stream"] = {"elements": elements}
        self._time(impls, entry)
        programs = {name: p for name, p in programs.items() if p[0] is not None}
        if programs:
            show("profile")
            for name, prof in timing.profile(programs, s.profile_calls).items():
                entry["impls"][name]["profile"] = prof
        self._derive(workload, arrays, reference, entry)
        context.set_context(enable_graph_kernel=False, op_compiler_cache_dir=None)
        return entry

    def _peers(self, workload, arrays, reference, entry) -> list[Impl]:
        out = []
        for name, make in (("jax", peers.jax_impl), ("onnxruntime", peers.ort_impl)):
            if name in self.missing:
                entry["impls"][name] = {"unavailable": self.missing[name]}
                continue
            self.progress.show(f"set up {name}")
            try:
                impl, setup_s = make(workload, arrays, self.settings.threads)
            except peers.NotInstalled as e:
                self.missing[name] = f"not installed ({e})"
                self.log(f"{name}: not installed, skipped ({peers.INSTALL[name]}, or the [bench] extra)")
                entry["impls"][name] = {"unavailable": self.missing[name]}
                continue
            except peers.Unavailable as e:
                entry["impls"][name] = {"unavailable": str(e)}
                continue
            except Exception as e:  # noqa: BLE001 - a peer that fails on this workload is reported, not fatal
                entry["impls"][name] = {"unavailable": f"failed: {type(e).__name__}: {e}"}
                continue
            entry["impls"][name] = {"setup_s": setup_s, "verify": verify(arrays_of(impl.call()), reference)}
            out.append(impl)
        return out

    def _time(self, impls: list[Impl], entry: dict) -> None:
        s, show = self.settings, self.progress.show
        show("warm-up")
        cycle = sum(timing.estimate_call(impl, s.warmup) for impl in impls) * (s.per_round + 1)
        rounds = int(min(s.max_rounds, max(s.min_rounds, s.budget_s // max(cycle, 1e-9))))
        times = timing.interleaved(impls, rounds, s.per_round, tick=show)
        for name, ts in times.items():
            entry["impls"][name]["time"] = timing.summary(ts)

    def _derive(self, workload, arrays, reference, entry) -> None:
        impls = entry["impls"]
        step = {n: d["time"]["median_s"] for n, d in impls.items() if "time" in d and n not in ("copy", "stream")}
        fused = step["fused"]
        entry["ratios"] = {f"fused/{n}": fused / t for n, t in step.items() if n != "fused"}
        best = {n: d["time"]["min_s"] for n, d in impls.items() if "time" in d and n not in ("copy", "stream")}
        entry["ratios_of_minimums"] = {f"fused/{n}": best["fused"] / t for n, t in best.items() if n != "fused"}
        planned = [impls[n].get("planned_peak_bytes") for n in ("fused", "unfused")]
        entry["memory_ok"] = (impls["fused"]["peak_bytes"] <= impls["unfused"]["peak_bytes"]
                              and (None in planned or planned[0] <= planned[1]))
        entry["verified"] = all(impls[n]["verify"]["ok"] for n in ("fused", "unfused", "numpy") if n in impls)
        entry["peers_off_tolerance"] = sorted(n for n in ("jax", "onnxruntime")
                                              if "verify" in impls.get(n, {}) and not impls[n]["verify"]["ok"])
        if workload.opaque:
            entry["opaque"] = {}
            for n in ("fused", "unfused"):
                prof = impls[n].get("profile")
                if prof:
                    entry["opaque"][n] = {"step_s": step[n], "kernels_s": prof["kernels_s"],
                                          "outside_kernels_s": max(0.0, step[n] - prof["kernels_s"]),
                                          "opaque_s": prof["opaque_s"], "outside_opaque_s": prof["outside_opaque_s"]}
            prof = impls["fused"].get("profile") or {}
            seconds = prof.get("phase_s", {}).get("optimizer")
            if seconds:   # the optimizer's fused kernels against a parallel copy of the bytes they move
                nbytes = prof["optimizer_bytes"]
                copy = timing.copy_impl(max(1, nbytes // 8))
                copy_s = statistics.median(timing.estimate_call(copy, 2) for _ in range(7))
                entry["optimizer"] = {"kernels": impls["fused"]["phases"].get("optimizer", 0),
                                      "unfused_kernels": impls["unfused"]["phases"].get("optimizer", 0),
                                      "seconds": seconds, "bytes": nbytes, "copy_s": copy_s,
                                      "fraction_of_bound": copy_s / seconds}
            o = entry["opaque"]
            if "fused" in o and "unfused" in o and o["unfused"]["outside_opaque_s"] > 0:
                entry["ratios"]["outside_opaque fused/unfused"] = (o["fused"]["outside_opaque_s"]
                                                                   / o["unfused"]["outside_opaque_s"])
        if "copy" in impls:   # the faster median copy of the same rounds: minimal bytes at its bandwidth
            rates = {n: 2 * 4 * impls[n]["elements"] / impls[n]["time"]["median_s"]
                     for n in ("copy", "stream") if "time" in impls.get(n, {})}
            bandwidth = max(rates.values())
            nbytes = sum(a.nbytes for a in arrays) + sum(r.nbytes for r in reference)
            bound_s = nbytes / bandwidth
            entry["bound"] = {"minimal_bytes": nbytes, "copy_GBps": bandwidth / 1e9, "bound_s": bound_s,
                              "copies_GBps": {n: r / 1e9 for n, r in rates.items()},
                              "fraction": {n: bound_s / t for n, t in step.items()}}


def environment() -> dict:
    """What the figures depend on: the OpenBLAS variables (the run should have them unset), threads,
    versions, load."""
    import platform
    import numba
    import numpy
    threading_vars = ("OPENBLAS_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT", "OMP_NUM_THREADS", "OMP_WAIT_POLICY",
                      "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "XLA_FLAGS")
    return {
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
        "openblas_vars_set": any(v in os.environ for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")),
        "threading_env": {v: os.environ[v] for v in threading_vars if v in os.environ},
        "threads": threads.pool_threads(), "threads_allowed": threads.allowed_threads(),
        "cpu_count": os.cpu_count(), "loadavg_start": list(os.getloadavg()),
        "python": platform.python_version(), "numpy": numpy.__version__, "numba": numba.__version__,
        "machine": platform.machine(), "processor": platform.processor(), **peers.versions(),
        "utc_start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "git_commit": _git_commit(),
    }


def _git_commit() -> str | None:
    """The commit of the graphkernel source tree being measured, when it is a git checkout."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
