"""The `graphkernel` command line: `graphkernel demo`, `graphkernel run MODEL.onnx`, `graphkernel bench`."""
from __future__ import annotations

import argparse
import sys

from ir.errors import GraphKernelError


def _demo(args) -> int:
    from graphkernel.demo import run_demo
    from graphkernel.dump import render
    results = run_demo(save_graphs_path=args.save_graphs, device_target=args.device_target,
                       repeat=args.repeat)
    if args.render:
        pictures = [render(path, "png") for r in results.values() for path in r.get("dump_files", ())
                    if path.endswith(".dot")]
        print(f"rendered {len(pictures)} PNG files next to the dumps")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphkernel", description="Graph-kernel fusion for an emulated "
                                     "Ascend AI Core, on the CPU.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    demo = sub.add_parser("demo", help="the seed example: fusion off and on, dumps, timings")
    demo.add_argument("--save-graphs", default="dot_out", metavar="DIR", help="where the .dot dumps go")
    demo.add_argument("--device-target", default="Ascend", choices=("Ascend", "CPU"))
    demo.add_argument("--repeat", type=_positive_int, default=200,
                      help="calls timed per net and side at 4x4 (median reported)")
    demo.add_argument("--render", action="store_true", help="also render every .dot dump to PNG "
                      "(needs Graphviz's dot)")
    demo.set_defaults(run=_demo)
    from graphkernel.onnx.run import add_run_parser
    add_run_parser(sub)
    from graphkernel.bench.cli import add_bench_parser
    add_bench_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except GraphKernelError as e:
        print(f"graphkernel: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
