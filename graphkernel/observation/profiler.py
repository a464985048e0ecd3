"""Profiler, MindSpore-style: per-kernel times of every compiled graph run in the process.

    prof = Profiler(output_path="./data")   # starts collecting (start_profile=False: call start())
    net(x); net(x)                           # every call of a compiled graph is observed
    prof.stop()
    rows = prof.analyse()                    # stops if running, prints a table, writes:

    DIR/profiler/kernel_details.csv   one row per kernel launch of a graph, over all calls:
        op_type, block_dim, input_shape, input_data_type, input_formats   (CANN's profiler columns)
        kernel, name, calls, total_time_us, avg_time_us, graph_id
    DIR/profiler/step_trace.csv       one row per step (a top-level call of a compiled graph):
        step, start (us since the profiler started), duration_us, kernels, graph_id
    DIR/profiler/kernel_builds.csv    one row per kernel built in the background (--compile_mode=background) that
                                      arrived meanwhile: kernel, graph_id, launches, requested_us, built_us,
                                      first_step (the graph's call that first ran it), first_step_us, build_s
    DIR/profiler/trace.json           the timeline in Chrome's trace-event format, for Perfetto: one event per
                                      launch, steps marked, and in a data-parallel job each collective as the
                                      communicator's thread ran it (graphkernel/observation/chrome_trace.py)

op_type is the primitive of a single-op kernel and the composite's name (`Fused_<ops>_<n>`, as the
dumps and the fusion log call it) for a composite; block_dim is the launch's (empty on the CPU
target); shapes are written `1,256,256,3`, dtypes `DT_FLOAT16`, several inputs joined by `;`;
input_formats is `ND` (graphkernel tensors carry no layout). standin_calls counts the calls that ran the
launch's stand-in while its kernel built in the background (docs/kernels.md). kernel is the generated kernel the launch
runs (`Fused_Mul_Add_<hash>`, shared by every composite of that structure; empty on the CPU target and
for MatMul, host ops and copies), name the node's scope name or the composite's name. One Profiler collects at a
time (`active_profiler()`; compiled graphs show it their launches through
graphkernel/observation/launches.py). Times include the per-launch observation and, on the CPU
target, the numpy reference: compare them with each other, not with unprofiled runs.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from ir.dtypes import DType
from ir.errors import GraphKernelError
from ir.filenames import path_in
from ir.printer import printable
from graphkernel.observation import chrome_trace
from graphkernel.communication.management import engine
from graphkernel.observation.datadump import csv_bytes, format_shape, write_atomic
from graphkernel.observation.launches import Launch

KERNEL_COLUMNS = ("op_type", "block_dim", "input_shape", "input_data_type", "input_formats", "kernel", "name",
                  "calls", "total_time_us", "avg_time_us", "graph_id", "standin_calls")
BUILD_COLUMNS = ("kernel", "graph_id", "launches", "requested_us", "built_us", "first_step", "first_step_us",
                 "build_s")
STEP_COLUMNS = ("step", "start", "duration_us", "kernels", "graph_id")
TRACE_EVENT_LIMIT = 1_000_000   # launch events kept for trace.json (about 300 bytes each); later ones are counted


class ProfilerError(GraphKernelError, RuntimeError):
    """A Profiler used wrongly (two at once), or an output path that cannot be written."""


_DT_NAMES = {DType.float32: "DT_FLOAT", DType.float16: "DT_FLOAT16", DType.float64: "DT_DOUBLE",
             DType.bfloat16: "DT_BF16"}


def dt_name(dtype: DType) -> str:
    """CANN's name of a dtype: DT_FLOAT16, DT_FLOAT, DT_INT32, ..."""
    return _DT_NAMES.get(dtype) or f"DT_{dtype.value.upper()}"


@dataclass
class _KernelStat:
    graph_id: object
    launch: Launch
    calls: int = 0
    seconds: float = 0.0
    standin_calls: int = 0      # calls that ran the launch's stand-in (its kernel was building)


_active = None     # the Profiler collecting now, if any


def active_profiler() -> Profiler | None:
    """The Profiler collecting now (None: no call is profiled)."""
    return _active


