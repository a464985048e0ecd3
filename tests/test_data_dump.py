"""Data dump and overflow check (CANN's enable_dump / dump_* / enable_dump_debug).

A three-op net (Mul, Add, Exp; fusion off: three launches) runs on both targets; the files of
graph_<id>/step_<n>/ are compared with numpy. Fusion on puts the three into one composite, which is
what dump_layer's fused-away warning is about.
"""
import csv
import json
import os
import warnings

import numpy as np
import pytest

from graphkernel import Tensor, context
from graphkernel.context import ContextError
from graphkernel.observation.datadump import DumpError, DumpLayerWarning, file_stem, statistics
from graphkernel.nn import Cell
from graphkernel.observation.launches import Launch
from graphkernel.ops import operations as P
from ir.filenames import safe_filename
from graphkernel.observation.overflow import OverflowWarning
from tolerance import assert_close

TARGETS = ("CPU", "Ascend")


class MulAddExp(Cell):
    def __init__(self):
        super().__init__()
        self.mul, self.add, self.exp = P.Mul(), P.Add(), P.Exp()

    def construct(self, x, y):
        return self.exp(self.add(self.mul(x, y), 1.0))


NAMES = ("Default/Mul-op0", "Default/Add-op1", "Default/Exp-op2")


def expected(x, y):
    """Per launch name: (first input, output) as numpy computes them."""
    m = x * y
    return {NAMES[0]: (x, m), NAMES[1]: (m, m + np.float32(1)), NAMES[2]: (m + np.float32(1), np.exp(m + 1))}


def inputs(seed=0, shape=(3, 5)):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]


def kernels_csv(root):
    with open(os.path.join(root, "kernels.csv")) as f:
        return list(csv.DictReader(f))


def run(net, arrays, times=1):
    for _ in range(times):
        out = net(*[Tensor(a) for a in arrays])
    return out


# --- settings -----------------------------------------------------------------------------------
@pytest.mark.parametrize("text,canonical", [("0|5|10", "0|5|10"), ("0|3-5|10", "0|3-5|10"),
                                            ("0 | 3-5", "0|3-5"), ("7", "7")])
def test_dump_step_accepts_the_seeds_forms(text, canonical):
    context.set_context(dump_step=text)
    assert context.get_context("dump_step") == canonical


@pytest.mark.parametrize("text,part", [("0|x|10", "'x'"), ("0|5-3", "'5-3'"), ("1||2", "''"), ("-1", "'-1'"),
                                       ("3-", "'3-'"), ("", "''")])
def test_bad_dump_step_names_the_key_and_the_part(text, part):
    with pytest.raises(ContextError, match=rf"dump_step=.*bad part {part}"):
        context.set_context(dump_step=text)
    assert context.get_context("dump_step") is None


def test_dump_step_must_be_a_string():
    with pytest.raises(ContextError, match="dump_step.*accepted"):
        context.set_context(dump_step=5)


def test_dump_path_is_created(tmp_path):
    target = tmp_path / "a" / "b"
    context.set_context(dump_path=str(target))
    assert target.is_dir() and context.get_context("dump_path") == str(target)


def test_unwritable_dump_path_names_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    bad = blocker / "dump"
    with pytest.raises(ContextError, match=rf"dump_path=.*{bad}"):
        context.set_context(dump_path=str(bad))


@pytest.mark.parametrize("key,value", [("dump_mode", "both"), ("dump_data", "arrays"), ("dump_debug_mode", "x"),
                                       ("enable_dump", 1), ("enable_dump_debug", "yes"), ("dump_layer", 3)])
def test_bad_values_name_the_key_and_list_what_is_accepted(key, value):
    with pytest.raises(ContextError, match=rf"{key}=.*accepted"):
        context.set_context(**{key: value})


@pytest.mark.parametrize("mode", ["aicore_overflow", "atomic_overflow", "all"])
def test_dump_debug_modes_of_the_seed_are_accepted(mode):
    context.set_context(dump_debug_mode=mode)
    assert context.get_context("dump_debug_mode") == mode


def test_enable_dump_needs_a_dump_path():
    context.set_context(enable_dump=True, device_target="CPU")
    with pytest.raises(DumpError, match=r"enable_dump=True needs a dump directory.*dump_path"):
        run(MulAddExp(), inputs())


