"""Data dump: the tensors (or their statistics) every kernel launch reads and writes, per step.

The settings are CANN's: enable_dump, dump_path, dump_mode (input | output | all), dump_step
("0|5|10", "0|3-5|10"; unset: every step), dump_layer (names separated by spaces; unset: every
launch), dump_data ("tensor": .npy arrays, "stats": one CSV per step). They are checked when set and
apply to graphs compiled afterwards (GRAPH_MODE; PYNATIVE's one-op runs are not dumped).

    DUMP_PATH/
      graph_<id>/
        kernels.csv                     one row per launch: launch, file, name, kernel, op_types,
                                        block_dim, input_shape, input_data_type, output_shape, ...
        step_<n>/                       n counts the calls of graph <id> from 0
          <launch>_<name>.input.<i>.npy      dump_data="tensor", dump_mode input or all
          <launch>_<name>.output.<i>.npy     dump_data="tensor", dump_mode output or all
          statistic.csv                      dump_data="stats": name, input_output, index, dtype, shape,
                                             min, max, mean, nan_count, inf_count, kernel, launch
      overflow_report.json              enable_dump_debug (graphkernel/observation/overflow.py)

`<launch>` is the launch's position in the graph (4 digits), so files sort in execution order and
two names that sanitize alike never share a file; `<name>` is the node's scope name (or a composite's
name) through ir.filenames.safe_filename: every character other than letters, digits, `_` and `-`
made `_`, shortened with a hash when long; every path is checked to stay inside dump_path.
dump_layer names a node by its scope name, a composite by its name, or a kernel by its
kernel name; naming an op that fusion put inside a composite warns and dumps the composite's inputs
and outputs. Every file is written under a temporary name and renamed: none is ever half-written.
"""
from __future__ import annotations

import csv
import io
import os
import warnings

import numpy as np

from ir.dtypes import is_float_array
from ir.errors import GraphKernelError
from ir.filenames import UnsafePathError, path_in, safe_filename
from graphkernel.settings.dump_settings import ensure_directory
from graphkernel.settings.user_frame import user_stacklevel


class DumpError(GraphKernelError, OSError):
    """A dump directory or file that cannot be written, or dump settings that do not fit together."""


class DumpLayerWarning(UserWarning):
    """A dump_layer name that is not a launch of the graph (fused into a composite, or absent)."""


# --- file names ------------------------------------------------------------------------------------
def file_stem(launch) -> str:
    """`<launch>_<name>`: the index keeps names that sanitize alike apart, so no hash is needed for them."""
    return f"{launch.index:04d}_{safe_filename(launch.name, hash_changes=False)}"


def dump_file(directory: str, filename: str) -> str:
    """`directory/filename`, checked to stay inside `directory` (a DumpError otherwise)."""
    try:
        return path_in(directory, filename)
    except UnsafePathError as e:
        raise DumpError(str(e)) from None


def format_shape(shape) -> str:
    return ",".join(str(d) for d in shape)