class Profiler:
    def __init__(self, output_path: str | os.PathLike = "./data", start_profile: bool = True):
        self.output_path = os.path.abspath(os.fspath(output_path))
        self.directory = os.path.join(self.output_path, "profiler")
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise ProfilerError(f"Profiler output path {self.directory!r} cannot be created: "
                                f"{e.strerror or type(e).__name__}") from None
        self._kernels: dict[tuple, _KernelStat] = {}
        self._graphs: list = []         # the graphs seen, kept alive so their ids stay unique keys
        self._steps: list[tuple] = []
        self._origin = time.perf_counter()
        self._step_start: dict[int, float] = {}
        self._launches: list[tuple] = []   # (graph id, step, Launch, start us, us): trace.json's events
        self._step_events: list[dict] = []
        self._dropped = 0
        self._stopped_at: float | None = None   # the end of the window the communicator's spans are taken from
        self._builds: list[tuple] = []      # (graph id, kernels.executor.Arrival)
        self._lock = threading.Lock()     # graphs run in several threads record into one profile
        self.collecting = False
        if start_profile:
            self.start()

    # --- collecting --------------------------------------------------------------------------
    def start(self) -> None:
        global _active
        if _active is not None and _active is not self:
            raise ProfilerError("another Profiler is collecting; call its stop() first")
        _active = self
        self.collecting = True

    def stop(self) -> None:
        global _active
        if _active is self:
            _active = None
        if self.collecting:
            self._stopped_at = time.perf_counter()
        self.collecting = False

    def begin_step(self, compiled, step: int) -> None:
        self._step_start[id(compiled)] = time.perf_counter()

    def kernel(self, compiled, step, launch, inputs, outputs, seconds) -> None:
        end = time.perf_counter()
        key = (id(compiled), launch.index)
        with self._lock:
            stat = self._kernels.get(key)
            if stat is None:
                graph_id = "pynative" if compiled.graph_id is None else compiled.graph_id
                stat = self._kernels[key] = _KernelStat(graph_id, launch)
                self._graphs.append(compiled)
            stat.calls += 1
            stat.seconds += seconds
            stat.standin_calls += launch.standin
            if len(self._launches) < TRACE_EVENT_LIMIT:   # made into events by analyse(): little work here
                self._launches.append((stat.graph_id, step, launch, (end - seconds - self._origin) * 1e6,
                                       seconds * 1e6))
            else:
                self._dropped += 1

    def kernel_arrived(self, compiled, arrival) -> None:
        """A kernel built in the background replaced its stand-ins (graphkernel/observation/launches.py)."""
        graph_id = "pynative" if compiled.graph_id is None else compiled.graph_id
        with self._lock:
            self._builds.append((graph_id, arrival))

    def end_step(self, compiled, step, seconds, count) -> None:
        end = time.perf_counter()
        start = self._step_start.pop(id(compiled), None)
        if compiled.graph_id is None or start is None:
            return      # a PYNATIVE one-op run: its kernel counts, it is no step
        with self._lock:
            self._steps.append((len(self._steps), round((start - self._origin) * 1e6, 3),
                                round(seconds * 1e6, 3), count, compiled.graph_id))
            # the trace's step spans its launches' events: from begin_step to now
            self._step_events += chrome_trace.step_events(compiled.graph_id, step, (start - self._origin) * 1e6,
                                                          (end - start) * 1e6, count)

    # --- results -----------------------------------------------------------------------------
    def kernel_rows(self) -> list[dict]:
        rows = []
        for stat in self._kernels.values():
            la = stat.launch
            total = stat.seconds * 1e6
            rows.append(dict(zip(KERNEL_COLUMNS, (
                la.op_type, "" if la.block_dim is None else la.block_dim,
                ";".join(format_shape(t.shape) for t in la.inputs), ";".join(dt_name(t.dtype) for t in la.inputs),
                ";".join("ND" for _ in la.inputs), la.kernel, la.name, stat.calls, round(total, 3),
                round(total / stat.calls, 3), stat.graph_id, stat.standin_calls))))
        rows.sort(key=lambda r: -r["total_time_us"])
        return rows

    def step_rows(self) -> list[dict]:
        return [dict(zip(STEP_COLUMNS, s)) for s in self._steps]

    def build_rows(self) -> list[dict]:
        """One row per kernel built in the background that arrived while collecting: when it was asked
        for and built (us since the profiler started; negative: before it), the graph's call that first
        ran it and when that call began, the build process's seconds."""
        us = lambda t: round((t - self._origin) * 1e6, 3)  # noqa: E731
        return [dict(zip(BUILD_COLUMNS, (a.kernel, g, " ".join(map(str, a.positions)), us(a.queued_at),
                                          us(a.built_at), a.call, us(a.swapped_at), round(a.build_seconds, 3))))
                for g, a in self._builds]

    def analyse(self, print_table: bool = True) -> list[dict]:
        """Stop if collecting, write the two CSVs and the trace, print the kernel table; the kernel rows."""
        self.stop()
        rows, steps = self.kernel_rows(), self.step_rows()
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise ProfilerError(f"Profiler output path {self.directory!r} cannot be created: "
                                f"{e.strerror or type(e).__name__}") from None
        for name, columns, data in (("kernel_details.csv", KERNEL_COLUMNS, rows),
                                    ("step_trace.csv", STEP_COLUMNS, steps),
                                    ("kernel_builds.csv", BUILD_COLUMNS, self.build_rows())):
            write_atomic(path_in(self.directory, name), csv_bytes(columns, [[r[c] for c in columns] for r in data]))
        with self._lock:
            events = [chrome_trace.launch_event(*la) for la in self._launches] + self._step_events
            comm = engine()   # a data-parallel job: its collectives as they ran on the communicator's thread
            if comm is not None:
                events += chrome_trace.collective_events(comm.timeline(), self._origin, self._stopped_at)
            events += [e for g, a in self._builds for e in chrome_trace.build_events(g, a, self._origin)]
            trace = chrome_trace.document(events, self._dropped)
        write_atomic(path_in(self.directory, "trace.json"), trace.encode("ascii"))
        if print_table:
            print(format_table(rows, len(steps)))
        return rows


def format_table(rows: list[dict], steps: int) -> str:
    shown = ("op_type", "block_dim", "input_shape", "input_data_type", "calls", "avg_time_us", "name")
    cells = [[printable(r[c]) for c in shown] for r in rows]   # a name cannot redraw the terminal
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(shown)]
    lines = [f"Profiler: {len(rows)} kernels, {steps} steps"]
    lines.append("  ".join(c.ljust(w) for c, w in zip(shown, widths)).rstrip())
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)
