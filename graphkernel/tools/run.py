"""`graphkernel run MODEL.onnx`: compile an ONNX model, run it, print output checksums (or the outputs), the
kernels and the step time.

    graphkernel run model.onnx --random                 random inputs of the declared shapes
    graphkernel run model.onnx --inputs in.npz          inputs by name (or arr_0, arr_1, ... in order)
    graphkernel run model.onnx --no-graph-kernel --device-target CPU --repeat 50
    graphkernel run model.onnx --dim batch=4            a size for a dynamic dim of --random inputs (1
                                                        without it); a model's dim_params compile once
                                                        for all their sizes
    graphkernel run model.onnx --save-graphs DIR --flags "--opt_level=3 --dump_as_text" --profile DIR
    graphkernel run model.onnx --check                  every kernel against the numpy reference
    graphkernel run model.onnx --print-outputs          the output arrays too, not only their checksums

Prints whether graph-kernel fusion ran (on at opt_level 1 and up: `--flags=--opt_level=0` turns it off),
each output's name, dtype, shape and checksum (the float64 sum and the mean of the absolute values), with
--print-outputs the arrays, the kernel table under its column headings (launch, name, op types, block_dim,
input and output shapes, the generated kernel it runs) and the median step time of
--repeat calls after a warm-up call that compiles. --profile runs the calls once more under graphkernel's Profiler: its per-kernel table,
and DIR/profiler/kernel_details.csv, step_trace.csv and trace.json. --check then runs every kernel alone on the
reference's values of its inputs (graphkernel.tools.debug.compare, the same inputs) and prints a row per kernel
(max abs / rel error, max ulp, within the dtype's tolerance or not); when one disagrees it exits with
status 1 and one line on stderr naming the first. Errors a user can cause exit with status 2 and one
line on stderr (cli.main).
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import graphkernel.onnx as gx
from ir.printer import printable
from graphkernel import context
from graphkernel.tools.cli_args import non_negative_int, positive_int
from graphkernel.tools.debug import CompareError, compare
from graphkernel.onnx.types import OnnxInputError
from graphkernel.observation.profiler import Profiler
from graphkernel.tensor import Tensor


def add_run_parser(sub) -> None:
    p = sub.add_parser("run", help="compile and run an ONNX model: output checksums, kernel table, step time",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model file")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--inputs", metavar="FILE.npz", help="input arrays by input name (or arr_0, ...)")
    source.add_argument("--random", action="store_true", help="random inputs (the default)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                   help="size of a named dynamic dim for --random (repeatable)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random inputs (>= 0)")
    p.add_argument("--no-graph-kernel", action="store_true", help="run with graph-kernel fusion off")
    p.add_argument("--save-graphs", metavar="DIR", help="write the stage dumps (.dot) into DIR")
    p.add_argument("--flags", default="", metavar='"--key=value ..."',
                   help='graph_kernel_flags; a single flag needs the = form: --flags=--opt_level=3')
    p.add_argument("--profile", nargs="?", const="./data", metavar="DIR",
                   help="profile the calls again: per-kernel table, DIR/profiler/*.csv (DIR: ./data)")
    p.add_argument("--repeat", type=positive_int, default=20, metavar="N", help="timed calls (median reported)")
    p.add_argument("--device-target", default="Ascend", choices=("Ascend", "CPU"))
    p.add_argument("--mix-compile-mode", action="store_true",
                   help="run ops graphkernel does not convert on the host through onnx.reference")
    p.add_argument("--print-outputs", action="store_true",
                   help="print the output arrays as well as their checksums (numpy's summary of a large array)")
    p.add_argument("--check", action="store_true",
                   help="run each kernel alone on the reference's values of its inputs and compare it with the "
                        "numpy reference: a row per kernel; exit 1 naming the first beyond tolerance")
    p.set_defaults(run=run_command)


def _dims(pairs: list[str]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        name, _, size = pair.partition("=")
        if not name or not size.isdigit():
            raise OnnxInputError(f"--dim {pair!r}: expected NAME=SIZE with a non-negative integer size")
        out[name] = int(size)
    return out


def read_inputs(path: str, cell) -> list:
    """Tensors for the model's inputs from an .npz file: by input name, else arr_0, arr_1, ... in order."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):   # a bare .npy array, not an archive of named arrays
                raise ValueError("it holds one array, not an .npz archive of arrays by input name")
            arrays = {k: data[k] for k in data.files}
    except Exception as e:  # noqa: BLE001 - whatever numpy, zipfile or zlib make of a broken file
        raise OnnxInputError(f"cannot read inputs from {path!r}: {type(e).__name__}: {e}") from None
    names = cell.input_names
    positional = [f"arr_{i}" for i in range(len(names))]
    keys = names if set(names) <= set(arrays) else positional if set(positional) <= set(arrays) else None
    if keys is None:
        missing = [n for n in names if n not in arrays]
        raise OnnxInputError(f"{path}: no array for input(s) {', '.join(map(repr, missing))} "
                             f"(the file has {', '.join(map(repr, arrays)) or 'no arrays'})")
    extra = sorted(set(arrays) - set(keys))
    if extra:
        raise OnnxInputError(f"{path}: array(s) {', '.join(map(repr, extra))} match no model input "
                             f"(inputs: {', '.join(map(repr, names))})")
    tensors = []
    for name, k in zip(names, keys):
        try:
            tensors.append(Tensor(arrays[k]))
        except Exception as e:  # noqa: BLE001 - a dtype we lack: name the input
            raise OnnxInputError(f"{path}: array {k!r} for input {name!r}: {e}") from None
    return tensors


