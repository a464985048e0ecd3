"""`graphkernel bench [--quick | --tiny] [--only NAME] [--out DIR]`: run the workloads, write the results.

    run(settings, only=None) -> results dict        (programmatic: the smoke test uses TINY)
    add_bench_parser(subparsers)                    (graphkernel/tools/cli.py registers the subcommand)
"""
from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time

from ir.errors import GraphKernelError
from kernels import threads
from graphkernel import context
from graphkernel.settings.flags import COMPILE_MODE_ENV
from graphkernel.tools.bench import (first_step, harness, outputs, peers, ranks_bench, train, train_bench,
                                     train_outputs, workloads)
from graphkernel.tools.bench.background import BackgroundLoad
from graphkernel.tools.bench.timing import Progress
from graphkernel.tools.cli_args import positive_int


class BenchError(GraphKernelError, ValueError):
    """A bench request that cannot run (an --only that names no workload)."""


def workload_list(settings: harness.Settings, only: str | None = None) -> list:
    out = []
    for shape in settings.seed_shapes:
        out += workloads.seed_nets(shape)
    for rows in settings.w_rows:
        out += workloads.kernel_suite(rows)
    if settings.models is not None:
        out += workloads.onnx_suite(*settings.models)
    for rows in settings.w_rows:
        out += train.train_suite(rows)
    wanted = [w.strip().lower() for w in only.split(",")] if only else None
    if settings.bert is not None and (wanted is None or any("bert" in w for w in wanted)):
        out += workloads.bert(**settings.bert) + train.bert_step(**settings.bert)
    if wanted is not None:
        out = [w for w in out if any(name in w.name.lower() for name in wanted)]
        if not out:
            raise BenchError(f"--only {only!r} names no workload; names contain e.g. 'W3', 'LayerNorm', "
                             "'NetBasicFuse', 'ONNX', 'BERT', 'fwd+bwd', 'T1', 'Grad', '4096x1024'")
    return out


def run(settings: harness.Settings, only: str | None = None, log=print) -> dict:
    """Measure every workload (in this process) and return the results."""
    chosen = workload_list(settings, only)
    results = {"mode": settings.mode, "only": only, "settings": dataclasses.asdict(settings),
               "environment": harness.environment(), "workloads": []}
    if results["environment"]["openblas_vars_set"]:
        log("warning: OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE is set; bench/run.sh unsets them")
    saved = {k: context.get_context(k) for k in ("device_target", "enable_graph_kernel", "op_compiler_cache_dir")}
    progress = Progress(len(chosen), enabled=settings.progress)
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="graphkernel-bench-") as scratch:
            runner = harness.Runner(settings, scratch, progress, log)
            for workload in chosen:
                progress.begin(workload.name)
                entry = runner.measure(workload)
                progress.end()
                results["workloads"].append(entry)
                log(_line(entry))
    finally:
        context.set_context(**saved)
    results["wall_s"] = time.perf_counter() - t0
    results["loadavg_end"] = list(os.getloadavg())
    results["targets"] = outputs.targets(results)
    return results


def _line(e: dict) -> str:
    r = e["ratios"]
    parts = [f"{e['name']}: kernels {e['impls']['unfused']['kernels']}->{e['impls']['fused']['kernels']}",
             f"fused {e['impls']['fused']['time']['median_s'] * 1e3:.3g} ms"]
    parts += [f"{k} {v:.2f}" for k, v in r.items()]
    phases = e["impls"]["fused"].get("phases", {})
    if "backward" in phases:
        unfused = e["impls"]["unfused"]["phases"]
        parts.append("per phase " + ", ".join(f"{p} {unfused.get(p, 0)}->{n}" for p, n in phases.items()))
    if not e["verified"]:
        bad = [n for n, d in e["impls"].items() if "verify" in d and not d["verify"]["ok"]]
        parts.append(f"VERIFY FAILED: {', '.join(bad)}")
    return "  ".join(parts)


def _ranks(args) -> int:
    settings = ranks_bench.RANKS_TINY if args.tiny else ranks_bench.RANKS_QUICK if args.quick else ranks_bench.RANKS_FULL
    results = ranks_bench.run(settings, args.ranks)
    paths = ranks_bench.write(results, args.out)
    print(ranks_bench.summary(results))
    print(f"wrote {', '.join(paths)} in {results['wall_s']:.0f} s")
    return 0


def _train(args) -> int:
    if args.ranks:
        return _ranks(args)
    if args.train == "bert-large":
        settings = train_bench.BERT_LARGE_TINY if args.tiny else train_bench.BERT_LARGE
    else:
        settings = train_bench.TRAIN_TINY if args.tiny else train_bench.TRAIN_QUICK if args.quick \
            else train_bench.TRAIN_FULL
    if args.no_peers:
        settings = dataclasses.replace(settings, peers=())
    if args.background:
        BackgroundLoad.parse(args.background)   # a bad value fails before anything is built
        settings = dataclasses.replace(settings, background=args.background)
    results = train_bench.run(settings)
    stem = "train_" + settings.mode.replace("-", "_")
    paths = train_outputs.write(results, args.out, stem)
    for t in results["targets"]:
        print(f"{t['target']}: {t['value'] if t['value'] is None else round(t['value'], 3)} "
              f"(target {'<=' if t['below'] else '>='} {t['limit']:g})")
    if paths["png"] is None:
        print("matplotlib is not installed: no chart (pip install matplotlib, or graphkernel[bench])")
    print(f"wrote {', '.join(p for p in paths.values() if p)} in {results['wall_s']:.0f} s")
    return 0


