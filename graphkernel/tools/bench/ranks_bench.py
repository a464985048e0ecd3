"""`graphkernel bench --train --ranks N`: the BERT-large training step data-parallel over N ranks on this
machine, against one process using the same cores.

    N ranks x (cores // N) threads    mpiexec -n N, each rank on its share of the global batch
    1 rank x cores threads            one process on the whole batch

both the 4-layer encoder stack of `graphkernel bench --train` (hidden 1024, 16 heads, FFN 4096, seq 128,
global batch 2), fused (ranks_worker.py). First the losses: the mean of the ranks' losses must equal the
one process's within 1e-5 relative at each warm-up step, or the run stops. Then, per implementation, the
median step and samples per second; for the ranks, per step: the time the communicator spent in the
buckets' AllReduce, the time the main thread waited for them, the same buckets reduced blocking after
the backward, and the share of that the overlap hid (1 - waited / blocking); the bus bandwidth of a 64 MB
AllReduce. Results: bench/results/train_ranks<N>_<mode>.json and .md (the lead records figures from a
quiet machine: docs/distributed.md).
"""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ir.errors import GraphKernelError
from kernels.threads import allowed_cores
from graphkernel.communication import mpiexec
from graphkernel.communication.launcher import without_launcher
from graphkernel.communication.mpiexec import Mpiexec, MpiexecError
from graphkernel.tools.bench.harness import environment
from graphkernel.tools.bench.train_model import Shape

EQUAL_RTOL = 1e-5


class RanksBenchError(GraphKernelError, RuntimeError):
    """A ranks bench that cannot give honest figures: no MPI, a failed worker, or other losses."""


@dataclasses.dataclass(frozen=True)
class RanksSettings:
    mode: str
    shape: Shape
    steps: int = 5
    warmup: int = 2


RANKS_FULL = RanksSettings("full", Shape(layers=4, batch=2))
RANKS_QUICK = RanksSettings("quick", Shape(layers=1, batch=2), steps=3)
RANKS_TINY = RanksSettings("tiny", Shape(64, 4, 256, 8, 2, layers=1), steps=2)


def _launcher() -> Mpiexec:
    """This environment's mpiexec (MPICH's or Open MPI's), one that can start the ranks here."""
    try:
        found = mpiexec.find()
    except MpiexecError as e:
        raise RanksBenchError(f"--ranks needs MPI: {e}") from None
    why = found.refusal()
    if why:
        raise RanksBenchError(f"--ranks: {why}")
    return found


def _run(cmd: list[str], threads: int, out: str, log) -> list[dict]:
    env = without_launcher()
    env.update(NUMBA_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    log(f"  {' '.join(os.path.basename(c) if c == cmd[0] else c for c in cmd[:4])} ... ({threads} thread(s) each)")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RanksBenchError(f"the worker failed ({done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")
    records = []
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as f:
            records.append(json.load(f))
    return records


def run(settings: RanksSettings, ranks: int = 2, log=print) -> dict:
    cores = allowed_cores()
    shape_json = json.dumps(settings.shape.asdict())
    worker = [sys.executable, "-m", "graphkernel.tools.bench.ranks_worker", shape_json, str(settings.steps),
              str(settings.warmup)]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="graphkernel-ranks-") as tmp:
        single = _run(worker + [os.path.join(tmp, "one")], cores, os.path.join(tmp, "one"), log)[0]
        many = _run(_launcher().command(ranks, worker + [os.path.join(tmp, "many")]),
                    max(1, cores // ranks), os.path.join(tmp, "many"), log)
    mean_losses = [statistics.fmean(r["losses"][k] for r in many) for k in range(settings.warmup)]
    worst = max(abs(a - b) / abs(b) for a, b in zip(mean_losses, single["losses"]))
    if worst > EQUAL_RTOL:
        raise RanksBenchError(f"the ranks' mean losses {mean_losses} differ from the one process's "
                              f"{single['losses']} by {worst:.2e} relative (at most {EQUAL_RTOL:g})")
    batch = settings.shape.batch
    step_many = statistics.median(max(r["step_s"][k] for r in many) for k in range(settings.steps))
    step_one = statistics.median(single["step_s"])
    comm = [c for r in many for c in r["comm"]]
    allreduce = statistics.median(c["allreduce_s"] for c in comm)
    waited = statistics.median(c["waited_s"] for c in comm)
    blocking = statistics.median(r["blocking_s"] for r in many)
    results = {
        "mode": settings.mode, "ranks": ranks, "cores": cores, "shape": settings.shape.asdict(),
        "label": settings.shape.label(), "environment": environment(), "losses_rel": worst,
        "one_process": {"threads": cores, "step_s": step_one, "samples_per_s": batch / step_one},
        "ranks_run": {"threads_each": max(1, cores // ranks), "step_s": step_many, "samples_per_s": batch / step_many,
                      "allreduce_s": allreduce, "waited_s": waited, "blocking_s": blocking,
                      "hidden_share": max(0.0, 1 - waited / blocking) if blocking > 0 else None,
                      "buckets": many[0]["buckets"], "bandwidth": many[0]["bandwidth"]},
        "speedup": step_one / step_many, "wall_s": time.perf_counter() - t0, "loadavg_end": list(os.getloadavg())}
    return results


def summary(results: dict) -> str:
    one, many = results["one_process"], results["ranks_run"]
    n, bw = results["ranks"], many["bandwidth"]
    lines = [f"# graphkernel bench --train --ranks {n} ({results['mode']})", "",
             f"{results['label']}, fused; {results['cores']} cores; load average at the end "
             f"{', '.join(f'{x:.2f}' for x in results['loadavg_end'])}. The ranks' mean loss equals the one "
             f"process's within {results['losses_rel']:.1e} relative.", "",
             "| run | threads | median step | samples/s |", "|---|---|---|---|",
             f"| 1 rank | {one['threads']} | {one['step_s'] * 1e3:.1f} ms | {one['samples_per_s']:.2f} |",
             f"| {n} ranks | {many['threads_each']} each | {many['step_s'] * 1e3:.1f} ms | {many['samples_per_s']:.2f} |",
             "", f"{n} ranks against 1: {results['speedup']:.2f}x the samples per second.", "",
             f"Gradients: {len(many['buckets'])} bucket(s), {sum(b[2] for b in many['buckets']) / 2 ** 20:.0f} MB a step. "
             f"Per step (medians): the communicator spent {many['allreduce_s'] * 1e3:.1f} ms in their AllReduce; "
             f"the main thread waited {many['waited_s'] * 1e3:.1f} ms for them; the same buckets reduced "
             f"blocking after the backward take {many['blocking_s'] * 1e3:.1f} ms, so the overlap hid "
             + (f"{many['hidden_share']:.0%} of it." if many["hidden_share"] is not None else "nothing measurable."),
             "", f"A {bw['bytes'] // 2 ** 20} MB float32 AllReduce: {bw['seconds'] * 1e3:.1f} ms, bus bandwidth "
             f"{bw['bus_GBps']:.2f} GB/s (2(N-1)/N x bytes / time)."]
    return "\n".join(lines) + "\n"


def write(results: dict, out_dir: str) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"train_ranks{results['ranks']}_{results['mode']}")
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(summary(results))
    return [stem + ".json", stem + ".md"]
