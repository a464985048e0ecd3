"""The compile record, `compile_<id>.json`: what a compile knows that its stage drawings do not show.

save_graphs writes it beside the `.dot` stage dumps; `graphkernel report` (graphkernel/observation/report.py) reads
both. It holds the compile's settings, one row per launch (name, op types, the generated kernel, its
variant, block_dim, tile, the UB bytes a tile budgets, shapes and bytes moved), the generated kernel
sources, which node of the kernel graph drawing is which launch, and the fusion log (every candidate,
the decision, the reason and the cost-model figures). Deterministic: the same compile gives the same
bytes (sorted keys, no paths, no times); ASCII, so no name can break the file.
"""
from __future__ import annotations

import json
import math

from ir.errors import GraphKernelError
from ir.printer import format_type

FORMAT = 1


def record_stem(graph_id: int) -> str:
    return f"compile_{graph_id}"


def _figure(value):
    """A fusion-log figure as JSON holds it (an inf or NaN cost becomes its text)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)


def _launch_row(index: int, info, standin: bool = False) -> dict:
    """`standin`: the launch started on its stand-in, its kernel building in the background."""
    block_dim = getattr(info, "block_dim", None)
    return {
        "index": index, "name": info.name, "ops": list(info.op_types), "kernel": info.kernel or "",
        "variant": getattr(info, "variant", "") or "", "target": info.target, "phase": info.phase,
        "block_dim": block_dim, "tile": getattr(info, "tile", 0), "ub_bytes": getattr(info, "ub_bytes", 0),
        "inputs": [format_type(t) for t in info.inputs], "outputs": [format_type(t) for t in info.outputs],
        "bytes": sum(t.nbytes for t in info.inputs + info.outputs), "standin": standin,
    }


def kernel_graph_nodes(program) -> dict[str, int]:
    """The id of each top-level launch in the kernel graph drawing (`k<step>`, kernels/kernel_graph.py)
    -> its index among the launches (an If's step is no launch: its branches' launches are)."""
    out = {}
    for k, (step, position) in enumerate(zip(program.steps, program.positions)):
        if position < len(program.launch_list) and program.launch_list[position] is step:
            out[f"k{k}"] = position
    return out


def compile_record(compiled, stage_files: list[str]) -> dict:
    """The record of a CompiledGraph; `stage_files` are the names of the stage dumps it wrote."""
    opts = compiled.options
    kernels = list(compiled.kernels)
    standins = set() if compiled.program is None else compiled.program.standin_positions()
    sources = {info.kernel: info.source for info in kernels if getattr(info, "source", None) and info.kernel}
    return {
        "format": FORMAT,
        "graph_id": compiled.graph_id,
        "target": opts.device_target,
        "enable_graph_kernel": opts.enable_graph_kernel,
        "opt_level": opts.opt_level,
        "fusion_switch": None if opts.fusion_switch is None else str(opts.fusion_switch),
        "precision_mode": opts.precision_mode,
        "stage_files": list(stage_files),
        "launches": [_launch_row(k, info, k in standins) for k, info in enumerate(kernels)],
        "kernel_graph_nodes": {} if compiled.program is None else kernel_graph_nodes(compiled.program),
        "sources": sources,
        "fusion_log": [{"stage": r.stage, "candidates": list(r.candidates), "accepted": r.accepted,
                        "reason": r.reason, "figures": {k: _figure(v) for k, v in sorted(r.figures.items())},
                        "composites": list(r.composites), "earlier": list(r.earlier)} for r in compiled.log],
    }


def dumps(record: dict) -> str:
    return json.dumps(record, sort_keys=True, indent=1, ensure_ascii=True) + "\n"


class RecordError(GraphKernelError, ValueError):
    """A compile record that cannot be read."""


def load(path: str) -> dict:
    try:
        with open(path, encoding="ascii") as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        raise RecordError(f"cannot read compile record {path!r}: {e}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise RecordError(f"{path!r} is not a compile record of format {FORMAT}")
    return record
