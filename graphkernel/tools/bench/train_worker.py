"""One implementation of the training step in a process of its own, driven by train_bench.py over a pipe,
so that each one's peak memory (getrusage) is its own and the parent can interleave their steps.

    python -m graphkernel.tools.bench.train_worker IMPL DATA.npz SHAPE_JSON
        IMPL: fused | unfused | reference (graphkernel) | torch | torch.compile | jax (train_peers.py)

Protocol: one JSON object per line. The worker writes {"ready": ...} (compile seconds, kernel counts) once it
has built the step, then answers each command on its own line:
    {"cmd": "losses", "n": N}    the losses of N steps (the first N steps from the initial weights)
    {"cmd": "time", "n": N}      the seconds of N steps
    {"cmd": "profile", "n": N}   per-phase and per-kernel times (graphkernel) or phase times (torch eager)
    {"cmd": "quit"}              {"maxrss_bytes": getrusage's, "peak_bytes": VmHWM's} and exit
Errors are answered as {"error": "..."}; everything else the process prints goes to stderr.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
import traceback
from collections import defaultdict

import numpy as np

from graphkernel import Tensor, context
from graphkernel.tools.bench import train_peers
from graphkernel.tools.bench.timing import StepProfile, copy_impl, estimate_call, is_opaque
from graphkernel.tools.bench.train_model import Shape, train_step

OURS = ("fused", "unfused", "reference")


def maxrss_bytes() -> int:
    """getrusage's peak resident size. Linux carries it across exec: a worker starts at its parent's peak."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # kilobytes on Linux


def peak_bytes() -> int | None:
    """The peak resident size of this process image alone (Linux's VmHWM, not inherited), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class OurStep:
    """graphkernel's TrainOneStepCell on the emulated AI Core (fusion on or off) or the numpy reference."""

    def __init__(self, impl: str, shape, weights: dict, inputs: dict):
        if impl == "reference":
            context.set_context(device_target="CPU", enable_graph_kernel=False)
        else:
            context.set_context(device_target="Ascend", enable_graph_kernel=impl == "fused")
        self.cell = train_step(shape, weights)
        self.tensors = [Tensor(inputs[k]) for k in ("x", "mask", "target")]
        t0 = time.perf_counter()
        self.compiled = self.cell.compile(*self.tensors)
        self.compile_s = time.perf_counter() - t0
        kernels = self.compiled.kernels
        self.info = {"compile_s": self.compile_s, "kernels": len(kernels),
                     "phases": {p: sum(k.phase == p for k in kernels) for p in sorted({k.phase for k in kernels})}}

    def step(self) -> float:
        return float(self.cell(*self.tensors).asnumpy())

    def profile(self, n: int) -> dict:
        program = self.compiled.program
        if program is None:
            return {}
        per_step = []
        for _ in range(n):
            self.step()                      # settle, as in the timed rounds
            prof = StepProfile()
            program.profiler = prof
            try:
                t0 = time.perf_counter()
                self.step()
                wall = time.perf_counter() - t0
            finally:
                program.profiler = None
            per_step.append((prof, wall))
        infos = per_step[0][0].infos

        def median(fn):
            return statistics.median(fn(p) for p, _ in per_step)

        def phase_sum(p, phases, opaque):
            return sum(t for name, t in p.kernels.items()
                       if infos[name].phase in phases and is_opaque(infos[name]) == opaque)

        fb = ("forward", "backward")
        kernels = defaultdict(list)
        for p, _ in per_step:
            for name, t in p.kernels.items():
                kernels[name].append(t)
        ranked = sorted(kernels, key=lambda k: -statistics.median(kernels[k]))
        optimizer = [i for i in infos.values() if i.phase == "optimizer"]
        opt_bytes = sum(t.nbytes for i in optimizer for t in i.inputs + i.outputs)
        out = {
            "calls": n, "wall_s": statistics.median(w for _, w in per_step),
            "kernels_s": median(lambda p: p.total_s()),
            "matmul_s": median(lambda p: p.opaque_s()),
            "outside_matmul_s": median(lambda p: p.total_s() - p.opaque_s()),
            "fwd_bwd_s": median(lambda p: phase_sum(p, fb, True) + phase_sum(p, fb, False)),
            "fwd_bwd_outside_matmul_s": median(lambda p: phase_sum(p, fb, False)),
            "optimizer_s": median(lambda p: p.phase_s("optimizer")),
            "phase_s": {ph: median(lambda p, ph=ph: p.phase_s(ph)) for ph in sorted({i.phase for i in infos.values()})},
            "optimizer_bytes": opt_bytes,
            "top": [{"name": k, "phase": infos[k].phase, "op_types": list(infos[k].op_types)[:12],
                     "matmul": is_opaque(infos[k]), "s": statistics.median(kernels[k])} for k in ranked[:25]],
        }
        if opt_bytes:   # the bound: the optimizer's bytes at the bandwidth of a parallel copy of that size
            elements = min(max(1, opt_bytes // 8), COPY_MAX_ELEMENTS)
            copy = copy_impl(elements)
            out["optimizer_copy_s"] = statistics.median(estimate_call(copy, 2) for _ in range(7)) \
                * opt_bytes / (8 * elements)
        return out


# the largest copy the bandwidth bound times (1 GiB moved); a larger optimizer (unfused, 24 layers: 51 GB of
# intermediates) is bounded at the bandwidth of this copy, which is far beyond every cache already
COPY_MAX_ELEMENTS = 1 << 27


def make_step(impl: str, shape, weights: dict, inputs: dict):
    if impl in OURS:
        return OurStep(impl, shape, weights, inputs)
    return train_peers.make(impl, shape, weights, inputs)


def serve(impl: str, data_path: str, shape_json: str, out) -> None:
    shape = Shape(**json.loads(shape_json))
    with np.load(data_path) as data:
        weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
        inputs = {k[2:]: data[k] for k in data.files if k.startswith("i:")}

    def send(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    base = peak_bytes()
    try:
        step = make_step(impl, shape, weights, inputs)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
        send({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        return
    del weights, inputs      # the step holds its own copies (a 24-layer BERT-large's weights are 1.3 GB)
    send({"ready": dict(step.info, peak_before_bytes=base)})
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["cmd"] == "losses":
                send({"losses": [step.step() for _ in range(cmd["n"])]})
            elif cmd["cmd"] == "time":
                times = []
                for _ in range(cmd["n"]):
                    t0 = time.perf_counter()
                    step.step()
                    times.append(time.perf_counter() - t0)
                send({"times": times})
            elif cmd["cmd"] == "profile":
                send({"profile": step.profile(cmd["n"])})
            elif cmd["cmd"] == "quit":
                send({"maxrss_bytes": maxrss_bytes(), "peak_bytes": peak_bytes()})
                return
            else:
                send({"error": f"unknown command {cmd['cmd']!r}"})
        except Exception as e:  # noqa: BLE001
            send({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})


def main(argv=None) -> None:
    impl, data_path, shape_json = (argv or sys.argv[1:])[:3]
    out = os.fdopen(os.dup(1), "w")      # the protocol's own stream; prints of libraries go to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(impl, data_path, shape_json, out)


if __name__ == "__main__":
    main()
