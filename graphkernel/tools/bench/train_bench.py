"""`graphkernel bench --train`: the BERT-large training step, fusion on against off, beside torch and jax.

Every implementation runs in a process of its own (train_worker.py), started one after another so that no
compile competes with another, then kept alive and driven over a pipe:

    losses    the numpy reference (device_target="CPU") takes `check_steps` steps from the initial weights:
              fused and unfused must give its losses within 1e-5 relative, each peer within 2e-5, or the
              run stops with the figures. Fused and unfused then agree within 1e-5 relative at each of
              `equal_steps` steps at `equal_layers` layers (the full run: 50 steps at 4 layers, ~2 minutes).
    time      interleaved rounds: every implementation in turn (order rotated each round), one settling
              step then `per_round` timed steps; medians per step. With `background` (--background K[:nice],
              bench/background.py) each round times every implementation quiet, then again beside K busy
              processes at that nice value: the quiet step, the loaded step and their ratio
    profile   graphkernel's per-kernel times per phase: forward+backward, optimizer, inside and outside
              MatMul/BatchMatMul; torch eager's forward+backward and optimizer step timed apart
    memory    each process's peak resident size: getrusage's ru_maxrss, and Linux's VmHWM of the worker's
              own image (ru_maxrss survives exec, so a worker's starts at its parent's peak), the latter also
              before the step was built

A peer's time outside MatMul is its step minus the time graphkernel's own MatMuls take on numpy's BLAS in the
same run (the same GEMMs, from the fused profile).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from graphkernel.tools.bench import train_peers
from graphkernel.tools.bench.background import BackgroundLoad
from graphkernel.tools.bench.harness import environment
from graphkernel.tools.bench.train_outputs import targets
from graphkernel.tools.bench.train_model import Shape, make_inputs, make_weights
from ir.errors import GraphKernelError

EQUAL_RTOL, PEER_RTOL = 1e-5, 2e-5


class TrainBenchError(GraphKernelError, RuntimeError):
    """A training-bench run that cannot give honest figures: an implementation computes other losses, or
    a worker failed."""


@dataclass(frozen=True)
class TrainSettings:
    mode: str
    shape: Shape                      # layers taken from `layers`
    layers: tuple[int, ...] = (1, 4)
    check_steps: int = 3
    equal_steps: int = 50
    equal_layers: int = 4
    rounds: int = 5
    per_round: int = 2
    profile_calls: int = 3
    peers: tuple[str, ...] = train_peers.PEERS
    reference: bool = True
    together: bool = True             # keep every worker alive and interleave; False: one at a time
    progress: bool = True
    background: str | None = None     # K[:nice]: time every round again beside K busy processes


BERT = Shape()
TRAIN_FULL = TrainSettings("full", BERT)
TRAIN_QUICK = TrainSettings("quick", BERT, equal_steps=10, equal_layers=1, rounds=3, per_round=1, profile_calls=2)
TRAIN_TINY = TrainSettings("tiny", Shape(64, 4, 256, 8, 2), layers=(1, 2), equal_steps=5, equal_layers=1, rounds=1,
                           per_round=1, profile_calls=1)
# the full BERT-large step: 24 layers, embeddings and the MLM projection; fused and unfused one at a time
BERT_LARGE = TrainSettings("bert-large", Shape(layers=24, vocab=30522), layers=(24,), equal_steps=3,
                           rounds=2, per_round=2, profile_calls=1, peers=(), reference=False, together=False)
BERT_LARGE_TINY = replace(BERT_LARGE, mode="bert-large-tiny", shape=Shape(64, 4, 256, 8, 2, vocab=100),
                          layers=(2,), rounds=1, per_round=1)


class Worker:
    """One implementation's process."""

    def __init__(self, impl: str, data_path: str, shape: Shape, log_dir: str):
        self.impl = impl
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        self.log_path = os.path.join(log_dir, f"{impl}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "graphkernel.tools.bench.train_worker", impl, data_path, json.dumps(shape.asdict())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        first = self._read()
        self.ready = first.get("ready", first)      # the step's figures, or {"error": ...}

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise TrainBenchError(f"{self.impl}: the worker exited ({self.proc.returncode}); its log:\n"
                                  + self.stderr_tail())
        return json.loads(line)

    def stderr_tail(self, lines: int = 30) -> str:
        self.log.flush()
        with open(self.log_path) as f:
            return "".join(f.readlines()[-lines:])

    def ask(self, cmd: str, **kw) -> dict:
        self.proc.stdin.write(json.dumps(dict(cmd=cmd, **kw)) + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        if "error" in answer:
            raise TrainBenchError(f"{self.impl} {cmd}: {answer['error']}\n{answer.get('traceback', '')}")
        return answer

    def quit(self) -> dict:
        """The worker's peak memory: {"maxrss_bytes": getrusage's, "peak_bytes": its own image's}."""
        answer = self.ask("quit")
        self.proc.wait(timeout=60)
        self.log.close()
        return {k: answer[k] for k in ("maxrss_bytes", "peak_bytes")}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def relative(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-30)))


