"""Profiler, and the float16 ReduceSum case: a float16 ReduceSum runs with block_dim 1, the profiler
shows it, and a Cast to float32 before it, or black-listing ReduceSumD under allow_mix_precision,
brings back multi-core."""
import csv

import numpy as np
import pytest

from graphkernel import Profiler, Tensor, context
from graphkernel.observation.profiler import active_profiler
from graphkernel import dtype as mstype
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.observation.profiler import KERNEL_COLUMNS, ProfilerError, dt_name, format_table
from ir.dtypes import DType

SEED_COLUMNS = ["op_type", "block_dim", "input_shape", "input_data_type", "input_formats"]
SEED_SHAPE = (1, 256, 256, 3)


@pytest.fixture(autouse=True)
def no_profiler_left():
    yield
    if active_profiler() is not None:
        active_profiler().stop()


class MulAddExp(Cell):
    def __init__(self):
        super().__init__()
        self.mul, self.add, self.exp = P.Mul(), P.Add(), P.Exp()

    def construct(self, x, y):
        return self.exp(self.add(self.mul(x, y), 1.0))


class SumHW(Cell):
    """ReduceSum over H and W of an NHWC tensor, optionally after a Cast to float32 (the float16 ReduceSum case)."""

    def __init__(self, cast: bool = False):
        super().__init__()
        self.sum, self.cast, self.to_f32 = P.ReduceSum(), P.Cast(), cast

    def construct(self, x):
        return self.sum(self.cast(x, mstype.float32) if self.to_f32 else x, (1, 2))


class ProjectThenSum(Cell):
    """MatMul (white list: float16 under allow_mix_precision) feeding a ReduceSum (gray: follows it)."""

    def __init__(self):
        super().__init__()
        self.matmul, self.reshape, self.sum = P.MatMul(), P.Reshape(), P.ReduceSum()

    def construct(self, x, w):
        return self.sum(self.reshape(self.matmul(x, w), SEED_SHAPE), (1, 2))


def read_csv(path):
    with open(path) as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, [dict(zip(header, row)) for row in reader]


def profile(tmp_path, net, arrays, calls=1):
    net(*[Tensor(a) for a in arrays])           # compile and warm up outside the profile
    prof = Profiler(output_path=str(tmp_path))
    for _ in range(calls):
        net(*[Tensor(a) for a in arrays])
    return prof.analyse(print_table=False)


def reduce_rows(rows):
    return [r for r in rows if "ReduceSum" in r["op_type"]]


@pytest.mark.parametrize("target", ["CPU", "Ascend"])
def test_kernel_details_and_step_trace(tmp_path, target, capsys):
    context.set_context(device_target=target)
    x, y = np.ones((3, 5), np.float32), np.full((3, 5), 2, np.float32)
    net = MulAddExp()
    prof = Profiler(output_path=str(tmp_path))
    for _ in range(3):
        net(Tensor(x), Tensor(y))
    rows = prof.analyse()
    assert "op_type" in capsys.readouterr().out
    header, kernels = read_csv(tmp_path / "profiler" / "kernel_details.csv")
    assert header[:5] == SEED_COLUMNS and header == list(KERNEL_COLUMNS)
    assert sorted(r["name"] for r in kernels) == ["Default/Add-op1", "Default/Exp-op2", "Default/Mul-op0"]
    assert [r["name"] for r in rows] == [r["name"] for r in kernels]
    mul = next(r for r in kernels if r["op_type"] == "Mul")
    assert (mul["input_shape"], mul["input_data_type"], mul["input_formats"]) == ("3,5;3,5", "DT_FLOAT;DT_FLOAT",
                                                                                  "ND;ND")
    assert mul["block_dim"] == ("" if target == "CPU" else "1")
    for r in kernels:
        assert int(r["calls"]) == 3
        assert float(r["avg_time_us"]) == pytest.approx(float(r["total_time_us"]) / 3, abs=1e-3)
    header, steps = read_csv(tmp_path / "profiler" / "step_trace.csv")
    assert header[:4] == ["step", "start", "duration_us", "kernels"]
    assert [(s["step"], s["kernels"], s["graph_id"]) for s in steps] == [(str(k), "3", "0") for k in range(3)]
    starts = [float(s["start"]) for s in steps]
    assert starts == sorted(starts)
    kernel_sum = sum(float(r["total_time_us"]) for r in kernels)
    assert kernel_sum <= sum(float(s["duration_us"]) for s in steps)


