"""What seeing a compile costs: the compile with its dumps and report page, and a profiled step.

    PYTHONPATH=. python bench/report_overhead.py [--runs 5] [--steps 200]

On an ONNX BERT encoder layer (hidden 256, 4 heads, seq 64; fusion on, the emulated AI Core, kernels
already in the process's cache so a compile is the pipeline and lowering, not numba):
  compile         medians of --runs compiles: no dumps; save_graphs (the .dot stages and the compile
                  record); save_graphs with --dump_as_html (the stages drawn by Graphviz into the page)
  step            median step time over --steps calls, plain and under a Profiler (which times every launch
                  and keeps one trace event per launch)
Prints the medians and the ratios to the plain figure; ratios are what to quote, the machine's load moves
the figures.
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import tempfile
import time

from graphkernel import Profiler, context
import graphkernel.onnx as gx
from graphkernel.onnx.examples import bert_layer_model


def compile_seconds(cell, inputs, runs: int, scratch: str, label: str, **settings) -> float:
    """Median compile time; each run dumps (or would) into a directory of its own, and save_graphs_path
    being part of the compile key, each run compiles anew."""
    times = []
    for k in range(runs):
        context.set_context(save_graphs_path=os.path.join(scratch, f"{label}{k}"), **settings)
        t0 = time.perf_counter()
        cell.compile(*inputs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def step_seconds(cell, inputs, steps: int) -> float:
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        cell(*inputs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    cell = gx.load(bert_layer_model(hidden=256, heads=4, seq=64))
    inputs = cell.random_inputs(0)
    cell(*inputs)   # the kernels built once: later compiles take them from memory
    with tempfile.TemporaryDirectory() as scratch:
        plain = compile_seconds(cell, inputs, args.runs, scratch, "plain", save_graphs=False)
        dumps = compile_seconds(cell, inputs, args.runs, scratch, "dumps", save_graphs=True)
        html = compile_seconds(cell, inputs, args.runs, scratch, "html", save_graphs=True,
                               graph_kernel_flags="--dump_as_html")
        page = max(os.path.getsize(p) for p in glob.glob(os.path.join(scratch, "html*", "report_*.html")))
        context.set_context(save_graphs=False, graph_kernel_flags="")
        cell(*inputs)
        off = step_seconds(cell, inputs, args.steps)
        prof = Profiler(output_path=scratch)
        on = step_seconds(cell, inputs, args.steps)
        prof.analyse(print_table=False)
        trace = os.path.getsize(os.path.join(scratch, "profiler", "trace.json"))
    print(f"compile: no dumps {plain * 1e3:.0f} ms; save_graphs {dumps * 1e3:.0f} ms ({dumps / plain:.2f}x); "
          f"+ --dump_as_html {html * 1e3:.0f} ms ({html / plain:.2f}x); page {page / 1e3:.0f} kB")
    print(f"step: plain {off * 1e3:.3f} ms; under the Profiler {on * 1e3:.3f} ms ({on / off:.2f}x); "
          f"trace.json {trace / 1e3:.0f} kB for {args.steps} steps")


if __name__ == "__main__":
    main()