def _start(impl, data_path, shape, scratch, log) -> Worker | None:
    log(f"  {impl}: starting")
    try:
        w = Worker(impl, data_path, shape, scratch)
    except TrainBenchError as e:
        raise TrainBenchError(str(e)) from None
    if "error" in w.ready:
        w.kill()
        if w.ready["error"].startswith("PeerMissing"):
            log(f"  {impl}: skipped: {w.ready['error'].split(': ', 1)[1]}")
            return None
        raise TrainBenchError(f"{impl}: {w.ready['error']}\n{w.ready.get('traceback', '')}")
    log(f"  {impl}: ready, compile {w.ready['compile_s']:.1f} s")
    return w


def run_config(shape: Shape, s: TrainSettings, scratch: str, log, missing: frozenset = frozenset()) -> dict:
    """Everything measured for one network; the peers of a framework in `missing` (not installed, said
    once by `run`) are skipped without a word."""
    entry = {"name": shape.label(), "shape": shape.asdict(), "matmul_gflop": shape.matmul_gflop(),
             "loadavg_start": list(os.getloadavg()), "impls": {}}
    data_path = os.path.join(scratch, f"data_{shape.layers}.npz")
    arrays = {f"w:{k}": v for k, v in make_weights(shape).items()}
    arrays.update({f"i:{k}": v for k, v in make_inputs(shape).items()})
    np.savez(data_path, **arrays)
    del arrays
    n_equal = s.equal_steps if shape.layers == s.equal_layers or not s.reference else s.check_steps
    losses = {}
    if s.reference:
        ref = _start("reference", data_path, shape, scratch, log)
        losses["reference"] = ref.ask("losses", n=s.check_steps)["losses"]
        entry["impls"]["reference"] = {"compile_s": ref.ready["compile_s"], "losses": losses["reference"],
                                       **ref.quit()}
    workers: dict[str, Worker] = {}
    names = (["unfused", "fused"] if s.together else ["fused", "unfused"]) + list(s.peers)
    try:
        for impl in names:
            framework = impl.split(".")[0]
            w = None if framework in missing else _start(impl, data_path, shape, scratch, log)
            if w is None:
                entry["impls"][impl] = {"skipped": "not installed: " + train_peers.INSTALL[impl.split(".")[0]]}
                continue
            workers[impl] = w
            n = n_equal if impl in ("fused", "unfused") else s.check_steps
            losses[impl] = w.ask("losses", n=n)["losses"]
            log(f"  {impl}: losses of {n} steps from the initial weights: "
                + ", ".join(f"{x:.7g}" for x in losses[impl][:3]) + (", ..." if n > 3 else ""))
            entry["impls"][impl] = dict(w.ready, losses=losses[impl])
            if not s.together:
                _time([w], s, entry, log)
                _profile({impl: w}, s, entry)
                entry["impls"][impl].update(w.quit())
                del workers[impl]
        _check(losses, entry)
        if s.together:
            _time(list(workers.values()), s, entry, log)
            _profile(workers, s, entry)
            for impl, w in list(workers.items()):
                entry["impls"][impl].update(w.quit())
                del workers[impl]
    finally:
        for w in workers.values():
            w.kill()
    entry["loadavg_end"] = list(os.getloadavg())
    derive(entry)
    return entry


