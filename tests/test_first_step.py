"""--compile_mode=background: a graph's first call runs on stand-ins while its kernels build, and each kernel
arrives between two calls (kernels/standin.py, kernels/background.py, Program.run).

Most tests hold the builder (`held`: a Builder with no worker, so no job runs) and finish jobs by hand,
building the kernel in the foreground: which call runs which kernel is then fixed, never a race. One
test runs the real worker process. Each test uses its own cache directory and forgets the kernels in
memory, so its kernels are missing from the cache as on a first run.
"""
import csv
import json
import os

import numpy as np
import pytest

from graphkernel import Tensor, context
from graphkernel.compiler import compile_graph
from graphkernel.observation.compile_record import compile_record
from graphkernel.observation.profiler import Profiler
from graphkernel.observation.report import _kernel_table, _times
from graphkernel.nn import Cell, Dense, Momentum, SoftmaxCrossEntropyWithLogits, TrainOneStepCell, WithLossCell
from graphkernel.ops import operations as P
from graphkernel.settings.flags import FlagError, compile_mode, parse_flags
from graphkernel.tools.bench.first_step import format_result, record_steps, run as run_first_step, summary
from fusion_helpers import options
from ir import GraphBuilder
from ir.dtypes import as_dtype
from ir.graph import TensorType
from ir.ops import OPS
from kernels import KernelBuildWarning, background, cache_lock
from kernels.cache import clear_memory, fetch_kernel, lookup_kernel
from kernels.plan import standin_positions
from op_cases import CASES
from op_samples import dtypes, kernel_ops, sample
from tolerance import assert_close


@pytest.fixture
def cold(tmp_path, monkeypatch):
    """An empty kernel cache: a private directory and nothing in memory."""
    monkeypatch.setenv("GRAPHKERNEL_CACHE_DIR", str(tmp_path / "cache"))
    clear_memory()
    yield tmp_path
    clear_memory()


@pytest.fixture
def held(cold, monkeypatch):
    """A builder that runs no job: launches stay on their stand-ins until `arrive` finishes a job."""
    builder = background.Builder(workers=0)
    monkeypatch.setattr(background, "_builder", builder)
    return builder


def arrive(job, error=None):
    """Finish a held job: its kernel built here (what the worker and the load from disk do), or failed."""
    dispatcher = None if error else fetch_kernel(job.name, job.name, job.source, job.sig, job.mode, job.cache_dir)[0]
    job.finish(dispatcher, error, 0.0)


def _graph(op, arrays, attrs=None, consumer=True):
    b = GraphBuilder(*[TensorType(a.shape, as_dtype(a.dtype)) for a in arrays])
    outs = b.ops(op, *b.inputs, **(attrs or {}))
    outs = outs if isinstance(outs, tuple) else (outs,)
    if consumer:   # a chain: the op and an elementwise reader in one composite
        outs = tuple(b.op("Mul", v, b.scalar(3, v)) if v.dtype.is_float else v for v in outs)
    return b.graph(*outs)


def _standin_then_fused(graph, arrays, generated: bool = True):
    """(results on stand-ins, results of the fused kernels built at once), from a cold cache; with
    `generated` the graph has a generated kernel, so its first call runs a stand-in."""
    first = compile_graph(graph, options("--compile_mode=background"))
    assert first.program.building or not generated
    standin = first.run_arrays(arrays)
    fused = compile_graph(graph, options("--compile_mode=wait")).run_arrays(arrays)
    return standin, fused


ELEMENTWISE = [(op, dt) for op in kernel_ops(1) + kernel_ops(2) for dt in dtypes(op)]   # Select: below
FEW = [("Add", "float32"), ("Exp", "float32"), ("Tanh", "float16"), ("Pow", "float32"), ("Maximum", "float32"),
       ("Cast", "float32"), ("Select", "float32"), ("Add", "bfloat16"), ("Exp", "bfloat16"), ("RealDiv", "bfloat16")]
# bfloat16: the kernels hold it as uint16 bits and round every op's float32 result once; a stand-in's
# numpy op widens it to float32 and rounds once too (ir.ops.evaluate_any_shape)
BFLOAT16 = [(op, "bfloat16") for op in kernel_ops(1) + kernel_ops(2) if "float32" in dtypes(op)]


