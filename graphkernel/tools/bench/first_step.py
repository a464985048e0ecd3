"""`graphkernel bench --first-step`: what a user waits for on a new model, cold and warm.

    graphkernel bench --first-step [--train stack|bert-large] [--layers N] [--compile-mode background|wait]

Each run is a fresh process (python -m graphkernel.tools.bench.first_step), the BERT-large training step
of train_model.py (`stack`: the encoder, 1 layer by default; `bert-large`: embeddings, 24 layers by
default and the MLM projection), fused:

    cold      empty kernel and compile caches, --compile_mode as given: every step's seconds and the
              launches that ran a stand-in, until every kernel has arrived and SETTLE steps more (at
              most BUDGET_S seconds of steps; then it waits for the rest, so the caches are whole)
    warm      a second process on the caches the cold one left (compile cache on): its first step,
              then its steady steps (the warm fused step)
    unfused   fusion off, its kernels built first (wait) in the caller's kernel cache (only its steps
              after the first are a figure): the warm unfused step

Reported, never asserted (docs/kernels.md "The first step" has the targets): the cold first step, k
(the steps that ran a stand-in), the slowest of steps 2..k against the warm unfused step, the median of
the steps after k against the warm fused step, the warm first step; with the load average. For the
official BERT sources against MindSpore's first step: bench/official_bert_check.py --first-step.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from graphkernel import Tensor, context
from graphkernel.tools.bench.train_model import Shape, make_inputs, make_weights, train_step

SETTLE = 3          # steps after the last kernel arrived
BUDGET_S = 1800     # a cold run steps for this long at most, then waits for the kernels still building


def record_steps(cell, data, settle: int = SETTLE, budget_s: float = BUDGET_S, steps: int | None = None) -> dict:
    """Call `cell(*data)` until no launch runs a stand-in and `settle` steps more (or `steps` steps):
    each step's seconds and its launches that ran a stand-in. A run that is out of its time budget
    with kernels still building waits for them (`waited_s`), so the caches it leaves are whole."""
    seconds, standins, after = [], [], 0
    compiled, start = None, time.perf_counter()
    while len(seconds) < (steps or 1 << 30) and (steps or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        out = cell(*data)
        np.asarray((out[0] if isinstance(out, tuple) else out).asnumpy())
        seconds.append(time.perf_counter() - t0)
        compiled = compiled or cell.compile(*data)
        program = compiled.program
        # kernels swap in at the start of a call only: after it, the stand-ins are those it ran
        standins.append(0 if program is None else len(program.standin_positions()))
        if steps is None and (program is None or not program.building):
            after += 1
            if after > settle:
                break
    t0 = time.perf_counter()
    compiled.wait_for_kernels()   # the caches this run leaves hold every kernel
    return {"seconds": seconds, "standins": standins, "launches": len(compiled.kernels),
            "waited_s": time.perf_counter() - t0}


def summary(cold: dict, warm: dict, unfused: dict) -> dict:
    """The figures of the targets from the three runs' step records."""
    k = sum(1 for n in cold["standins"] if n)
    later = cold["seconds"][k:] or cold["seconds"][-1:]
    warm_fused = statistics.median(warm["seconds"][1:])
    warm_unfused = statistics.median(unfused["seconds"][1:])
    out = {"cold_first_s": cold["seconds"][0], "k": k, "warm_first_s": warm["seconds"][0],
           "warm_fused_s": warm_fused, "warm_unfused_s": warm_unfused,
           "after_k_over_warm_fused": statistics.median(later) / warm_fused}
    if k > 1:
        out["steps_2_to_k_max_over_warm_unfused"] = max(cold["seconds"][1:k]) / warm_unfused
    return out


TINY = dict(hidden=64, heads=4, ffn=128, seq=16)   # --tiny: a smoke run of the tool


def _model(name: str, layers: int | None, tiny: bool = False):
    sizes = TINY if tiny else {}
    shape = Shape(layers=layers or 24, vocab=30522 if not tiny else 512, **sizes) if name == "bert-large" \
        else Shape(layers=layers or 1, **sizes)
    cell = train_step(shape, make_weights(shape))
    cell.set_train()
    return shape, cell, make_inputs(shape)