def _check(losses: dict, entry: dict) -> None:
    base = losses.get("reference")
    checks = {}
    for impl, got in losses.items():
        if impl == "reference" or base is None:
            continue
        k = min(len(got), len(base))
        rtol = EQUAL_RTOL if impl in ("fused", "unfused") else PEER_RTOL
        err = relative(got[:k], base[:k])
        checks[f"{impl} vs reference"] = {"steps": k, "max_rel": err, "rtol": rtol, "ok": err <= rtol}
    if "fused" in losses and "unfused" in losses:
        err = relative(losses["fused"], losses["unfused"])
        checks["fused vs unfused"] = {"steps": len(losses["fused"]), "max_rel": err, "rtol": EQUAL_RTOL,
                                      "ok": err <= EQUAL_RTOL}
    entry["loss_checks"] = checks
    bad = {k: v for k, v in checks.items() if not v["ok"]}
    if bad:
        lines = [f"{k}: max relative difference {v['max_rel']:.3g} > {v['rtol']:g} over {v['steps']} steps"
                 for k, v in bad.items()]
        lines += [f"  {impl} losses: {', '.join(f'{x:.9g}' for x in got[:5])}" for impl, got in losses.items()]
        raise TrainBenchError(f"{entry['name']}: implementations disagree, nothing timed:\n" + "\n".join(lines))


def _time(workers: list[Worker], s: TrainSettings, entry: dict, log) -> None:
    times = {w.impl: [] for w in workers}
    loaded = {w.impl: [] for w in workers}
    load = BackgroundLoad.parse(s.background) if s.background else None

    def one_round(r: int, into: dict) -> None:
        for k in range(len(workers)):
            w = workers[(k + r) % len(workers)]
            into[w.impl] += w.ask("time", n=s.per_round + 1)["times"][1:]
    try:
        for r in range(s.rounds):
            one_round(r, times)
            if load is not None:
                with load:
                    one_round(r, loaded)
                    entry.setdefault("loadavg_loaded", []).append(list(os.getloadavg()))
            if s.progress:
                log(f"  round {r + 1}/{s.rounds}: " + ", ".join(
                    f"{n} {1e3 * np.median(t):.0f} ms" + (f" (loaded {1e3 * np.median(loaded[n]):.0f})" if loaded[n]
                                                          else "") for n, t in times.items()))
    finally:
        if load is not None:
            load.close()
    for impl, ts in times.items():
        entry["impls"][impl]["time"] = _summary(ts)
        if loaded[impl]:
            entry["impls"][impl]["time_loaded"] = _summary(loaded[impl])
    if load is not None:
        entry["background"] = load.label()


def _summary(ts: list[float]) -> dict:
    q25, q50, q75 = np.percentile(ts, [25, 50, 75])
    return {"median_s": float(q50), "q25_s": float(q25), "q75_s": float(q75), "min_s": float(min(ts)),
            "calls": len(ts)}


def _profile(workers: dict, s: TrainSettings, entry: dict) -> None:
    for impl in ("unfused", "fused", "torch"):
        if impl in workers:
            prof = workers[impl].ask("profile", n=s.profile_calls)["profile"]
            if prof:
                entry["impls"][impl]["profile"] = prof