def test_float16_reducesum_runs_on_one_core_and_a_cast_brings_back_multicore(tmp_path):
    x = np.random.default_rng(0).standard_normal(SEED_SHAPE).astype(np.float16)
    (row,) = reduce_rows(profile(tmp_path / "f16", SumHW(), [x]))
    assert (row["op_type"], row["block_dim"], row["input_shape"], row["input_data_type"]) == (
        "ReduceSum", 1, "1,256,256,3", "DT_FLOAT16")
    (row,) = reduce_rows(profile(tmp_path / "cast", SumHW(cast=True), [x]))
    assert row["input_data_type"] == "DT_FLOAT" and row["block_dim"] > 1


def test_black_listing_reducesumd_under_mixed_precision_brings_back_multicore(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256 * 256, 8)).astype(np.float32)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    context.set_context(precision_mode="allow_mix_precision")
    (row,) = reduce_rows(profile(tmp_path / "mixed", ProjectThenSum(), [x, w]))
    assert row["block_dim"] == 1 and row["input_data_type"] == "DT_FLOAT16"
    mixlist = tmp_path / "ops_info.json"
    mixlist.write_text('{ "black-list": { "to-add": ["ReduceSumD"] } }')
    context.set_context(modify_mixlist=str(mixlist))
    (row,) = reduce_rows(profile(tmp_path / "black", ProjectThenSum(), [x, w]))
    assert row["block_dim"] > 1


def test_stop_start_and_one_profiler_at_a_time(tmp_path):
    context.set_context(device_target="CPU")
    net, args = MulAddExp(), [Tensor(np.ones((2, 2), np.float32))] * 2
    prof = Profiler(output_path=str(tmp_path), start_profile=False)
    net(*args)
    with pytest.raises(ProfilerError, match="another Profiler is collecting"):
        prof.start()
        Profiler(output_path=str(tmp_path / "second"))
    net(*args)
    prof.stop()
    net(*args)
    rows = prof.analyse(print_table=False)
    assert {r["calls"] for r in rows} == {1}
    later = Profiler(output_path=str(tmp_path / "later"))
    net(*args)
    assert {r["calls"] for r in later.analyse(print_table=False)} == {1}
    assert active_profiler() is None


def test_pynative_ops_are_kernels_but_no_steps(tmp_path):
    context.set_context(device_target="CPU", mode=context.PYNATIVE_MODE)
    prof = Profiler(output_path=str(tmp_path))
    MulAddExp()(Tensor(np.ones((2, 2), np.float32)), Tensor(np.ones((2, 2), np.float32)))
    rows = prof.analyse(print_table=False)
    assert sorted(r["op_type"] for r in rows) == ["Add", "Exp", "Mul"]
    assert {r["graph_id"] for r in rows} == {"pynative"}
    assert read_csv(tmp_path / "profiler" / "step_trace.csv")[1] == []


def test_unwritable_output_path_names_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ProfilerError, match=str(blocker / "out" / "profiler")):
        Profiler(output_path=str(blocker / "out"))
    assert active_profiler() is None


def test_cann_dtype_names():
    assert [dt_name(d) for d in (DType.float16, DType.float32, DType.int32, DType.bool)] == [
        "DT_FLOAT16", "DT_FLOAT", "DT_INT32", "DT_BOOL"]


def test_the_table_shows_a_hostile_name_on_one_line_without_control_characters():
    row = {"op_type": "Mul", "block_dim": 1, "input_shape": "2,3", "input_data_type": "DT_FLOAT", "calls": 1,
           "avg_time_us": 1.0, "name": "evil\x1b[2K\rFAKE ROW\nMul 1 2,3"}
    table = format_table([row], steps=1)
    assert "\x1b" not in table and "\r" not in table
    assert len(table.splitlines()) == 3   # title, header, the one row
    assert table.splitlines()[2].endswith("evil\\u001b[2K\\rFAKE ROW\\nMul 1 2,3")


def test_a_launch_that_reads_no_buffer_is_profiled(tmp_path):
    """A kernel whose every operand is an inlined constant (zeros broadcast: the gradient of an unused
    input) has no input buffer; the observed runner's call must still be valid Python."""
    import graphkernel as ms
    context.set_context(device_target="Ascend", enable_graph_kernel=False)
    p = ms.Parameter(np.ones((3, 4), np.float32), name="unused")
    grad_fn = ms.grad(lambda x: P.ReduceSum()(x * x), 0, [p])
    prof = Profiler(output_path=str(tmp_path))
    dx, (dp,) = grad_fn(Tensor(np.ones(5, np.float32)))
    prof.analyse()
    assert not dp.asnumpy().any() and dp.shape == (3, 4)
    assert (dx.asnumpy() == 2).all()