def _first_step(args) -> int:
    result = first_step.run(args.train or "stack", args.layers, args.compile_mode or "background", tiny=args.tiny)
    print(first_step.format_result(result))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"first_step_{args.train or 'stack'}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}")
    return 0


def _main(args) -> int:
    if args.ranks and not args.train:
        raise BenchError("--ranks goes with --train (graphkernel bench --train --ranks 2)")
    if args.first_step:
        return _first_step(args)
    # the steady-state timings want every kernel built before the first timed call, unless asked otherwise
    os.environ[COMPILE_MODE_ENV] = args.compile_mode or "wait"
    if args.train:
        return _train(args)
    settings = harness.TINY if args.tiny else harness.QUICK if args.quick else harness.FULL
    if args.no_peers:
        settings = dataclasses.replace(settings, peers=False)
    if args.no_cold:
        settings = dataclasses.replace(settings, cold_compile=False)
    if args.threads:
        threads.set_num_threads(args.threads)
        peers.limit_jax_threads(args.threads)
        settings = dataclasses.replace(settings, threads=args.threads)
    results = run(settings, args.only)
    stem = f"bench_{settings.mode}" + (f"_t{args.threads}" if args.threads else "")
    paths = outputs.write(results, args.out, stem=stem,
                         readme_table=settings.mode == "full" and not args.only and not args.threads)
    if paths["png"] is None:
        print("matplotlib is not installed: no chart (pip install matplotlib, or graphkernel[bench])")
    print(f"wrote {', '.join(p for p in paths.values() if p)} in {results['wall_s']:.0f} s")
    return 0 if all(e["verified"] for e in results["workloads"]) else 1


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="step-time benchmarks: fusion on vs off, numpy, jax, ONNX Runtime")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller sizes and repeats (under 3 minutes)")
    size.add_argument("--tiny", action="store_true", help="tiny sizes, one round (a smoke run)")
    p.add_argument("--only", metavar="NAME", help="workloads whose name contains NAME (comma-separated "
                   "alternatives, case-insensitive), e.g. W3, BERT, 4096x1024")
    p.add_argument("--out", default=os.path.join("bench", "results"), metavar="DIR",
                   help="where the JSON, the chart and the table go (default bench/results)")
    p.add_argument("--train", nargs="?", const="stack", choices=("stack", "bert-large"),
                   help="the BERT-large training step with nn.AdamW, fusion on and off, beside torch eager, "
                   "torch.compile and jax.jit when installed (pip install torch==2.13.0; pip install jax "
                   "jaxlib): 'stack' (default) the encoder at 1 and 4 layers; 'bert-large' the 24-layer model "
                   "with embeddings and the MLM projection, fused and unfused")
    p.add_argument("--ranks", type=positive_int, metavar="N",
                   help="with --train: the 4-layer step data-parallel over N ranks (mpiexec -n N, cores // N "
                   "threads each) against one process on every core: samples/s, time in AllReduce, the share "
                   "the backward hides (needs the extra graphkernel[dist])")
    p.add_argument("--no-peers", action="store_true", help="skip jax and ONNX Runtime (with --train: torch and jax)")
    p.add_argument("--background", metavar="K[:nice]", help="with --train: time every round again beside K busy "
                   "processes (python -c 'while True: pass') at that nice value (default 0), e.g. 1 or 1:19; "
                   "reports each implementation's quiet step, loaded step and their ratio")
    p.add_argument("--no-cold", action="store_true", help="skip the cold-compile measurement")
    p.add_argument("--threads", type=positive_int, metavar="N",
                   help="threads of graphkernel's kernels (numba), ONNX "
                   "Runtime and XLA (default: each one's own, the core count); numpy's BLAS takes "
                   "OPENBLAS_NUM_THREADS from the environment (bench/run.sh sets it); results go to "
                   "bench_<mode>_t<N>.*")
    p.add_argument("--compile-mode", choices=("background", "wait"),
                   help="how kernels build (--compile_mode): the timed steps default to wait (every kernel "
                   "built before the first call), --first-step to background")
    p.add_argument("--first-step", action="store_true",
                   help="time the first steps of a new model, cold (empty caches) and warm (a second process), "
                   "with --train stack|bert-large and --layers N (graphkernel/tools/bench/first_step.py)")
    p.add_argument("--layers", type=positive_int, help="with --first-step: encoder layers (stack: 1, bert-large: 24)")
    p.set_defaults(run=_main)