def _check_elementwise(op, dt):
    arrays = [sample(op, (4, 33), dt, seed=k) for k in range(OPS[op].arity)]
    if op == "Select":   # a bool condition, then the two float branches
        arrays[0] = sample("LogicalNot", (4, 33), "bool")
    attrs = {"dtype": as_dtype("float16")} if op == "Cast" else None
    standin, fused = _standin_then_fused(_graph(op, arrays, attrs), arrays)
    for s, f in zip(standin, fused):
        assert_close(s, f, bitwise=True, err_msg=f"{op} {dt}")


@pytest.mark.parametrize("op,dt", FEW, ids=[f"{o}-{d}" for o, d in FEW])
def test_standin_has_the_fused_kernels_bits_on_elementwise_chains(held, op, dt):
    _check_elementwise(op, dt)


@pytest.mark.sweep
@pytest.mark.parametrize("op,dt", ELEMENTWISE + BFLOAT16, ids=[f"{o}-{d}" for o, d in ELEMENTWISE + BFLOAT16])
def test_standin_bits_every_elementwise_row(held, op, dt):
    _check_elementwise(op, dt)


def test_a_large_elementwise_stand_in_runs_in_row_chunks_with_the_kernels_bits(held):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 1024)).astype(np.float32)
    bias = rng.standard_normal((1, 1024)).astype(np.float32)
    b = GraphBuilder(TensorType(x.shape, as_dtype("float32")), TensorType(bias.shape, as_dtype("float32")))
    xv, bv = b.inputs
    y = b.op("Mul", b.op("Exp", b.op("Add", b.op("Mul", xv, b.scalar(0.5, xv)), bv)), xv)
    graph = b.graph(y, b.op("Pow", y, b.scalar(3, y)))
    first = compile_graph(graph, options("--compile_mode=background"))
    (step,) = [s for s in first.program.steps if isinstance(s.fn, background.PendingLaunch)]
    assert len(step.fn.standin.chunks) == 5 and step.fn.standin.sliced == [True, None]
    standin, fused = _standin_then_fused(graph, [x, bias])
    for s, f in zip(standin, fused):
        assert_close(s, f, bitwise=True)


REDUCING = [("ReduceSum", (2, 33, 130), (-1,), "float32"), ("ReduceSum", (40, 33), (0,), "float32"),
            ("ReduceMax", (3, 5, 70), (1, 2), "float32"), ("ReduceSum", (2, 3000), (1,), "float32"),
            ("ReduceSum", (2, 33, 130), (-1,), "bfloat16")]


@pytest.mark.parametrize("op,shape,axis,dt", REDUCING, ids=[f"{o}-{a}-{d}" for o, _, a, d in REDUCING])
def test_standin_within_tolerance_where_a_sum_is_ordered_otherwise(held, op, shape, axis, dt):
    x = np.random.default_rng(3).standard_normal(shape).astype(dt)
    standin, fused = _standin_then_fused(_graph(op, [x], {"axis": axis, "keep_dims": True}), [x])
    for s, f in zip(standin, fused):
        assert_close(s, f, err_msg=op)


@pytest.mark.sweep
@pytest.mark.parametrize("case", CASES, ids=[f"{c.op}-{k}" for k, c in enumerate(CASES)])
def test_standin_every_op_case(held, case):   # some rows run without a generated kernel
    standin, fused = _standin_then_fused(_graph(case.op, case.arrays, case.attrs), case.arrays, generated=False)
    for s, f in zip(standin, fused):
        assert_close(s, f, err_msg=case.op)


# --- a training run ------------------------------------------------------------------------------
class _Net(Cell):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = Dense(16, 32), Dense(32, 8)
        self.gelu, self.norm = P.GeLU(), P.LayerNorm()
        self.gamma, self.beta = Tensor(np.ones(32, np.float32)), Tensor(np.zeros(32, np.float32))

    def construct(self, x):
        h = self.norm(self.gelu(self.fc1(x)), self.gamma, self.beta)[0]
        return self.fc2(h)