def derive(entry: dict) -> None:
    """Per-step figures and ratios of one network."""
    impls = entry["impls"]
    step = {n: d["time"]["median_s"] for n, d in impls.items() if "time" in d}
    out = {"step_s": step}
    prof = {n: impls[n]["profile"] for n in ("fused", "unfused") if "profile" in impls.get(n, {})}
    for n, p in prof.items():
        out[n] = {"fwd_bwd_s": p["fwd_bwd_s"], "optimizer_s": p["optimizer_s"], "matmul_s": p["matmul_s"],
                  "fwd_bwd_outside_matmul_s": p["fwd_bwd_outside_matmul_s"],
                  "outside_matmul_s": step[n] - p["matmul_s"],
                  "matmul_gflops": entry["matmul_gflop"] / p["matmul_s"] if p["matmul_s"] else None}
        if p.get("optimizer_copy_s") and p["optimizer_s"]:
            out[n]["optimizer_fraction_of_bound"] = p["optimizer_copy_s"] / p["optimizer_s"]
    ratios = {}
    if "fused" in step and "unfused" in step:
        ratios["step fused/unfused"] = step["fused"] / step["unfused"]
    loaded = {n: d["time_loaded"]["median_s"] for n, d in impls.items() if "time_loaded" in d}
    if loaded:
        out["loaded_step_s"] = loaded
        for n, t in loaded.items():
            ratios[f"{n} loaded/quiet"] = t / step[n]
        for n, t in loaded.items():
            if n in train_peers.PEERS and "fused" in loaded:
                ratios[f"loaded fused/{n}"] = loaded["fused"] / t
    if len(prof) == 2:
        ratios["fwd+bwd outside MatMul fused/unfused"] = (out["fused"]["fwd_bwd_outside_matmul_s"]
                                                          / out["unfused"]["fwd_bwd_outside_matmul_s"])
    peers = {n: t for n, t in step.items() if n in train_peers.PEERS}
    if peers and "fused" in step:
        fastest = min(peers, key=peers.get)
        out["fastest_peer"] = fastest
        ratios[f"fused/{fastest} (fastest peer)"] = step["fused"] / peers[fastest]
        for n, t in peers.items():
            ratios[f"fused/{n}"] = step["fused"] / t
        if "fused" in prof:
            peer_outside = peers[fastest] - prof["fused"]["matmul_s"]
            out["fastest_peer_outside_matmul_s"] = peer_outside
            if peer_outside > 0:
                ratios["outside MatMul fused/fastest peer"] = out["fused"]["outside_matmul_s"] / peer_outside
    entry["figures"], entry["ratios"] = out, ratios


def gemm_gflops(repeats: int = 7) -> float:
    """numpy's float32 GEMM speed at [256,1024]x[1024,4096] in this process (the FFN's MatMul)."""
    rng = np.random.default_rng(0)
    a, b = rng.random((256, 1024), np.float32), rng.random((1024, 4096), np.float32)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * 256 * 1024 * 4096 / float(np.median(times)) / 1e9


def run(s: TrainSettings, log=print) -> dict:
    results = {"kind": "train", "mode": s.mode, "settings": asdict(s), "environment": environment(),
               "configs": []}
    missing = {name for name in ("torch", "jax") if not train_peers.installed(name)}
    for name in ("torch", "jax"):
        results["environment"][name] = ("unavailable: " + train_peers.INSTALL[name] if name in missing
                                        else __import__(name).__version__)
    for name in sorted(missing & {p.split(".")[0] for p in s.peers}):
        log(f"{name}: not installed, skipped ({train_peers.INSTALL[name]})")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="graphkernel-train-bench-") as scratch:
        for layers in s.layers:
            shape = replace(s.shape, layers=layers)
            log(f"{shape.label()}:")
            results["configs"].append(run_config(shape, s, scratch, log, frozenset(missing)))
    results["gemm_gflops"] = gemm_gflops()
    results["wall_s"] = time.perf_counter() - t0
    results["loadavg_end"] = list(os.getloadavg())
    results["targets"] = targets(results)
    return results
