"""Overflow check (enable_dump_debug, dump_debug_mode): which kernels first produced inf or NaN.

Every launch's floating outputs are checked after it runs. In each step, the report names the first
launch whose outputs hold inf/NaN and every later one whose inputs were all finite (an overflow that
arose there, not one passed along), with its inputs and outputs saved as .npy:

    DUMP_PATH/overflow_report.json      {"overflows": [{graph_id, step, launch, name, kernel, op_types,
                                          block_dim, check, inputs_finite, outputs: [{index, dtype,
                                          shape, nan_count, inf_count}], files: [...]}, ...],
                                         "truncated": false}
    DUMP_PATH/overflow/graph_<id>/step_<n>/<launch>_<name>.<input|output>.<i>.npy

dump_debug_mode picks the launches checked: "atomic_overflow" the reductions that combine per-block
partials (the emulated atomic add: the "split" kernels of the Ascend target), "aicore_overflow" every
other launch, "all" (default) both. The first overflow of a graph also warns (OverflowWarning). The
report is rewritten after each step that adds to it, under a temporary name; it keeps the first
MAX_ENTRIES entries of the process for its dump_path.
"""
from __future__ import annotations

import json
import os
import threading
import warnings

import numpy as np

from ir.dtypes import is_float_array
from ir.printer import printable
from graphkernel.observation.datadump import (DumpError, dump_file, ensure_directory, file_stem, format_shape, save_array,
                                  write_atomic)
from graphkernel.settings.user_frame import user_stacklevel

MAX_ENTRIES = 200

_reports: dict[str, dict] = {}      # report path -> {"overflows": [...], "truncated": bool}
_lock = threading.Lock()


class OverflowWarning(RuntimeWarning):
    """A kernel produced inf or NaN (enable_dump_debug)."""


def check_kind(launch) -> str:
    return "atomic_overflow" if launch.variant == "split" else "aicore_overflow"


def _finite(a: np.ndarray) -> bool:
    return not is_float_array(a) or bool(np.isfinite(a).all())


class OverflowCheck:
    def __init__(self, path: str, mode: str):
        self.path, self.mode = path, mode
        self.report_path = os.path.join(path, "overflow_report.json")
        self.found_in_step = False
        self.new_entries: list[dict] = []
        self.warned = False

    def begin_step(self, compiled, step: int) -> None:
        self.found_in_step = False
        self.new_entries = []

    def kernel(self, compiled, step, launch, inputs, outputs, seconds) -> None:
        if self.mode != "all" and check_kind(launch) != self.mode:
            return
        if all(_finite(a) for a in outputs):
            return
        inputs_finite = all(_finite(a) for a in inputs)
        if self.found_in_step and not inputs_finite:
            return      # inf/NaN passed along from an earlier launch already reported
        self.found_in_step = True
        bad = []
        for i, a in enumerate(outputs):
            if not _finite(a):
                bad.append({"index": i, "dtype": a.dtype.name, "shape": format_shape(a.shape),
                            "nan_count": int(np.isnan(a).sum()), "inf_count": int(np.isinf(a).sum())})
        self.new_entries.append({
            "graph_id": compiled.graph_id, "step": step, "launch": launch.index, "name": launch.name,
            "kernel": launch.kernel, "op_types": list(launch.op_types), "block_dim": launch.block_dim,
            "check": check_kind(launch), "inputs_finite": inputs_finite, "outputs": bad,
            "files": self._save(compiled, step, launch, inputs, outputs)})

    def _save(self, compiled, step, launch, inputs, outputs) -> list[str]:
        rel_dir = os.path.join("overflow", f"graph_{compiled.graph_id}", f"step_{step}")
        ensure_directory(os.path.join(self.path, rel_dir), DumpError)
        files = []
        for io_name, arrays in (("input", inputs), ("output", outputs)):
            for i, a in enumerate(arrays):
                filename = f"{file_stem(launch)}.{io_name}.{i}.npy"
                save_array(dump_file(os.path.join(self.path, rel_dir), filename), a)
                files.append(os.path.join(rel_dir, filename))
        return files

    def end_step(self, compiled, step, seconds, count) -> None:
        if not self.new_entries:
            return
        first = self.new_entries[0]
        with _lock:
            report = _reports.setdefault(self.report_path, {"overflows": [], "truncated": False})
            room = MAX_ENTRIES - len(report["overflows"])
            report["overflows"].extend(self.new_entries[:max(room, 0)])
            report["truncated"] = report["truncated"] or room < len(self.new_entries)
            write_atomic(self.report_path, (json.dumps(report, indent=1) + "\n").encode())
        self.new_entries = []
        if not self.warned:
            self.warned = True
            counts = ", ".join(f"output {o['index']}: {o['inf_count']} inf, {o['nan_count']} nan"
                               for o in first["outputs"])
            warnings.warn(f"overflow in graph {first['graph_id']} step {step}: kernel "
                          f"{printable(first['name'])} "
                          f"({'+'.join(first['op_types'])}) produced inf/NaN ({counts}); report: "
                          f"{self.report_path}", OverflowWarning, stacklevel=user_stacklevel())
