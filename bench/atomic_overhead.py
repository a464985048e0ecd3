"""What the all-or-nothing training step costs per step (docs/training.md "Interrupted steps").

    PYTHONPATH=. python bench/atomic_overhead.py [--steps 200] [--runs 7] [--layer-steps 5] [--hidden 1024]

Two training steps on the emulated AI Core, fusion on:
  small       a 2-layer MLP (16 -> 64 -> 4, ReLU), batch 8, MSE loss, Momentum: per-call overhead shows
  BERT layer  one encoder layer (hidden --hidden, 16 heads, FFN 4x, seq 128, batch 2), MSE loss, AdamW:
              the bench's `--train` step at one layer
Each is timed per step as shipped ("atomic": signals held across the step), with the hold replaced by
a no-op ("no hold": the step as it was before), and with a copy of every updated Parameter taken
before each step ("snapshot": what putting the Parameters back after any exception would cost, which
the shipped step pays only when a launch after its first Parameter write can raise: a host op).
Medians of --runs interleaved runs; the ratios to "no hold" are what to quote (the figures move with
the machine's load, the ratios less). Print the load average beside them.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

import numpy as np

import graphkernel as ms
import graphkernel.compiler as compiler
from graphkernel import Tensor, nn
from graphkernel.tools.bench.train_model import Shape, make_inputs, make_weights, train_step


def small_step():
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(16, 64, activation="relu"), nn.Dense(64, 4)])
    cell = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Momentum(net.trainable_params(), 0.01, 0.9))
    rng = np.random.default_rng(0)
    return cell, (Tensor(rng.standard_normal((8, 16)).astype(np.float32)),
                  Tensor(rng.standard_normal((8, 4)).astype(np.float32)))


def layer_step(hidden: int):
    shape = Shape(hidden=hidden, heads=16, ffn=4 * hidden, layers=1)
    inputs = make_inputs(shape)
    return train_step(shape, make_weights(shape)), tuple(Tensor(inputs[k]) for k in ("x", "mask", "target"))


@contextlib.contextmanager
def variant(compiled, name: str):
    """The step as shipped, without the hold, or with a snapshot of every updated Parameter."""
    held, snapshot = compiler.HELD, compiled._snapshot
    if name == "no hold":
        compiler.HELD = contextlib.nullcontext()
    elif name == "snapshot":
        compiled._snapshot = tuple(i for _, i in compiled.updates)
    try:
        yield
    finally:
        compiler.HELD, compiled._snapshot = held, snapshot


def measure(cell, batch, steps: int, runs: int) -> dict:
    compiled = cell.compile(*batch)
    for _ in range(3):
        cell(*batch)
    names = ("atomic", "no hold", "snapshot")
    times = {n: [] for n in names}
    for r in range(runs):   # interleaved, and each run in another order: load and order hit every variant alike
        for name in names[r % 3:] + names[:r % 3]:
            with variant(compiled, name):
                t = time.perf_counter()
                for _ in range(steps):
                    cell(*batch)
                times[name].append((time.perf_counter() - t) / steps * 1e6)
    return {n: statistics.median(v) for n, v in times.items()}


def report(label: str, med: dict) -> None:
    base = med["no hold"]
    print(f"{label}: " + ", ".join(f"{n} {v:.1f} us/step ({v / base:.3f})" for n, v in med.items()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per run of the small network")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--layer-steps", type=int, default=5, help="steps per run of the BERT layer")
    parser.add_argument("--hidden", type=int, default=1024, help="the BERT layer's width (64: a quick try)")
    args = parser.parse_args()
    ms.set_context(device_target="Ascend", enable_graph_kernel=True)
    print(f"load average {os.getloadavg()[0]:.2f}")
    report("small (MLP, Momentum)", measure(*small_step(), args.steps, args.runs))
    report(f"BERT layer h{args.hidden} (AdamW)", measure(*layer_step(args.hidden), args.layer_steps, args.runs))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