def test_dump_path_made_unwritable_after_set_is_a_clear_error(tmp_path):
    path = tmp_path / "dump"
    context.set_context(enable_dump=True, dump_path=str(path), device_target="CPU")
    path.rmdir()
    path.write_text("now a file")
    with pytest.raises(DumpError, match=str(path)):
        run(MulAddExp(), inputs())


# --- tensors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mode", ["input", "output", "all"])
def test_tensor_dump_matches_numpy(tmp_path, target, mode):
    context.set_context(device_target=target, enable_dump=True, dump_path=str(tmp_path), dump_mode=mode)
    x, y = inputs()
    run(MulAddExp(), [x, y])
    root = tmp_path / "graph_0"
    rows = kernels_csv(root)
    assert [r["name"] for r in rows] == list(NAMES)
    want = expected(x, y)
    for r in rows:
        first_in, out = want[r["name"]]
        stem = root / "step_0" / r["file"]
        assert r["file"] == f"{int(r['launch']):04d}_{safe_filename(r['name'], hash_changes=False)}"
        assert (stem.parent / f"{stem.name}.input.0.npy").exists() == (mode != "output")
        assert (stem.parent / f"{stem.name}.output.0.npy").exists() == (mode != "input")
        if mode == "all":
            assert_close(np.load(f"{stem}.input.0.npy"), first_in)
            assert_close(np.load(f"{stem}.output.0.npy"), out)
    names = sorted(os.listdir(root / "step_0"))
    assert all(n.endswith(".npy") and "/" not in n for n in names)


@pytest.mark.parametrize("target", TARGETS)
def test_dump_step_ranges_pick_the_steps(tmp_path, target):
    context.set_context(device_target=target, enable_dump=True, dump_path=str(tmp_path), dump_step="0|2-3|9")
    run(MulAddExp(), inputs(), times=5)
    assert sorted(p for p in os.listdir(tmp_path / "graph_0") if p.startswith("step_")) == [
        "step_0", "step_2", "step_3"]


def test_each_step_dumps_its_own_values(tmp_path):
    context.set_context(device_target="Ascend", enable_dump=True, dump_path=str(tmp_path))
    net = MulAddExp()
    for k in range(2):
        x, y = inputs(seed=k)
        run(net, [x, y])
        got = np.load(tmp_path / "graph_0" / f"step_{k}" / f"0002_{safe_filename(NAMES[2], hash_changes=False)}.output.0.npy")
        assert_close(got, np.exp(x * y + 1))


def test_new_settings_apply_to_a_new_compile(tmp_path):
    context.set_context(device_target="CPU")
    net = MulAddExp()
    run(net, inputs())
    context.set_context(enable_dump=True, dump_path=str(tmp_path))
    run(net, inputs())
    assert os.listdir(tmp_path) == ["graph_1"]


# --- statistics -----------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_stats_csv_matches_numpy(tmp_path, target):
    context.set_context(device_target=target, enable_dump=True, dump_path=str(tmp_path), dump_mode="all",
                        dump_data="stats")
    x, y = inputs(shape=(4, 6))
    x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
    run(MulAddExp(), [x, y])
    step = tmp_path / "graph_0" / "step_0"
    assert os.listdir(step) == ["statistic.csv"]
    with open(step / "statistic.csv") as f:
        rows = list(csv.DictReader(f))
    mul_x = next(r for r in rows if r["name"] == NAMES[0] and r["input_output"] == "input" and r["index"] == "0")
    assert (mul_x["dtype"], mul_x["shape"]) == ("float32", "4,6")
    assert (int(mul_x["nan_count"]), int(mul_x["inf_count"])) == (1, 2)
    assert float(mul_x["min"]) == -np.inf and float(mul_x["max"]) == np.inf
    exp_out = next(r for r in rows if r["name"] == NAMES[2] and r["input_output"] == "output")
    want = np.exp(x * y + np.float32(1))
    kept = want[~np.isnan(want)].astype(np.float64)
    assert int(exp_out["nan_count"]) == int(np.isnan(want).sum())
    assert int(exp_out["inf_count"]) == int(np.isinf(want).sum())
    if np.isfinite(kept).all():
        assert float(exp_out["mean"]) == pytest.approx(kept.mean(), rel=1e-5)
    assert float(exp_out["min"]) == pytest.approx(kept.min(), rel=1e-5)