def _train_cell(mode: str):
    """(the train step of a small classifier, fused, in `mode`; its net; a batch x, y)."""
    context.set_context(enable_graph_kernel=True, graph_kernel_flags=f"--compile_mode={mode}")
    np.random.seed(0)
    rng = np.random.default_rng(1)
    net = _Net()
    for p in net.trainable_params():
        p.set_data(Tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32)))
    loss = WithLossCell(net, SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
    step = TrainOneStepCell(loss, Momentum(net.trainable_params(), 0.1, 0.9))
    x = Tensor(rng.standard_normal((8, 16)).astype(np.float32))
    y = Tensor(rng.integers(0, 8, 8).astype(np.int32))
    return step, net, x, y


def _train(mode: str, steps: int, between=None):
    """Losses and final weights of `steps` steps of the small classifier; `between(k, program)` runs
    before step k."""
    step, net, x, y = _train_cell(mode)
    losses = []
    for k in range(steps):
        if between is not None:
            between(k, step.compile(x, y).program)
        losses.append(float(step(x, y).asnumpy()))
    return losses, {p.name: p.asnumpy().copy() for p in net.trainable_params()}, step.compile(x, y).program


def test_a_training_run_on_arriving_kernels_has_the_fused_loss_curve(held):
    order = {}

    def between(k, program):
        order[k] = [s.info.name for s in program.steps]
        jobs = program.pending_jobs()
        if k == 2:          # half the kernels arrive before step 2, the rest before step 4
            for job in jobs[: len(jobs) // 2]:
                arrive(job)
        if k == 4:
            for job in jobs:
                arrive(job)
    losses, weights, program = _train("background", 6, between)
    assert not program.building and program.arrivals
    assert {a.call for a in program.arrivals} == {2, 4}
    assert all(names == order[0] for names in order.values())   # the launches and their order stay
    want_losses, want_weights, fused = _train("wait", 6)
    assert not fused.building and [s.info.kernel for s in fused.steps] == [s.info.kernel for s in program.steps]
    assert_close(np.array(losses, np.float32), np.array(want_losses, np.float32))
    for name, w in want_weights.items():
        assert_close(weights[name], w, err_msg=name)


def test_a_stand_in_raising_after_the_commit_point_leaves_every_parameter_as_it_was(held):
    step, net, x, y = _train_cell("background")
    compiled = step.compile(x, y)
    assert compiled.commit.may_raise   # stand-ins run numpy op by op from the first Parameter write on
    tail = compiled.program.launch_list[compiled.commit.launch:]
    last = [s.fn for s in tail if isinstance(s.fn, background.PendingLaunch)][-1]
    real = last.standin

    def failing(*args):   # writes what it writes (a Parameter at the latest), then raises
        real(*args)
        raise MemoryError("a stand-in's temporary")
    last.standin = failing
    before = {p.name: p.asnumpy().copy() for p in net.trainable_params()}
    with pytest.raises(MemoryError, match="stand-in's temporary"):
        step(x, y)
    for p in net.trainable_params():
        assert_close(p.asnumpy(), before[p.name], bitwise=True, err_msg=p.name)
    last.standin = real
    for job in compiled.program.pending_jobs():
        arrive(job)
    step(x, y)   # the kernels swap in at its start
    step(x, y)
    assert not compiled.commit.may_raise and not compiled._snapshot   # no copy once no stand-in is left


def test_a_kernel_arriving_during_a_call_waits_for_the_next(held):
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    graph = _graph("Exp", [x])
    compiled = compile_graph(graph, options("--compile_mode=background"))
    program = compiled.program
    seen = []

    class Observer:
        def kernel(self, index, info, inputs, outputs, seconds):
            seen.append(info.standin)
            for job in program.pending_jobs():   # arrives while the call runs
                if job.state != "ready":
                    arrive(job)
    first = program.run([x], Observer())
    assert seen == [True] and not program.arrivals
    second = program.run([x], Observer())
    assert seen == [True, False] and [a.call for a in program.arrivals] == [1]
    assert_close(first[0], second[0], bitwise=True)


def test_a_background_build_that_fails_is_a_kernel_build_warning(held):
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    compiled = compile_graph(_graph("Exp", [x]), options("--compile_mode=background"))
    want = compiled.run_arrays([x])[0]
    for job in compiled.program.pending_jobs():
        arrive(job, error="TypeError: no such thing")
    with pytest.warns(KernelBuildWarning, match="failed to build in the background.*TypeError: no such thing"):
        got = compiled.run_arrays([x])[0]
    assert not compiled.program.building   # reported once; the stand-in keeps computing it
    assert_close(got, want, bitwise=True)
    assert_close(compiled.run_arrays([x])[0], want, bitwise=True)


def test_wait_mode_builds_every_kernel_before_the_first_call(cold):
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    compiled = compile_graph(_graph("Exp", [x]), options("--compile_mode=wait"))
    assert not compiled.program.building and not compiled.program.pending_jobs()
    assert compiled.wait_for_kernels(0)


def test_the_worker_process_builds_and_the_kernel_arrives(cold, monkeypatch):
    monkeypatch.setenv("GRAPHKERNEL_BUILD_NICE", "0")   # a loaded machine would starve a nice worker
    monkeypatch.setattr(background, "_builder", None)   # a builder of its own, started with that priority
    context.set_context(enable_graph_kernel=True, graph_kernel_flags="--compile_mode=background")

    class Chain(Cell):
        def construct(self, x):
            return P.Tanh()(x * 2.0 + 1.0) * x
    x = Tensor(np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32))
    net = Chain()
    first = net(x).asnumpy()
    compiled = net.compile(x)
    assert compiled.program.building
    assert compiled.wait_for_kernels(timeout=600)
    second = net(x).asnumpy()
    assert not compiled.program.building and compiled.program.arrivals
    context.set_context(graph_kernel_flags="--compile_mode=wait")
    want = Chain()(x).asnumpy()
    assert_close(first, want, bitwise=True)
    assert_close(second, want, bitwise=True)


def test_compile_mode_flag_and_its_default(monkeypatch):
    assert parse_flags("--compile_mode=wait", read_env=False).compile_mode == "wait"
    with pytest.raises(FlagError, match="compile_mode=soon: expected one of background, wait"):
        parse_flags("--compile_mode=soon", read_env=False)
    monkeypatch.delenv("GRAPHKERNEL_COMPILE_MODE")
    assert compile_mode(parse_flags("", read_env=False)) == "background"
    monkeypatch.setenv("GRAPHKERNEL_COMPILE_MODE", "wait")
    assert compile_mode(parse_flags("", read_env=False)) == "wait"
    assert compile_mode(parse_flags("--compile_mode=background", read_env=False)) == "background"
    monkeypatch.setenv("GRAPHKERNEL_COMPILE_MODE", "background")
    assert compile_mode(parse_flags("", read_env=False), same_bits=True) == "wait"
    assert compile_mode(parse_flags("--compile_mode=background", read_env=False), same_bits=True) == "background"


def test_deterministic_builds_every_kernel_before_the_first_call(held, monkeypatch):
    # which calls run stand-ins is a matter of timing, and a stand-in sums in another order
    monkeypatch.setenv("GRAPHKERNEL_COMPILE_MODE", "background")
    context.set_context(enable_graph_kernel=True)

    class Norm(Cell):
        def construct(self, x):
            return P.ReduceSum(keep_dims=True)(x * x, -1)
    x = Tensor(np.random.default_rng(0).standard_normal((4, 300)).astype(np.float32))
    net = Norm()
    net(x)
    assert net.compile(x).program.building
    context.set_context(deterministic="ON")   # a new compile
    net(x)
    assert not net.compile(x).program.building


def test_a_graph_of_collectives_builds_every_kernel_before_the_first_call(held, monkeypatch):
    # its ranks keep their Parameters bitwise equal: no rank may run a stand-in another does not
    monkeypatch.setenv("GRAPHKERNEL_COMPILE_MODE", "background")
    context.set_context(enable_graph_kernel=True)

    class Reduced(Cell):
        def __init__(self, collective):
            super().__init__()
            self.collective = collective

        def construct(self, x):
            y = P.ReduceSum(keep_dims=True)(x * x, -1)
            return self.collective(y) * 2.0 if self.collective else y * 2.0
    x = Tensor(np.random.default_rng(0).standard_normal((4, 300)).astype(np.float32))
    alone = Reduced(None)
    alone(x)
    assert alone.compile(x).program.building
    clear_memory()
    reduced = Reduced(P.AllReduce())   # a process alone is a group of one
    reduced(x)
    assert not reduced.compile(x).program.building


def test_the_profiler_trace_and_report_show_stand_ins_and_arrivals(held, tmp_path):
    context.set_context(enable_graph_kernel=True, graph_kernel_flags="--compile_mode=background")

    class Chain(Cell):
        def construct(self, x):
            return P.Exp()(x * 2.0) + 1.0
    x = Tensor(np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32))
    net = Chain()
    prof = Profiler(output_path=str(tmp_path / "prof"))
    net(x)
    for job in net.compile(x).program.pending_jobs():
        arrive(job)
    net(x)
    net(x)
    prof.analyse(print_table=False)
    with open(tmp_path / "prof" / "profiler" / "kernel_details.csv") as f:
        (row,) = [r for r in csv.DictReader(f) if r["kernel"]]
    assert (row["calls"], row["standin_calls"]) == ("3", "1")
    with open(tmp_path / "prof" / "profiler" / "kernel_builds.csv") as f:
        (build,) = list(csv.DictReader(f))
    assert build["kernel"] == row["kernel"] and build["first_step"] == "1"
    with open(tmp_path / "prof" / "profiler" / "trace.json") as f:
        events = json.load(f)["traceEvents"]
    launches = [e for e in events if e.get("cat") == "device"]
    assert [e["args"]["standin"] for e in launches] == [True, False, False]
    builds = [e for e in events if e.get("cat") == "build"]
    assert {e["ph"] for e in builds} == {"X", "i"} and all(e["args"]["kernel"] == row["kernel"] for e in builds)
    compiled = net.compile(x)
    (launch,) = [la for la in compile_record(compiled, [])["launches"] if la["kernel"] == row["kernel"]]
    assert not launch["standin"]   # recorded now: the kernel has arrived
    launch["standin"] = True       # as the record written at the compile, when it was building, says
    text = "\n".join(_kernel_table([launch], _times([row], int(row["graph_id"]))))
    assert "stand-in while it built" in text and "3 (1 on stand-in)" in text


