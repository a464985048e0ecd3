"""The Profiler's timeline as a Chrome trace-event file (`profiler/trace.json`), which Perfetto
(ui.perfetto.dev) and chrome://tracing open.

    one process per compiled graph ("graph 0", ...; PYNATIVE one-op runs are "pynative"), four tracks:
      steps                   one complete event ("X") per step and an instant marker ("i") at its start
      AI Core kernels         one complete event per device launch: the launch's name (a composite's
                              Fused_<ops>_<n> or a scope name), args: ops, kernel, block_dim, input and
                              output shapes, bytes read and written, step, launch index
      host ops                host launches (mixed compute), the same args
      host<->device copies    CopyToHost / CopyToDevice launches, the same args
      collectives             the launches of collectives (AllReduce, a bucket's AllReduceStart and
                              AllReduceWait: graphkernel/communication)
      kernel builds           kernels built in the background (--compile_mode=background): each build
                              from its request to the kernel loaded, and an instant where the first call
                              that ran it began; a launch that ran its stand-in has args.standin true
    and in a data-parallel job a process "communicator" whose track holds each collective as the
    communicator's thread ran it (a bucket's AllReduce from its start to its end, overlapping the
    backward's kernels), args: the bucket, when it was submitted and how long the main thread waited for it

Timestamps and durations are microseconds since the Profiler started; on each track the events are in
time order. The JSON is ASCII: a name is escaped, never able to break the file.
"""
from __future__ import annotations

import json

from ir.printer import format_type

STEP_TID = 0
TRACKS = {"device": (1, "AI Core kernels"), "host": (2, "host ops"), "copy": (3, "host<->device copies"),
          "comm": (4, "collectives")}
BUILD_TID, BUILD_TRACK = 5, "kernel builds"
PYNATIVE_PID = 0
COMM_PID = 1_000_000      # the communicator thread's process in the trace (not a graph)


def pid_of(graph_id) -> int:
    """A graph's process id in the trace: its id + 1 (0 holds the PYNATIVE one-op runs)."""
    return PYNATIVE_PID if graph_id == "pynative" else int(graph_id) + 1


def launch_event(graph_id, step: int, launch, start_us: float, dur_us: float) -> dict:
    tid, _ = TRACKS.get(launch.target, TRACKS["device"])
    return {"name": launch.name, "cat": launch.target, "ph": "X", "pid": pid_of(graph_id), "tid": tid,
            "ts": round(start_us, 3), "dur": round(dur_us, 3),
            "args": {"ops": list(launch.op_types), "kernel": launch.kernel, "block_dim": launch.block_dim,
                     "inputs": [format_type(t) for t in launch.inputs],
                     "outputs": [format_type(t) for t in launch.outputs],
                     "bytes": sum(t.nbytes for t in launch.inputs + launch.outputs),
                     "step": step, "launch": launch.index, "standin": launch.standin}}


def build_events(graph_id, arrival, origin: float) -> list[dict]:
    """A kernel built in the background (kernels.executor.Arrival): its build from the request to the
    kernel loaded ("X" on the kernel builds track) and its arrival, the start of the first call that ran it
    ("i"); `origin` is the Profiler's start (perf_counter seconds)."""
    pid = pid_of(graph_id)
    start, built, swapped = ((t - origin) * 1e6 for t in (arrival.queued_at, arrival.built_at, arrival.swapped_at))
    args = {"kernel": arrival.kernel, "launches": list(arrival.positions), "build_s": round(arrival.build_seconds, 3),
            "first_step": arrival.call}
    return [{"name": arrival.kernel, "cat": "build", "ph": "X", "pid": pid, "tid": BUILD_TID,
             "ts": round(start, 3), "dur": round(max(0.0, built - start), 3), "args": args},
            {"name": f"arrived {arrival.kernel}", "cat": "build", "ph": "i", "s": "t", "pid": pid,
             "tid": BUILD_TID, "ts": round(swapped, 3), "args": args}]


def step_events(graph_id, step: int, start_us: float, dur_us: float, launches: int) -> list[dict]:
    pid, name = pid_of(graph_id), f"step {step}"
    return [{"name": name, "cat": "step", "ph": "i", "s": "p", "pid": pid, "tid": STEP_TID, "ts": round(start_us, 3)},
            {"name": name, "cat": "step", "ph": "X", "pid": pid, "tid": STEP_TID, "ts": round(start_us, 3),
             "dur": round(dur_us, 3), "args": {"step": step, "graph_id": graph_id, "launches": launches}}]


def collective_events(jobs, origin: float, stopped: float | None) -> list[dict]:
    """The communicator's collectives that ran between `origin` and `stopped` (perf_counter seconds)."""
    events = []
    for job in jobs:
        if job.started < origin or (stopped is not None and job.finished > stopped):
            continue
        waited = (job.waited[1] - job.waited[0]) * 1e6 if job.waited else 0.0
        events.append({"name": job.label, "cat": "collective", "ph": "X", "pid": COMM_PID, "tid": STEP_TID,
                       "ts": round((job.started - origin) * 1e6, 3), "dur": round((job.finished - job.started) * 1e6, 3),
                       "args": {"bucket": job.bucket, "submitted_us": round((job.submitted - origin) * 1e6, 3),
                                "main_thread_waited_us": round(waited, 3)}})
    return events


def _metadata(pids: list[int]) -> list[dict]:
    out = []
    for pid in pids:
        if pid == COMM_PID:
            out += [{"name": "process_name", "ph": "M", "pid": pid, "tid": STEP_TID, "args": {"name": "communicator"}},
                    {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": STEP_TID, "args": {"sort_index": pid}},
                    {"name": "thread_name", "ph": "M", "pid": pid, "tid": STEP_TID,
                     "args": {"name": "collectives in flight"}}]
            continue
        name = "pynative" if pid == PYNATIVE_PID else f"graph {pid - 1}"
        out += [{"name": "process_name", "ph": "M", "pid": pid, "tid": STEP_TID, "args": {"name": name}},
                {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": STEP_TID, "args": {"sort_index": pid}},
                {"name": "thread_name", "ph": "M", "pid": pid, "tid": STEP_TID, "args": {"name": "steps"}}]
        out += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": track}}
                for tid, track in [*TRACKS.values(), (BUILD_TID, BUILD_TRACK)]]
    return out


def document(events: list[dict], dropped: int = 0) -> str:
    """The trace file's text: metadata, then the events sorted by track and time."""
    timed = sorted(events, key=lambda e: (e["pid"], e["tid"], e["ts"], e["ph"] != "i", -e.get("dur", 0)))
    body = {"traceEvents": _metadata(sorted({e["pid"] for e in events})) + timed, "displayTimeUnit": "ms",
            "otherData": {"producer": "graphkernel Profiler", "dropped_launch_events": dropped}}
    return json.dumps(body, ensure_ascii=True, separators=(",", ":")) + "\n"
