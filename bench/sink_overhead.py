"""What loop sinking saves per step on a small network, where per-call overhead matters.

    PYTHONPATH=. python bench/sink_overhead.py [--steps 200] [--runs 7]

A 2-layer MLP (16 -> 64 -> 4, ReLU), batch 8, MSE loss, Momentum, fusion on, the emulated AI Core.
Per-step time, median of --runs runs of --steps steps each, after a warm-up that compiles:
  cell loop      train_cell(x, y) once per step (the Cell call path every step)
  run_steps      the same steps staged once, one CompiledGraph.run_steps call
  Model.train    model.train(1, dataset) with dataset_sink_mode False / True (sink_size = steps)
The ratio sunk / unsunk is what the docs quote; figures vary with the machine's load, ratios less.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import graphkernel as ms
from graphkernel import Tensor, nn
from graphkernel.train import Model, NumpySlicesDataset


def build(seed=0):
    ms.set_seed(seed)
    net = nn.SequentialCell([nn.Dense(16, 64, activation="relu"), nn.Dense(64, 4)])
    return net, nn.Momentum(net.trainable_params(), 0.01, 0.9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    ms.set_context(device_target="Ascend", enable_graph_kernel=True)
    rng = np.random.default_rng(0)
    n = args.steps
    xs = rng.standard_normal((n, 8, 16)).astype(np.float32)
    ys = rng.standard_normal((n, 8, 4)).astype(np.float32)

    net, opt = build()
    cell = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    batches = [(Tensor(x), Tensor(y)) for x, y in zip(xs, ys)]
    compiled = cell.compile(*batches[0])
    cell(*batches[0])

    def cell_loop():
        for x, y in batches:
            cell(x, y)

    def sunk():
        compiled.run_steps([xs, ys])

    net2, opt2 = build()
    model = Model(net2, nn.MSELoss(), opt2)
    data = NumpySlicesDataset((xs.reshape(-1, 16), ys.reshape(-1, 4)), shuffle=False).batch(8)
    model.train(1, data, dataset_sink_mode=True)
    model.train(1, data)

    timings = {"cell loop": cell_loop, "run_steps": sunk,
               "Model.train unsunk": lambda: model.train(1, data),
               "Model.train sunk": lambda: model.train(1, data, dataset_sink_mode=True)}
    results = {name: [] for name in timings}
    for _ in range(args.runs):   # interleaved, so that load changes hit every variant alike
        for name, fn in timings.items():
            t = time.perf_counter()
            fn()
            results[name].append((time.perf_counter() - t) / n * 1e6)
    med = {name: statistics.median(v) for name, v in results.items()}
    for name, v in med.items():
        print(f"{name:20s} {v:8.1f} us/step")
    print(f"run_steps / cell loop:          {med['run_steps'] / med['cell loop']:.2f}")
    print(f"Model.train sunk / unsunk:      {med['Model.train sunk'] / med['Model.train unsunk']:.2f}")


if __name__ == "__main__":
    main()
