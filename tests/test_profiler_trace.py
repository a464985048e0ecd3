"""The Profiler's trace.json, validated offline against the Chrome trace-event format: the fields each
phase requires, the phases used, time order on every track; one event per launch with its name, ops,
block_dim, shapes and bytes; host ops and copies on tracks of their own; a marker per step."""
import json
from collections import Counter, defaultdict

import numpy as np
import pytest

import graphkernel
from graphkernel import Profiler, Tensor, context
from graphkernel.observation.profiler import active_profiler
from graphkernel import dtype as mstype
from graphkernel.observation.chrome_trace import TRACKS
from graphkernel.compiler import compile_graph, options_from_context
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from ir import GraphBuilder

PHASES = {"X", "i", "M"}    # complete events, instant events, metadata: all the file uses
METADATA = {"process_name": "name", "process_sort_index": "sort_index", "thread_name": "name"}


@pytest.fixture(autouse=True)
def no_profiler_left():
    yield
    if active_profiler() is not None:
        active_profiler().stop()


def validate(doc: dict) -> list[dict]:
    """Check the trace-event format's rules that Perfetto and chrome://tracing rely on; the timed events."""
    assert set(doc) >= {"traceEvents"} and isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit") in ("ms", "ns")
    timed, last = [], {}
    for e in doc["traceEvents"]:
        assert isinstance(e.get("name"), str) and e["name"], e
        assert e.get("ph") in PHASES, e
        assert isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), e
        if e["ph"] == "M":
            assert e["name"] in METADATA and METADATA[e["name"]] in e["args"], e
            continue
        assert isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, e
        if e["ph"] == "i":
            assert e.get("s") in ("g", "p", "t"), e
        if "args" in e:
            assert isinstance(e["args"], dict)
        track = (e["pid"], e["tid"])
        assert e["ts"] >= last.get(track, 0.0), f"time goes back on track {track}: {e}"
        last[track] = e["ts"]
        timed.append(e)
    return timed


def read_trace(prof: Profiler) -> dict:
    with open(f"{prof.directory}/trace.json", encoding="ascii") as f:
        return json.load(f)


class MulAddExp(Cell):
    def construct(self, x, y):
        return P.Exp()(P.Add()(P.Mul()(x, y), 1.0))


@pytest.mark.parametrize("target", ["CPU", "Ascend"])
def test_one_event_per_launch_and_a_marker_per_step(tmp_path, target):
    context.set_context(device_target=target, enable_graph_kernel=False)
    net = MulAddExp()
    x = Tensor(np.ones((3, 5), np.float32))
    net(x, x)
    prof = Profiler(output_path=str(tmp_path))
    for _ in range(3):
        net(x, x)
    rows = prof.analyse(print_table=False)
    doc = read_trace(prof)
    events = validate(doc)
    launches = [e for e in events if e["ph"] == "X" and e["cat"] != "step"]
    assert len(launches) == sum(r["calls"] for r in rows) == 9
    (graph_id,) = {r["graph_id"] for r in rows}
    assert {e["pid"] for e in events} == {graph_id + 1}
    assert Counter(e["name"] for e in launches) == Counter({r["name"]: 3 for r in rows})
    mul = next(e for e in launches if e["args"]["ops"] == ["Mul"])
    assert mul["tid"] == TRACKS["device"][0] and mul["args"]["inputs"] == ["f32[3,5]", "f32[3,5]"]
    assert mul["args"]["outputs"] == ["f32[3,5]"] and mul["args"]["bytes"] == 3 * 15 * 4
    assert mul["args"]["block_dim"] == (None if target == "CPU" else 1)
    assert mul["args"]["kernel"].startswith("Mul_") == (target == "Ascend")
    steps = [e for e in events if e["cat"] == "step"]
    assert [(e["ph"], e["name"]) for e in steps] == [(ph, f"step {k}") for k in range(3) for ph in ("i", "X")]
    # every launch of a step lies inside it
    for k, step in enumerate(e for e in steps if e["ph"] == "X"):
        inside = [e for e in launches if e["args"]["step"] == k]
        assert len(inside) == 3 == step["args"]["launches"]
        assert all(step["ts"] <= e["ts"] and   # (within the rounding to ns)
                   e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 0.002 for e in inside)
    names = {(e["tid"], e["args"]["name"]) for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {(0, "steps"), (1, "AI Core kernels"), (2, "host ops"), (3, "host<->device copies"), (4, "collectives"),
                     (5, "kernel builds")}
    assert doc["otherData"]["dropped_launch_events"] == 0


class HostThenDevice(Cell):
    def __init__(self):
        super().__init__()
        self.sort = P.PyFunc(lambda a: np.sort(a, axis=-1), [mstype.float32], [(4, 8)], [mstype.float32], [(4, 8)])

    def construct(self, x):
        with graphkernel.host_scope():
            y = P.Mul()(x, 2.0)
        return P.Exp()(self.sort(y)) + 1.0


def test_host_ops_and_copies_have_tracks_of_their_own(tmp_path):
    context.set_context(device_target="Ascend", enable_graph_kernel=True, mix_compile_mode=True)
    try:
        net = HostThenDevice()
        x = Tensor(np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32))
        net(x)
        prof = Profiler(output_path=str(tmp_path))
        net(x)
        prof.analyse(print_table=False)
    finally:
        context.set_context(mix_compile_mode=False)
    events = validate(read_trace(prof))
    by_track = defaultdict(list)
    for e in events:
        if e["ph"] == "X" and e["cat"] != "step":
            by_track[e["tid"]].append(e)
    assert {e["cat"] for e in by_track[TRACKS["host"][0]]} == {"host"}
    assert any(e["args"]["ops"] == ["PyFunc"] for e in by_track[TRACKS["host"][0]])
    assert {op for e in by_track[TRACKS["copy"][0]] for op in e["args"]["ops"]} == {"CopyToDevice"}
    assert by_track[TRACKS["device"][0]], "the device launches have their track"


def test_pynative_runs_and_a_hostile_name_keep_the_file_valid(tmp_path):
    hostile = 'a"b\\c\n</script>\ud800\x1b[2J'
    b = GraphBuilder(namer=lambda op: f"{hostile}/{op}")
    x = b.input((2,))
    context.set_context(device_target="Ascend", enable_graph_kernel=False)
    compiled = compile_graph(b.graph(b.op("Exp", x)), options_from_context())
    context.set_context(mode=context.PYNATIVE_MODE, device_target="CPU")
    try:
        prof = Profiler(output_path=str(tmp_path))
        P.Exp()(Tensor(np.ones((2,), np.float32)))
        compiled(Tensor(np.ones((2,), np.float32)))
        prof.analyse(print_table=False)
    finally:
        context.set_context(mode=context.GRAPH_MODE)
    events = validate(read_trace(prof))
    launches = [(e["pid"], e["name"]) for e in events if e["ph"] == "X" and e["cat"] != "step"]
    assert launches == [(0, "Default/Exp-op0"), (compiled.graph_id + 1, f"{hostile}/Exp")]   # 0: PYNATIVE
    text = (tmp_path / "profiler" / "trace.json").read_text(encoding="ascii")
    assert '"name":"pynative"' in text and "\n" not in text.strip()