def test_an_entry_another_process_holds_is_left_to_the_background(held):
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    compiled = compile_graph(_graph("Exp", [x]), options("--compile_mode=background"))
    (job,) = compiled.program.pending_jobs()
    arrive(job)   # now on disk
    clear_memory()
    directory = job.cache_dir or os.environ["GRAPHKERNEL_CACHE_DIR"]
    fd = cache_lock.acquire(directory, job.name, 1.0)   # as a process building it holds it: no wait for it
    try:
        assert lookup_kernel(job.name, job.name, job.source, job.sig, "enable", job.cache_dir) is None
    finally:
        cache_lock.release(directory, job.name, fd)
    found = lookup_kernel(job.name, job.name, job.source, job.sig, "enable", job.cache_dir)
    assert found is not None and found[1] == "disk"
    assert not os.path.exists(cache_lock.lock_path(directory, job.name))   # its lock file removed, as a holder does


class _FakeProgram:
    """A program whose kernels arrive before call `arrive_at` (for the bench's step recorder)."""

    def __init__(self, arrive_at: int):
        self.arrive_at, self.calls = arrive_at, 0

    @property
    def building(self):
        return self.calls < self.arrive_at

    def standin_positions(self):
        return {0, 1} if self.building else set()


class _FakeCell:
    def __init__(self, arrive_at: int):
        self.compiled = type("Compiled", (), {})()
        self.compiled.program = _FakeProgram(arrive_at)
        self.compiled.kernels = [None] * 5
        self.compiled.wait_for_kernels = lambda timeout=None: True

    def __call__(self):
        self.compiled.program.calls += 1
        return Tensor(np.zeros(1, np.float32))

    def compile(self):
        return self.compiled