def write_atomic(path: str, data: bytes) -> None:
    """`data` into `path` whole or not at all (a temporary file renamed; removed if the write fails)."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise DumpError(f"cannot write dump file {path!r}: {e.strerror or type(e).__name__}") from None


def save_array(path: str, array: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array))
    write_atomic(path, buf.getvalue())


def csv_bytes(header, rows) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8", "backslashreplace")   # a name may hold a lone surrogate


# --- statistics ------------------------------------------------------------------------------------
STATS_HEADER = ("name", "input_output", "index", "dtype", "shape", "min", "max", "mean", "nan_count",
                "inf_count", "kernel", "launch")


def statistics(a: np.ndarray) -> tuple:
    """(min, max, mean, nan count, inf count); min, max and mean skip NaNs (an inf counts), and are
    empty when no element is left. The mean is accumulated in float64."""
    a = np.asarray(a)
    if is_float_array(a):
        nan = np.isnan(a)
        nans, infs = int(nan.sum()), int(np.isinf(a).sum())
        a = a[~nan] if nans else a
    else:
        nans = infs = 0
    if a.size == 0:
        return "", "", "", nans, infs
    a = a.astype(np.float64) if a.dtype.kind in "fbiu" or is_float_array(a) else a
    with np.errstate(all="ignore"):
        return float(a.min()), float(a.max()), float(a.mean()), nans, infs


# --- the sink --------------------------------------------------------------------------------------
class DataDump:
    """Writes the selected launches' tensors (or statistics) for the selected steps of one graph."""

    def __init__(self, graph_id: int, stages: dict, launches, path: str, mode: str, steps, layer, data: str):
        self.root = os.path.join(path, f"graph_{graph_id}")
        self.inputs, self.outputs = mode in ("input", "all"), mode in ("output", "all")
        self.steps, self.data = steps, data
        self.selected = select_launches(graph_id, stages, launches, layer)
        self.stems = {launch.index: file_stem(launch) for launch in launches}
        self.rows: list = []
        ensure_directory(self.root, DumpError)
        write_atomic(dump_file(self.root, "kernels.csv"), csv_bytes(
            ("launch", "file", "name", "kernel", "op_types", "block_dim", "input_shape", "input_data_type",
             "output_shape", "output_data_type", "dumped"),
            [(la.index, self.stems[la.index], la.name, la.kernel, "+".join(la.op_types),
              "" if la.block_dim is None else la.block_dim, ";".join(format_shape(t.shape) for t in la.inputs),
              ";".join(t.dtype.value for t in la.inputs), ";".join(format_shape(t.shape) for t in la.outputs),
              ";".join(t.dtype.value for t in la.outputs), int(la.index in self.selected)) for la in launches]))

    def wanted(self, step: int) -> bool:
        return self.steps is None or any(lo <= step <= hi for lo, hi in self.steps)

    def step_dir(self, step: int) -> str:
        return os.path.join(self.root, f"step_{step}")

    def begin_step(self, compiled, step: int) -> None:
        self.rows = []
        if self.wanted(step):
            ensure_directory(self.step_dir(step), DumpError)

    def kernel(self, compiled, step, launch, inputs, outputs, seconds) -> None:
        if launch.index not in self.selected or not self.wanted(step):
            return
        stem = self.stems[launch.index]
        for io_name, arrays, on in (("input", inputs, self.inputs), ("output", outputs, self.outputs)):
            if not on:
                continue
            for i, a in enumerate(arrays):
                if self.data == "tensor":
                    save_array(dump_file(self.step_dir(step), f"{stem}.{io_name}.{i}.npy"), a)
                else:
                    self.rows.append((launch.name, io_name, i, a.dtype.name, format_shape(a.shape),
                                      *statistics(a), launch.kernel, launch.index))

    def end_step(self, compiled, step, seconds, count) -> None:
        if self.data == "stats" and self.wanted(step):
            write_atomic(dump_file(self.step_dir(step), "statistic.csv"), csv_bytes(STATS_HEADER, self.rows))
        self.rows = []


def select_launches(graph_id: int, stages: dict, launches, layer: str | None) -> set[int]:
    """The launch indices dump_layer selects; warns for names fused into a composite or absent."""
    if layer is None:
        return {la.index for la in launches}

    def warn(text: str) -> None:
        warnings.warn(f"dump_layer: {text}", DumpLayerWarning, stacklevel=user_stacklevel())

    chosen, graph = set(), graph_id
    for name in layer.split():
        direct = [la for la in launches if name in (la.name, la.kernel)]
        if direct:
            chosen.update(la.index for la in direct)
            continue
        holders = [la for la in launches if name in la.members]
        if holders:
            chosen.update(la.index for la in holders)
            where = ", ".join(f"{la.name} (kernel {la.kernel})" if la.kernel else la.name for la in holders)
            warn(f"{name!r} was fused into composite {where} in graph {graph}; dumping the composite's "
                 "inputs and outputs instead")
        elif any(n.name == name for g in stages.values() for n in g.nodes):
            warn(f"{name!r} was removed by the passes (folded or eliminated) in graph {graph}; nothing to "
                 "dump for it")
        else:
            sample = ", ".join(repr(la.name) for la in launches[:3])
            warn(f"no op named {name!r} in graph {graph} (its launches are named like {sample})")
    return chosen
