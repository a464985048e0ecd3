"""Convolution epilogues, timed: ResNet-50's convolution shapes with the BatchNorm (inference), residual Add
and ReLU after them, the epilogue computed by the conv's output pass (fused, the default) against the same
composites launched after the conv (`--disable_pass=composite.conv_epilogue`), interleaved in one process.

    python bench/conv_epilogue.py [--batch 2] [--image 224] [--repeat 15]

Each row: the median of `--repeat` calls of each compiled graph (after one warm-up call each), the calls of
the two taken in turn, their ratio, and the load average read before the row. The GEMMs, the same in both,
take most of a call and the machine's load moves them by more than the output pass costs, so the row also
times what differs alone, on the arrays the launches were given (an observed call): the fused step's output
pass (kernels.conv.Forward.output_pass: the epilogue reading the GEMM result) against the conv's output
pass (the NCHW store) plus the composite's launch. A row "+ y out" returns the conv's result too (a second
reader: the epilogue writes both in one pass). No figure is asserted.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from graphkernel.compiler import compile_graph  # noqa: E402
from graphkernel.settings.flags import parse_flags  # noqa: E402
from graphkernel.settings.options import CompileOptions  # noqa: E402
from ir import GraphBuilder  # noqa: E402
from ir.dtypes import DType  # noqa: E402
from ir.graph import TensorType  # noqa: E402

# name, input channels, output channels, kernel, stride, input size at 224, residual Add, conv result returned
LAYERS = [
    ("stem 7x7/2 3->64", 3, 64, 7, 2, 224, False, False),
    ("layer1 3x3 64->64", 64, 64, 3, 1, 56, False, False),
    ("layer1 1x1 64->256 +res", 64, 256, 1, 1, 56, True, False),
    ("layer2 3x3/2 128->128", 128, 128, 3, 2, 56, False, False),
    ("layer3 1x1 256->1024 +res", 256, 1024, 1, 1, 14, True, False),
    ("layer4 3x3 512->512", 512, 512, 3, 1, 7, False, False),
    ("layer1 3x3 64->64 + y out", 64, 64, 3, 1, 56, False, True),
]


def layer_graph(batch: int, c: int, o: int, k: int, stride: int, size: int, residual: bool, keep: bool):
    f32 = DType.float32
    b = GraphBuilder(TensorType((batch, c, size, size), f32), TensorType((o, c, k, k), f32))
    x, w = b.inputs
    y = b.op("Conv2D", x, w, out_channel=o, kernel_size=(k, k), stride=stride, pad_mode="pad",
             pad=(k // 2,) * 4)
    params = [b.input((o,), f32) for _ in range(4)]
    z = b.ops("BatchNorm", y, *params, is_training=False, epsilon=1e-5)[0]
    if residual:
        z = b.op("Add", z, b.input(y.shape, f32))
    z = b.op("ReLU", z)
    return b.graph(*((z, y) if keep else (z,)))


def inputs(graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(v.shape).astype(np.float32) for v in graph.inputs]
    arrays[5] = np.abs(arrays[5]) + 0.5    # the moving variance
    return arrays


class Capture:
    """An observer keeping each launch's arrays (copies), by launch index."""

    def __init__(self):
        self.arrays: dict = {}

    def kernel(self, index, info, inputs, outputs, seconds):
        self.arrays[index] = [np.array(a).reshape(-1) for a in tuple(inputs) + tuple(outputs)]


def output_passes(compiled, arrays) -> list:
    """Callables running everything but the GEMMs in `compiled`: each conv step's output pass on its GEMM
    result, and every other launch (the composite after the conv when apart; BatchNorm's per-channel
    1/sqrt(var + eps) in both), on the arrays an observed call gave them."""
    program = compiled.program
    capture = Capture()
    program.run(arrays, capture)
    calls = []
    for k, step in enumerate(program.plan.launch_list):
        flat = capture.arrays[k]
        if step.info.variant == "conv":
            fn = step.fn
            result = fn.products(flat[fn.ix], flat[fn.iw])
            calls.append(lambda fn=fn, result=result, flat=flat: fn.output_pass(result, *flat))
        else:
            views = [a.view(np.uint16) if a.dtype == np.float16 else a for a in flat]
            calls.append(lambda step=step, views=views: step.fn(*views, *step.extra))
    return calls


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    scale = args.image / 224
    variants = {"fused": "", "apart": "--disable_pass=composite.conv_epilogue"}
    print(f"batch {args.batch}, image {args.image}, {args.repeat} calls each, medians in ms\n")
    print("| layer | fused epilogue | conv, then its composite | ratio | output pass fused | store + composite "
          "| ratio | kernels | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, c, o, k, stride, size, residual, keep in LAYERS:
        graph = layer_graph(args.batch, c, o, k, stride, max(k, round(size * scale)), residual, keep)
        arrays = inputs(graph)
        compiled = {v: compile_graph(graph, CompileOptions(enable_graph_kernel=True, flags=parse_flags(
            f, read_env=False)), eager=True) for v, f in variants.items()}
        results = {v: cg.run_arrays(arrays) for v, cg in compiled.items()}   # warm-up, and the check
        for got, want in zip(results["fused"], results["apart"]):
            assert np.array_equal(got, want), name
        load = os.getloadavg()[0]
        tails = {v: output_passes(cg, arrays) for v, cg in compiled.items()}
        times: dict = {v: [] for v in variants}
        tail_times: dict = {v: [] for v in variants}
        for r in range(args.repeat):
            for v in (variants if r % 2 == 0 else list(variants)[::-1]):
                times[v].append(timed(lambda: compiled[v].run_arrays(arrays)))
                tail_times[v].append(sum(timed(call) for call in tails[v]))
        med = {v: statistics.median(ts) * 1e3 for v, ts in times.items()}
        tail = {v: statistics.median(ts) * 1e3 for v, ts in tail_times.items()}
        counts = "/".join(str(len(compiled[v].kernels)) for v in variants)
        print(f"| {name} | {med['fused']:.2f} | {med['apart']:.2f} | {med['fused'] / med['apart']:.3f} | "
              f"{tail['fused']:.3f} | {tail['apart']:.3f} | {tail['fused'] / tail['apart']:.3f} | {counts} | "
              f"{load:.2f} |", flush=True)


if __name__ == "__main__":
    main()