def test_statistics_of_float16_and_int_and_empty():
    a = np.array([1, 2, np.nan, np.inf], np.float16)
    assert statistics(a) == (1.0, np.inf, np.inf, 1, 1)
    assert statistics(np.arange(5, dtype=np.int32)) == (0.0, 4.0, 2.0, 0, 0)
    assert statistics(np.array([np.nan], np.float32)) == ("", "", "", 1, 0)


# --- dump_layer -----------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_dump_layer_dumps_only_the_named_launches(tmp_path, target):
    context.set_context(device_target=target, enable_dump=True, dump_path=str(tmp_path),
                        dump_layer=f"  {NAMES[2]}   {NAMES[0]} ")
    assert context.get_context("dump_layer") == f"{NAMES[2]} {NAMES[0]}"
    run(MulAddExp(), inputs())
    files = sorted(os.listdir(tmp_path / "graph_0" / "step_0"))
    assert files == [f"0000_{safe_filename(NAMES[0], hash_changes=False)}.output.0.npy", f"0002_{safe_filename(NAMES[2], hash_changes=False)}.output.0.npy"]


@pytest.mark.parametrize("target", TARGETS)
def test_dump_layer_naming_a_fused_away_op_warns_and_dumps_its_composite(tmp_path, target):
    context.set_context(device_target=target, enable_graph_kernel=True, enable_dump=True,
                        dump_path=str(tmp_path), dump_mode="all", dump_layer=NAMES[1])
    x, y = inputs()
    with pytest.warns(DumpLayerWarning, match=r"'Default/Add-op1' was fused into composite (Fused_\w+)"):
        run(MulAddExp(), [x, y])
    rows = kernels_csv(tmp_path / "graph_0")
    assert len(rows) == 1 and rows[0]["name"].startswith("Fused_Mul_Add_Exp")
    stem = tmp_path / "graph_0" / "step_0" / rows[0]["file"]
    assert_close(np.load(f"{stem}.input.0.npy"), x)
    assert_close(np.load(f"{stem}.output.0.npy"), np.exp(x * y + 1))


def test_dump_layer_unknown_name_warns(tmp_path):
    context.set_context(device_target="CPU", enable_dump=True, dump_path=str(tmp_path), dump_layer="Default/Nope")
    with pytest.warns(DumpLayerWarning, match="no op named 'Default/Nope' in graph 0"):
        run(MulAddExp(), inputs())
    assert not os.path.exists(tmp_path / "graph_0" / "step_0") or not os.listdir(tmp_path / "graph_0" / "step_0")


class TimesOne(Cell):
    def __init__(self):
        super().__init__()
        self.mul, self.add = P.Mul(), P.Add()

    def construct(self, x):
        return self.add(self.mul(x, 1.0), 2.0)


def test_dump_layer_naming_an_op_the_passes_removed_warns(tmp_path):
    context.set_context(device_target="CPU", enable_dump=True, dump_path=str(tmp_path), dump_layer="Default/Mul-op0")
    with pytest.warns(DumpLayerWarning, match="'Default/Mul-op0' was removed by the passes"):
        TimesOne().compile(Tensor(np.ones((2, 2), np.float32)))


# --- file names -----------------------------------------------------------------------------------
def launch(index, name):
    return Launch(index, "k", name, ("Add",), 1, (), ())


@pytest.mark.parametrize("name", ["a/../../etc/passwd", "x\x00y", "..", "a.b/c", "Default/Mul-op0", ""])
def test_file_names_are_sanitized(name):
    s = file_stem(launch(3, name))
    assert s.startswith("0003_") and "/" not in s and "\x00" not in s and "." not in s


def test_long_names_are_shortened_with_a_hash():
    a, b = "Default/" + "x" * 300, "Default/" + "x" * 299 + "y"
    assert len(file_stem(launch(0, a))) <= 105 and file_stem(launch(0, a)) != file_stem(launch(0, b))


def test_names_that_sanitize_alike_get_different_files():
    assert safe_filename("a/b", hash_changes=False) == safe_filename("a_b", hash_changes=False)
    assert file_stem(launch(0, "a/b")) != file_stem(launch(1, "a_b"))