def worker(name: str, layers: int | None, fused: bool, steps: int | None, tiny: bool = False) -> dict:
    context.set_context(enable_graph_kernel=fused)
    shape, cell, inputs = _model(name, layers, tiny)
    data = [Tensor(inputs[k]) for k in ("x", "mask", "target")]
    record = record_steps(cell, data, steps=steps)
    record["shape"] = shape.label()
    return record


def _run(name, layers, fused, steps, env, tiny) -> dict:
    cmd = [sys.executable, "-m", "graphkernel.tools.bench.first_step", "--worker", name,
           "--layers", str(layers or 0), "--steps", str(steps or 0)] + (["--fused"] if fused else []) + \
        (["--tiny"] if tiny else [])
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"first-step worker failed:\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def run(name: str = "stack", layers: int | None = None, compile_mode: str = "background", steps: int = 5,
        tiny: bool = False, log=print) -> dict:
    scratch = tempfile.mkdtemp(prefix="graphkernel_first_step_")
    try:
        env = dict(os.environ, GRAPHKERNEL_CACHE_DIR=os.path.join(scratch, "kernels"),
                   GRAPHKERNEL_COMPILE_MODE=compile_mode, MS_COMPILER_CACHE_ENABLE="1",
                   MS_COMPILER_CACHE_PATH=os.path.join(scratch, "graphs"))
        load = [os.getloadavg()[0]]
        log(f"cold ({compile_mode}) ...")
        cold = _run(name, layers, True, None, env, tiny)
        log("warm second process ...")
        warm = _run(name, layers, True, steps, env, tiny)
        log("unfused ...")
        # its warm steps are the figure (not its first): it takes the caller's kernel cache, where
        # earlier runs may have left its kernels, not the cold scratch one
        unfused = _run(name, layers, False, steps, dict(os.environ, GRAPHKERNEL_COMPILE_MODE="wait",
                                                        MS_COMPILER_CACHE_ENABLE="0"), tiny)
        load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = {"model": cold["shape"], "compile_mode": compile_mode, "cold": cold, "warm": warm, "unfused": unfused,
              "summary": summary(cold, warm, unfused), "loadavg": load}
    return result


def format_result(r: dict) -> str:
    s = r["summary"]
    lines = [f"{r['model']}, fused, --compile_mode={r['compile_mode']} (load average "
             f"{'/'.join(f'{x:.1f}' for x in r['loadavg'])})",
             f"  cold first step {s['cold_first_s']:.1f} s; k = {s['k']} steps ran stand-ins "
             f"(of {r['cold']['launches']} launches: {r['cold']['standins'][:8]}...)"
             + (f"; kernels still building after the budget: waited {r['cold']['waited_s']:.0f} s"
                if r["cold"]["waited_s"] > 0.5 else ""),
             f"  steps: {' '.join(f'{t:.2f}' for t in r['cold']['seconds'][:12])} ...",
             f"  warm fused step {s['warm_fused_s'] * 1e3:.0f} ms, warm unfused step {s['warm_unfused_s'] * 1e3:.0f} ms",
             f"  steps 2..k, slowest / warm unfused: {s.get('steps_2_to_k_max_over_warm_unfused', float('nan')):.2f} "
             "(target <= 1.5)",
             f"  steps after k, median / warm fused: {s['after_k_over_warm_fused']:.2f} (target <= 1.05)",
             f"  warm second process: first step {s['warm_first_s']:.1f} s"]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="a worker of graphkernel bench --first-step")
    p.add_argument("--worker")
    p.add_argument("--layers", type=int, default=0)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--fused", action="store_true")
    p.add_argument("--tiny", action="store_true")
    args = p.parse_args(argv)
    print("RESULT " + json.dumps(worker(args.worker, args.layers or None, args.fused, args.steps or None, args.tiny)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
