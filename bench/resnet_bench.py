"""The ResNet-50 training step, timed: MindSpore 2.10 on its CPU, torch eager, and graphkernel fused and
unfused, each in a process of its own, their steps interleaved, with the load average.

    python bench/resnet_bench.py ROOT [--mindspore-python PY] [--impls mindspore,torch,fused,unfused]
                                      [--image 224] [--batch 2] [--classes 1001] [--rounds 3] [--json OUT]
    python bench/resnet_bench.py ROOT --convs [--image 224] [--batch 2] [--repeat 3]

ROOT is the folder official/cv/ResNet of MindSpore's models collection (this tool fetches nothing; none of
its files is in this repository). MindSpore and graphkernel train the official `resnet50` built as
train.py builds it on CPU/GPU (bench/resnet_sources.py: CrossEntropySmooth with smoothing 0.1, Momentum 0.9
with weight decay 1e-4 on conv and dense weights, loss scale 1024 through a FixedLossScaleManager without
overflow drop), from the same initial weights and batch; torch eager trains bench/torch_resnet50.py
(the same network in torch, SGD with momentum and the same decay groups).

Each worker builds its step and takes the first one (timed: compile and first run), one worker at a time;
then `--rounds` rounds each give every worker one step in turn, the order rotated by round, the load
average read before each round. Printed per implementation: the median and first step; for graphkernel
also, from one profiled step, the time in convolution kernels (forward, input gradient, weight gradient)
and outside them, and the kernel count per phase. `--convs` times each convolution shape of the network
(forward and both backward passes) in graphkernel's convolution kernels against torch's conv2d and its
gradients (torch.nn.grad). Targets (reported, never asserted): fused <= 0.8 x MindSpore's step and
<= 1.0 x torch eager's; fused/unfused outside the convolutions <= 0.6; each convolution within 1.3 x torch.

Run it on a quiet machine; on a shared one read only the ratios taken within one run, and the load.
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
from resnet_sources import batch, build_step, check_root, import_framework, prepare  # noqa: E402

IMPLS = ("mindspore", "torch", "fused", "unfused")
LR, WEIGHT_DECAY = 0.01, 1e-4
CONV_OPS = {"Conv2D": "forward", "Conv2DBackpropInput": "input grad", "Conv2DBackpropFilter": "weight grad"}


# --- the workers --------------------------------------------------------------------------------

def _reply(obj) -> None:
    sys.stdout.write("RESULT " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def _ours_profile(train, data) -> dict:
    """From one profiled step: seconds in each kind of convolution kernel and outside them, kernels per phase."""
    from graphkernel.tools.bench.timing import StepProfile   # a worker's own import: graphkernel is loaded here
    compiled = train.compile(*data)
    kernels = compiled.kernels
    phases = {p: sum(k.phase == p for k in kernels) for p in sorted({k.phase for k in kernels})}
    prof = StepProfile()
    compiled.program.profiler = prof
    try:
        train(*data)
    finally:
        compiled.program.profiler = None
    conv = {kind: 0.0 for kind in CONV_OPS.values()}
    for name, seconds in prof.kernels.items():
        for op in prof.infos[name].op_types:
            if op in CONV_OPS:
                conv[CONV_OPS[op]] += seconds
                break
    return {"phases": phases, "kernels": len(kernels), "conv_s": conv,
            "outside_conv_s": prof.total_s() - sum(conv.values()), "kernel_s": prof.total_s()}


def worker(args) -> None:
    x, y = batch(args.batch, args.image, args.classes)
    if args.worker == "torch":
        import torch
        from torch_resnet50 import ResNet50, optimizer, step
        torch.manual_seed(0)
        if args.threads:
            torch.set_num_threads(args.threads)
        net = ResNet50(args.classes)
        opt = optimizer(net, LR, WEIGHT_DECAY)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
        call = lambda: step(net, opt, tx, ty)  # noqa: E731
        train = data = None
    else:
        sys.path.insert(0, args.sources)
        framework = "mindspore" if args.worker == "mindspore" else "graphkernel"
        ms = import_framework(framework, fused=args.worker == "fused")
        train, _, _ = build_step(ms, "resnet50", args.classes, LR, WEIGHT_DECAY)
        data = [ms.Tensor(x), ms.Tensor(y)]
        call = lambda: float(np.asarray(train(*data).asnumpy()).reshape(-1)[0])  # noqa: E731
    t0 = time.perf_counter()
    loss = call()
    ready = {"first_s": time.perf_counter() - t0, "loss": loss}
    if args.worker in ("fused", "unfused"):
        ready.update(_ours_profile(train, data))
    _reply(ready)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "quit":
            return
        times = []
        for _ in range(cmd["n"]):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        _reply({"times": times})


class Worker:
    """A worker process answering over a pipe (lines starting RESULT; the rest is its own output)."""

    def __init__(self, name: str, python: str, sources: str, args):
        cmd = [python, os.path.abspath(__file__), args.root, "--worker", name, "--sources", sources,
               "--image", str(args.image), "--batch", str(args.batch), "--classes", str(args.classes)]
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "bench") + (
            "" if name == "mindspore" else os.pathsep + REPO))
        if args.threads:
            env.update(OMP_NUM_THREADS=str(args.threads), NUMBA_NUM_THREADS=str(args.threads))
            cmd += ["--threads", str(args.threads)]
        self.name = name
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=tempfile.gettempdir())

    def answer(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        err = self.proc.stderr.read()
        raise RuntimeError(f"{self.name} worker failed:\n{err[-4000:]}")

    def ask(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


# --- the step bench ----------------------------------------------------------------------------

def bench(args) -> dict:
    impls = [i for i in args.impls.split(",") if i]
    if "mindspore" in impls and not args.mindspore_python:
        print("mindspore: skipped (give --mindspore-python, a Python with mindspore 2.10 installed)")
        impls.remove("mindspore")
    work = tempfile.mkdtemp(prefix="resnet_bench_")
    workers, ready, times, loads = {}, {}, {}, []
    try:
        for framework in ("graphkernel", "mindspore"):
            prepare(args.root, os.path.join(work, framework), framework, "resnet50")
        for name in impls:
            python = args.mindspore_python if name == "mindspore" else sys.executable
            sources = os.path.join(work, "mindspore" if name == "mindspore" else "graphkernel")
            w = Worker(name, python, sources, args)
            try:
                ready[name] = w.answer()
            except RuntimeError as e:
                print(f"{name}: failed to build or take its first step ({str(e).splitlines()[-1]})")
                w.close()
                continue
            workers[name] = w
            times[name] = []
            print(f"{name}: first step {ready[name]['first_s']:.1f} s, loss {ready[name]['loss']:.4f}", flush=True)
        names = list(workers)
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for k in range(len(names)):
                name = names[(k + r) % len(names)]
                times[name] += workers[name].ask(cmd="time", n=1)["times"]
    finally:
        for w in workers.values():
            w.close()
        shutil.rmtree(work, ignore_errors=True)
    result = {"config": {"image": args.image, "batch": args.batch, "classes": args.classes, "rounds": args.rounds,
                         "threads": args.threads},
              "load": loads, "impls": {n: dict(ready[n], step_s=statistics.median(times[n]), steps_s=times[n])
                                       for n in times if times[n]}}
    report(result)
    return result


def report(result: dict) -> None:
    c, impls = result["config"], result["impls"]
    load = result["load"]
    print(f"\nResNet-50 training step, {c['image']}x{c['image']}, batch {c['batch']}, {c['classes']} classes; "
          f"median of {c['rounds']} interleaved steps; load average {min(load, default=0):.1f}-"
          f"{max(load, default=0):.1f}")
    print(f"   {'':12}{'step s':>9}{'first s':>9}{'conv fwd':>10}{'conv dx':>9}{'conv dw':>9}{'outside':>9}  kernels")
    for name, r in impls.items():
        conv = r.get("conv_s")
        cells = (f"{conv['forward']:10.2f}{conv['input grad']:9.2f}{conv['weight grad']:9.2f}"
                 f"{r['outside_conv_s']:9.2f}  {r['kernels']} {r['phases']}") if conv else ""
        print(f"   {name:12}{r['step_s']:9.2f}{r['first_s']:9.1f}{cells}")
    step = {n: r["step_s"] for n, r in impls.items()}
    if "fused" in step:
        for peer, target in (("mindspore", 0.8), ("torch", 1.0), ("unfused", None)):
            if peer in step:
                print(f"   fused / {peer}: {step['fused'] / step[peer]:.2f}" + (f" (target <= {target})" if target else ""))
        if "unfused" in impls:
            ratio = impls["fused"]["outside_conv_s"] / impls["unfused"]["outside_conv_s"]
            print(f"   fused / unfused outside the convolutions: {ratio:.2f} (target <= 0.6)")


# --- per convolution shape ------------------------------------------------------------------------

def conv_shapes(image: int, batch_size: int) -> list[tuple]:
    """(N, Cin, H, W, Cout, kernel, stride) of every distinct convolution of resnet50 at this image size."""
    shapes, h = [(batch_size, 3, image, image, 64, 7, 2)], -(-image // 2)
    h = -(-h // 2)   # the max pool
    cin = 64
    for n, cout, stride in ((3, 256, 1), (4, 512, 2), (6, 1024, 2), (3, 2048, 2)):
        for k in range(n):
            s = stride if k == 0 else 1
            mid = cout // 4
            shapes.append((batch_size, cin, h, h, mid, 1, 1))
            shapes.append((batch_size, mid, h, h, mid, 3, s))
            h2 = -(-h // s)
            shapes.append((batch_size, mid, h2, h2, cout, 1, 1))
            if k == 0:
                shapes.append((batch_size, cin, h, h, cout, 1, s))
            cin, h = cout, h2
    return sorted(set(shapes), key=shapes.index)


def _median_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _torch_passes(shape):
    import torch
    import torch.nn.functional as F
    n, cin, h, w, cout, k, s = shape
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((n, cin, h, w)).astype(np.float32))
    wt = torch.from_numpy(rng.standard_normal((cout, cin, k, k)).astype(np.float32))
    pad = (k - 1) // 2   # the symmetric part of "same"; the timing differs by at most a pixel's row
    y = F.conv2d(x, wt, stride=s, padding=pad)
    dy = torch.ones_like(y)
    return {"forward": lambda: F.conv2d(x, wt, stride=s, padding=pad),
            "input grad": lambda: torch.nn.grad.conv2d_input(x.shape, wt, dy, stride=s, padding=pad),
            "weight grad": lambda: torch.nn.grad.conv2d_weight(x, wt.shape, dy, stride=s, padding=pad)}


def _ours_passes(shape):
    """graphkernel's convolution kernels on the emulated AI Core, one compiled graph per pass."""
    from graphkernel.compiler import compile_graph   # graphkernel's own, loaded on demand by this tool
    from graphkernel.settings.options import CompileOptions
    from ir import GraphBuilder
    from ir.graph import TensorType
    from ir.dtypes import DType
    n, cin, h, w, cout, k, s = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, cin, h, w)).astype(np.float32)
    wt = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
    attrs = dict(out_channel=cout, kernel_size=(k, k), pad_mode="same", stride=(s, s))
    b = GraphBuilder(TensorType(x.shape, DType.float32), TensorType(wt.shape, DType.float32))
    fwd = b.graph(b.op("Conv2D", *b.inputs, **attrs))
    y_shape = fwd.outputs[0].shape
    dy = np.ones(y_shape, np.float32)
    b = GraphBuilder(TensorType(y_shape, DType.float32), TensorType(wt.shape, DType.float32))
    dx = b.graph(b.op("Conv2DBackpropInput", *b.inputs, input_size=x.shape, **attrs))
    b = GraphBuilder(TensorType(y_shape, DType.float32), TensorType(x.shape, DType.float32))
    dw = b.graph(b.op("Conv2DBackpropFilter", *b.inputs, filter_size=wt.shape, **attrs))
    runs = {}
    for kind, graph, arrays in (("forward", fwd, [x, wt]), ("input grad", dx, [dy, wt]), ("weight grad", dw, [dy, x])):
        compiled = compile_graph(graph, CompileOptions(), eager=True)
        runs[kind] = (lambda c, a: lambda: c.run_arrays(a))(compiled, arrays)
    return runs