def test_the_first_step_bench_counts_the_steps_on_stand_ins():
    cold = record_steps(_FakeCell(arrive_at=3), [], settle=2)
    assert cold["standins"] == [2, 2, 0, 0, 0] and cold["launches"] == 5
    warm = record_steps(_FakeCell(arrive_at=0), [], steps=4)
    assert warm["standins"] == [0, 0, 0, 0]
    s = summary(cold, warm, warm)
    assert s["k"] == 2 and s["cold_first_s"] == cold["seconds"][0] and "steps_2_to_k_max_over_warm_unfused" in s


@pytest.mark.slow
def test_the_first_step_bench_runs_cold_warm_and_unfused(monkeypatch):
    # three fresh processes: cold on stand-ins with the real builder, warm on the caches it left, unfused;
    # the builders at the tests' priority: at nice 10 beside the other test workers they starved (344 s)
    monkeypatch.setenv("GRAPHKERNEL_BUILD_NICE", "0")
    result = run_first_step("stack", 1, "background", steps=3, tiny=True, log=lambda line: None)
    cold, warm = result["cold"], result["warm"]
    assert cold["standins"][0] > 0 and cold["standins"][-1] == 0   # started on stand-ins, ended on kernels
    assert set(warm["standins"]) == {0}   # the second process finds every kernel on disk
    assert result["summary"]["k"] >= 1 and "first step" in format_result(result)


