"""The `graphkernel` command line: `graphkernel demo`, `graphkernel run MODEL.onnx`, `graphkernel report DIR`,
`graphkernel bench`, `graphkernel msrun` (data-parallel ranks of a script on one machine)."""
from __future__ import annotations

import argparse
import os
import sys

from ir.errors import GraphKernelError
from graphkernel.tools.cli_args import positive_int


def _demo(args) -> int:
    # each subcommand loads what it runs on demand, so `graphkernel --help` starts fast
    from graphkernel.tools.demo import run_demo
    from graphkernel.observation.dump import check_dot, render
    if args.render:
        check_dot("--render")   # before the demo runs, not after
    results = run_demo(save_graphs_path=args.save_graphs, device_target=args.device_target,
                       repeat=args.repeat)
    if args.render:
        pictures = [render(path, "png") for r in results.values() for path in r.get("dump_files", ())
                    if path.endswith(".dot")]
        print(f"rendered {len(pictures)} PNG files next to the dumps")
    print(f"see every stage in a browser: graphkernel report {args.save_graphs}")
    return 0


def _report(args) -> int:
    from graphkernel.observation.report import read_profile, write_report   # on demand, as every subcommand
    profile = read_profile(args.profile) if args.profile else None
    written = write_report(args.directory, profile)
    print(f"wrote {len(written) - 1} report pages and {written[-1]}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphkernel", description="Graph-kernel fusion for an emulated "
                                     "Ascend AI Core, on the CPU.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    demo = sub.add_parser("demo", help="the fusion example: fusion off and on, dumps, timings")
    demo.add_argument("--save-graphs", default="dot_out", metavar="DIR", help="where the .dot dumps go")
    demo.add_argument("--device-target", default="Ascend", choices=("Ascend", "CPU"))
    demo.add_argument("--repeat", type=positive_int, default=200,
                      help="calls timed per net and side at 4x4 (median reported)")
    demo.add_argument("--render", action="store_true", help="also render every .dot dump to PNG "
                      "(needs Graphviz's dot, an OS package: apt-get install graphviz)")
    demo.set_defaults(run=_demo)
    report = sub.add_parser("report", help="the stage dumps as HTML pages: one per compiled graph, and an index",
                            description="Make report_<id>.html beside the dumps of every compiled graph found in "
                            "DIR and its subdirectories (stages drawn by Graphviz's dot, composites that open to "
                            "their primitives, kernel table, fusion log), and DIR/index.html.")
    report.add_argument("directory", metavar="DIR", help="a save_graphs_path (the .dot dumps, compile_<id>.json)")
    report.add_argument("--profile", metavar="PROFILE_DIR", help="a Profiler's output_path: per-kernel times of "
                        "the same run in the kernel tables")
    report.set_defaults(run=_report)
    # the subcommands' modules load here, not at import: `graphkernel` alone need not import onnx
    from graphkernel.tools.run import add_run_parser
    add_run_parser(sub)
    from graphkernel.tools.bench.command import add_bench_parser   # (as above)
    add_bench_parser(sub)
    from graphkernel.tools.msrun import add_msrun_parser   # (as above)
    add_msrun_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.run(args)
        sys.stdout.flush()   # here, so that a reader gone early is caught below, not at exit
        return status
    except GraphKernelError as e:
        print(f"graphkernel: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `graphkernel run ... | head`: the reader left; stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