def convs(args) -> None:
    print(f"resnet50's convolutions at {args.image}x{args.image}, batch {args.batch}: median of {args.repeat} calls, "
          f"ms; load average {os.getloadavg()[0]:.1f}")
    print(f"   {'N, Cin, H, W -> Cout, k, stride':34}" + "".join(f"{k + ' ours/torch':>26}" for k in CONV_OPS.values()))
    for shape in conv_shapes(args.image, args.batch):
        torch_runs = _torch_passes(shape)
        try:
            ours = _ours_passes(shape)
        except Exception as e:  # noqa: BLE001 - a missing op is reported, the torch figures still printed
            ours = {}
            print(f"   (graphkernel: {type(e).__name__}: {str(e).splitlines()[0][:100]})")
        cells = []
        for kind in CONV_OPS.values():
            t = _median_time(torch_runs[kind], args.repeat) * 1e3
            if kind in ours:
                o = _median_time(ours[kind], args.repeat) * 1e3
                cells.append(f"{o:9.2f} /{t:8.2f} ={o / t:5.2f}")
            else:
                cells.append(f"{'-':>9} /{t:8.2f}      ")
        n, cin, h, w, cout, k, s = shape
        print(f"   {f'{n}, {cin}, {h}, {w} -> {cout}, {k}, {s}':34}" + "".join(f"{c:>26}" for c in cells), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="the folder official/cv/ResNet of MindSpore's models collection")
    parser.add_argument("--mindspore-python", help="a Python with mindspore 2.10 installed")
    parser.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated, of {', '.join(IMPLS)}")
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--classes", type=int, default=1001)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, help="threads per worker (OMP_NUM_THREADS, NUMBA_NUM_THREADS, "
                        "torch.set_num_threads); default: each framework's own choice")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--convs", action="store_true", help="time each convolution shape instead")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worker", choices=IMPLS, help=argparse.SUPPRESS)
    parser.add_argument("--sources", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    problem = check_root(args.root)
    if problem:
        parser.error(f"ROOT must be the folder official/cv/ResNet: {problem}")
    bad = set(args.impls.split(",")) - set(IMPLS) - {""}
    if bad:
        parser.error(f"unknown implementation(s) {sorted(bad)}; accepted: {', '.join(IMPLS)}")
    if args.convs:
        convs(args)
        return 0
    result = bench(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