def _shape(types) -> str:
    return ", ".join(str(t) for t in types)


KERNEL_HEADINGS = ("#", "name", "op types", "block_dim", "inputs -> outputs", "kernel")


def kernel_table(kernels) -> str:
    """The kernel table, its columns aligned under their headings."""
    rows = [[str(k), printable(info.name, 120), " ".join(info.op_types),
             "-" if info.block_dim is None else str(info.block_dim),
             f"({_shape(info.inputs)}) -> ({_shape(info.outputs)})", printable(info.kernel) or "-"]
            for k, info in enumerate(kernels)]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(KERNEL_HEADINGS)]
    lines = [KERNEL_HEADINGS] + rows
    return "\n".join("  " + "  ".join(c.rjust(w) if i == 0 else c.ljust(w) for i, (c, w) in
                                      enumerate(zip(line, widths))).rstrip() for line in lines)


def run_command(args) -> int:
    if args.inputs and args.dim:
        raise OnnxInputError("--dim sizes dynamic dims of --random inputs; with --inputs the arrays give them")
    if args.check and args.device_target != "Ascend":
        raise CompareError("--check compares the emulated AI Core's kernels with the numpy reference; with "
                           "--device-target CPU every kernel is the reference")
    context.set_context(device_target=args.device_target, enable_graph_kernel=not args.no_graph_kernel,
                        graph_kernel_flags=args.flags, mix_compile_mode=args.mix_compile_mode)
    if args.save_graphs:
        context.set_context(save_graphs=True, save_graphs_path=args.save_graphs)
    cell = gx.load(args.model)
    inputs = read_inputs(args.inputs, cell) if args.inputs else cell.random_inputs(args.seed, _dims(args.dim))
    start = time.perf_counter()
    outputs = cell(*inputs)
    compile_s = time.perf_counter() - start
    compiled = cell.compile(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)

    spec = cell.spec
    opts = compiled.options
    fusion = f"on (opt_level {opts.opt_level})" if opts.opt_level >= 1 else (
        "off (opt_level 0)" if opts.enable_graph_kernel else "off")
    print(f"model {args.model}: graph {spec.name!r}, opset {spec.opset}, {len(spec.nodes)} nodes; "
          f"target {args.device_target}, graph kernel {fusion}")
    print("inputs:" if inputs else "inputs: (none)")
    for name, t in zip(cell.input_names, inputs):
        print(f"  {printable(name)}  {t.dtype.value}{list(t.shape)}")
    print("outputs:")
    for name, t in zip(cell.output_names, outputs):
        a = t.asnumpy()
        mean_abs = float(np.mean(np.abs(a.astype(np.float64)))) if a.size else 0.0
        checksum = float(np.sum(a, dtype=np.float64))
        print(f"  {printable(name)}  {a.dtype}{list(a.shape)}  checksum sum={checksum:.9g} "
              f"mean_abs={mean_abs:.9g}")
        if args.print_outputs:
            print("    " + np.array2string(a, threshold=200, separator=", ").replace("\n", "\n    "))
    print(f"kernels ({len(compiled.kernels)}):")
    print(kernel_table(compiled.kernels))

    compiled.wait_for_kernels()   # the steps timed are those of the built kernels, not of their stand-ins
    steps = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        cell(*inputs)
        steps.append(time.perf_counter() - t0)
    print(f"step time: median {statistics.median(steps) * 1e3:.3f} ms over {args.repeat} calls "
          f"(first call, with compile: {compile_s:.2f} s)")
    if args.profile:
        profiler = Profiler(output_path=args.profile)
        for _ in range(args.repeat):
            cell(*inputs)
        profiler.analyse()
        print(f"profile: {profiler.directory}/kernel_details.csv, step_trace.csv, trace.json")
    if compiled.dump_files:
        print(f"dumps: {len(compiled.dump_files)} files in {args.save_graphs}")
    if args.check:
        result = compare(cell, *inputs)
        print(result.table())
        if result.first_bad is not None:
            sys.stdout.flush()
            print(f"graphkernel: check failed: {result.first_bad.describe()}", file=sys.stderr)
            return 1
    return 0

