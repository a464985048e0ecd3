"""Before/after of the row workloads, interleaved: two source trees of graphkernel, each in a live worker
process, asked in turn to time the same workload (fused, and ONNX Runtime beside it in the same process).

    python bench/rows_ab.py BEFORE_TREE AFTER_TREE [--threads N] [--rounds R] [--only W5,BERT] [--out FILE.json]

A tree is a directory holding graphkernel/, kernels/ and ir/ (a `git worktree` or `git archive` of a
commit). Each round sends every workload to both workers, the order alternating, so a change of the
machine's load hits both alike; per call: one settling call, then 3 timed calls of each implementation.
Prints a markdown table of medians: fused before and after, and fused/ORT of each tree (its own ORT
session, same process). Read the one-thread tables: with --threads 2 each worker's parallel launches share the
two cores with the other worker and with ONNX Runtime's spinning pool in its own process, so its figures
measure that contention (bench/results/rows_2026-11-26.md); `graphkernel bench`, which waits out ONNX
Runtime's spinning pool before timing the next side, gives the 2-thread ratios. The workloads: the seed nets at 4096x1024, W1-W6 at 256x1024 and 4096x1024, W4
and W5 at 16384x1024, the two ONNX models, T1/T2 at 256x1024 and the BERT layer from ONNX.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def worker(threads: int, only: str) -> None:
    from kernels import threads as pool
    pool.set_num_threads(threads)
    import numpy as np
    from graphkernel import Tensor, context
    from graphkernel.tools.bench import harness, peers, train, workloads as W
    chosen = W.seed_nets((4096, 1024))
    for rows in (256, 4096):
        chosen += W.kernel_suite(rows)
    chosen += [w for w in W.kernel_suite(16384) if w.family in ("W4", "W5")]
    chosen += W.onnx_suite(*harness.MODELS) + train.train_suite(256) + [w for w in W.bert() if "ONNX" in w.name]
    if only:
        chosen = [w for w in chosen if any(part.lower() in w.name.lower() for part in only.split(","))]
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    built = []
    for w in chosen:
        arrays = w.inputs(np.random.default_rng(0))
        tensors = [Tensor(a) for a in arrays]
        cell = w.make_cell()
        calls = {"fused": lambda cell=cell, t=tensors: cell(*t)}
        if w.onnx_model is not None:
            calls["onnxruntime"] = peers.ort_impl(w, arrays, threads)[0].call
        for call in calls.values():
            call()
            call()
        built.append((w.name, calls))
    print(json.dumps([name for name, _ in built]), flush=True)
    for line in sys.stdin:
        name, calls = built[int(line)]
        out = {}
        for k, call in calls.items():
            call()   # settle: the other implementation's threads go idle
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
            out[k] = times
        out["load"] = os.getloadavg()[0]
        print(json.dumps(out), flush=True)


def compare(trees: dict, threads: int, rounds: int, only: str = "") -> dict:
    procs = {}
    for label, root in trees.items():
        # a kernel cache of its own: two trees rendering the same kernel source (a change to how kernels
        # are compiled, not to what they say) must each run the kernel they built
        env = dict(os.environ, PYTHONPATH=os.path.abspath(root), NUMBA_NUM_THREADS=str(max(threads, 2)),
                   GRAPHKERNEL_CACHE_DIR=tempfile.mkdtemp(prefix=f"rows_ab_{label}_"))
        procs[label] = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(threads), only],
                                        cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    names = [json.loads(p.stdout.readline()) for p in procs.values()]
    if names[0] != names[1]:
        raise SystemExit("the two trees measure different workloads")
    names = names[0]
    times = {label: {n: {} for n in names} for label in trees}
    loads = []
    for r in range(rounds):
        for i, name in enumerate(names):
            order = list(trees) if (r + i) % 2 == 0 else list(trees)[::-1]
            for label in order:
                procs[label].stdin.write(f"{i}\n")
                procs[label].stdin.flush()
                out = json.loads(procs[label].stdout.readline())
                loads.append(out.pop("load"))
                for k, v in out.items():
                    times[label][name].setdefault(k, []).extend(v)
    for p in procs.values():
        p.stdin.close()
        p.wait()
    return {"threads": threads, "rounds": rounds, "load": [min(loads), statistics.median(loads), max(loads)],
            "median_s": {label: {n: {k: statistics.median(v) for k, v in d.items()} for n, d in per.items()}
                         for label, per in times.items()}}


def table(result: dict) -> str:
    b, a = result["median_s"]["before"], result["median_s"]["after"]
    lo, mid, hi = result["load"]
    lines = [f"{result['threads']} thread(s), {result['rounds']} rounds, load average {lo:.1f}-{hi:.1f} "
             f"(median {mid:.1f})", "",
             "| workload | fused ms before | after | after/before | fused/ORT before | after |", "|---|---|---|---|---|---|"]
    for name in a:
        ort = [d[name]["fused"] / d[name]["onnxruntime"] if "onnxruntime" in d[name] else None for d in (b, a)]
        text = ["–" if r is None else f"{r:.2f}" for r in ort]
        lines.append(f"| {name} | {b[name]['fused'] * 1e3:.3g} | {a[name]['fused'] * 1e3:.3g} "
                     f"| {a[name]['fused'] / b[name]['fused']:.2f} | {text[0]} | {text[1]} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--worker":
        return worker(int(sys.argv[2]), sys.argv[3])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", default="", help="workloads whose name holds one of these comma-separated words")
    p.add_argument("--out", help="also write the medians as JSON here")
    args = p.parse_args()
    result = compare({"before": args.before, "after": args.after}, args.threads, args.rounds, args.only)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print(table(result))


if __name__ == "__main__":
    main()