# --- overflow check -------------------------------------------------------------------------------
def overflow_report(path):
    with open(path / "overflow_report.json") as f:
        return json.load(f)["overflows"]


@pytest.mark.parametrize("target", TARGETS)
def test_overflow_report_names_the_first_kernel_and_the_step(tmp_path, target):
    context.set_context(device_target=target, enable_dump_debug=True, dump_path=str(tmp_path))
    net = MulAddExp()
    x, y = inputs()
    run(net, [x, y])                            # step 0: finite
    assert not (tmp_path / "overflow_report.json").exists()
    x[1, 2], y[1, 2] = 30.0, 10.0               # exp(301) overflows float32 in Exp, the third launch
    with pytest.warns(OverflowWarning, match=rf"graph 0 step 1: kernel {NAMES[2]} \(Exp\)"):
        run(net, [x, y])
    (entry,) = overflow_report(tmp_path)
    assert (entry["step"], entry["name"], entry["op_types"], entry["inputs_finite"]) == (1, NAMES[2], ["Exp"], True)
    assert entry["outputs"] == [{"index": 0, "dtype": "float32", "shape": "3,5", "nan_count": 0, "inf_count": 1}]
    saved = np.load(tmp_path / [f for f in entry["files"] if ".output.0." in f][0])
    assert np.isinf(saved[1, 2])


def test_overflow_in_a_fused_graph_names_the_composite(tmp_path):
    context.set_context(enable_graph_kernel=True, enable_dump_debug=True, dump_path=str(tmp_path))
    x, y = inputs()
    x[0, 0], y[0, 0] = 100.0, 100.0
    with pytest.warns(OverflowWarning):
        run(MulAddExp(), [x, y])
    (entry,) = overflow_report(tmp_path)
    assert entry["name"].startswith("Fused_Mul_Add_Exp") and entry["check"] == "aicore_overflow"


def test_an_infinite_input_reports_the_first_kernel_only(tmp_path):
    context.set_context(device_target="CPU", enable_dump_debug=True, dump_path=str(tmp_path))
    x, y = inputs()
    x[0, 0] = np.inf
    with pytest.warns(OverflowWarning, match=NAMES[0]):
        run(MulAddExp(), [x, y])
    (entry,) = overflow_report(tmp_path)
    assert entry["name"] == NAMES[0] and entry["inputs_finite"] is False


def test_atomic_overflow_mode_checks_only_split_reductions(tmp_path):
    context.set_context(device_target="CPU", enable_dump_debug=True, dump_path=str(tmp_path),
                        dump_debug_mode="atomic_overflow")
    x, y = inputs()
    x[0, 0], y[0, 0] = 100.0, 100.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", OverflowWarning)
        run(MulAddExp(), [x, y])
    assert not (tmp_path / "overflow_report.json").exists()


def test_dump_and_overflow_check_together_leave_results_unchanged(tmp_path):
    context.set_context(enable_dump=True, enable_dump_debug=True, dump_path=str(tmp_path), dump_mode="all")
    x, y = inputs()
    out = run(MulAddExp(), [x, y])
    assert_close(out.asnumpy(), np.exp(x * y + np.float32(1)))
    assert not (tmp_path / "overflow_report.json").exists()


class SumHW(Cell):
    def __init__(self):
        super().__init__()
        self.sum = P.ReduceSum()

    def construct(self, x):
        return self.sum(x, (1, 2))


@pytest.mark.parametrize("mode,reported", [("atomic_overflow", True), ("aicore_overflow", False), ("all", True)])
def test_a_split_reduction_overflowing_is_an_atomic_overflow(tmp_path, mode, reported):
    context.set_context(enable_dump_debug=True, dump_path=str(tmp_path), dump_debug_mode=mode)
    x = np.full((1, 256, 256, 3), 1e34, np.float32)     # a sum of 65536 of them passes float32's max
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverflowWarning)
        out = run(SumHW(), [x])
    assert np.isinf(out.asnumpy()).all()
    assert (tmp_path / "overflow_report.json").exists() == reported
    if reported:
        (entry,) = overflow_report(tmp_path)
        assert entry["check"] == "atomic_overflow" and entry["op_types"] == ["ReduceSum"]
        assert entry["block_dim"] > 1