def test_a_dynamic_program_runs_its_shapes_on_stand_ins_then_on_the_arrived_kernels(held):
    # a graph of symbolic sizes has a plan per shape; a kernel arriving replaces its stand-in in each
    context.set_context(enable_graph_kernel=True, graph_kernel_flags="--compile_mode=background")

    class Chain(Cell):
        def construct(self, x, bias):
            return P.Exp()(x * 0.5 + bias) * x - 1.0

    def net_at(mode):
        context.set_context(graph_kernel_flags=f"--compile_mode={mode}")
        net = Chain()
        net.set_inputs(Tensor(shape=[None, 64], dtype=as_dtype("float32")),
                       Tensor(shape=[1, 64], dtype=as_dtype("float32")))
        return net
    rng = np.random.default_rng(0)
    bias = Tensor(rng.standard_normal((1, 64)).astype(np.float32))
    xs = [Tensor(rng.standard_normal((n, 64)).astype(np.float32)) for n in (8, 13, 1)]
    net = net_at("background")
    standin = [net(x, bias).asnumpy() for x in xs[:2]]
    compiled = net.compile(xs[0], bias)
    program = compiled.program
    assert net.compile(xs[1], bias) is compiled and program.planner is not None
    plans = program.plans()
    assert len(plans) >= 2 and all(standin_positions(p) for p in plans)   # both shapes ran stand-ins
    jobs = program.pending_jobs()
    assert jobs and not program.arrivals
    for job in jobs:   # what the worker does: the kernel built into the cache, loaded here
        arrive(job)
    assert compiled.wait_for_kernels(0)
    arrived = [net(x, bias).asnumpy() for x in xs]   # the first call swaps the kernels in, in every plan
    assert not program.building and not any(standin_positions(p) for p in program.plans())
    assert sorted(a.kernel for a in program.arrivals) == sorted(j.name for j in jobs)   # one arrival each
    assert all(a.call == 2 for a in program.arrivals)
    new = program.planner.plan_for([xs[2].asnumpy(), bias.asnumpy()])   # made after: the kernel from the start
    assert not new._pending
    want = [net_at("wait")(x, bias).asnumpy() for x in xs]
    for got, w in zip(standin + arrived, want[:2] + want):
        assert_close(got, w, bitwise=True)


def test_a_build_worker_whose_parent_has_gone_ends_without_a_word(tmp_path):
    """A background build worker answers on a pipe; when the program that started it has exited (a short
    script ending while kernels build), the answer has no reader: the worker exits quietly (it used to print
    a BrokenPipeError traceback on the user's terminal). The reading end is closed before the job is sent,
    so the worker always meets the broken pipe."""
    import pickle
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "kernels.build_worker", "0"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()   # the parent is gone: nobody reads the answers
    job = (1, "Nothing", "not a kernel", (), "disk", str(tmp_path), 10.0)   # fails to build: still answered
    _, err = proc.communicate(pickle.dumps(job), timeout=300)
    assert proc.returncode == 0 and err.decode() == "", err.decode()
