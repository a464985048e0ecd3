"""`graphkernel bench` on tiny sizes: the harness runs, verifies every implementation and writes its
outputs with the fields the docs and the report read. No time is asserted."""
import configparser
import dataclasses
import json
import os
from pathlib import Path

import pytest

from graphkernel.tools.bench import harness, outputs, peers
from graphkernel.tools.bench.command import BenchError, run, workload_list
from graphkernel.tools.cli import main


@pytest.fixture(scope="module")
def results():
    settings = dataclasses.replace(harness.TINY, peers=False, progress=False)
    return run(settings, only="NetBasicFuse,W1", log=lambda line: None)


def test_every_chosen_workload_is_measured_and_verified(results):
    names = [e["name"] for e in results["workloads"]]
    assert names == ["NetBasicFuse 4x4", "W1 x*2+1 8x1024"]
    for e in results["workloads"]:
        assert e["verified"] is True
        for impl in ("fused", "unfused", "numpy"):
            assert e["impls"][impl]["verify"]["ok"] is True
            assert e["impls"][impl]["time"]["calls"] >= 1
            assert e["impls"][impl]["time"]["q25_s"] <= e["impls"][impl]["time"]["median_s"]
        assert e["impls"]["fused"]["kernels"] < e["impls"]["unfused"]["kernels"]
        assert {"fused/unfused", "fused/numpy"} <= set(e["ratios"])
        assert "first_s" in e["impls"]["fused"]["compile"]
        assert e["impls"]["fused"]["peak_bytes"] >= 0 and isinstance(e["memory_ok"], bool)
        assert e["impls"]["fused"]["profile"]["kernels_s"] > 0
        assert "bound" not in e  # tiny sizes: launch costs, not traffic (harness.BOUND_MIN_ELEMENTS)


def test_environment_notes_the_openblas_variables(results):
    env = results["environment"]
    assert {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "openblas_vars_set", "threads"} <= set(env)


def test_outputs_are_written(results, tmp_path):
    paths = outputs.write(results, str(tmp_path))
    assert json.loads(open(paths["json"]).read())["workloads"][0]["name"] == "NetBasicFuse 4x4"
    table = open(paths["markdown"]).read()
    assert "| NetBasicFuse 4x4 | 2→1 |" in table


def test_verify_fails_outside_the_tolerance():
    import numpy as np
    e = np.ones(4, np.float32)
    assert harness.verify([e * (1 + 1e-6)], [e])["ok"]
    assert not harness.verify([e * (1 + 1e-4)], [e])["ok"]


def test_a_peer_not_installed_is_announced_once(monkeypatch, capsys):
    def not_installed(name):
        def make(workload, arrays, threads=None):
            raise peers.NotInstalled(f"{name}: ModuleNotFoundError: No module named {name!r}")
        return make
    monkeypatch.setattr(peers, "jax_impl", not_installed("jax"))
    monkeypatch.setattr(peers, "ort_impl", not_installed("onnxruntime"))
    lines = []
    settings = dataclasses.replace(harness.TINY, peers=True, progress=True)
    results = run(settings, only="NetBasicFuse,W1", log=lines.append)
    assert len(results["workloads"]) == 2
    for name in ("jax", "onnxruntime"):
        assert sum(line.startswith(f"{name}: not installed, skipped (pip install") for line in lines) == 1
        assert all("not installed" in e["impls"][name]["unavailable"] for e in results["workloads"])
    progress = capsys.readouterr().err
    assert progress.count("set up jax") == 1 and progress.count("set up onnxruntime") == 1


def test_the_bench_extra_installs_every_peer_the_bench_compares_against():
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parents[1] / "setup.cfg")
    extra = {line.split("#")[0].strip().split("=")[0].split(">")[0] for line in
             cfg["options.extras_require"]["bench"].splitlines()} - {""}
    assert set(peers.INSTALL) <= extra and "matplotlib" in extra


def test_only_that_names_nothing_is_an_error(capsys):
    with pytest.raises(BenchError, match="names no workload"):
        workload_list(harness.TINY, only="nonesuch")
    assert main(["bench", "--tiny", "--only", "nonesuch"]) == 2
    assert "names no workload" in capsys.readouterr().err


@pytest.mark.twin
def test_a_training_workload_verifies_and_counts_kernels_per_phase():
    """The small twin of the test below: one training workload (LayerNormGrad)."""
    settings = dataclasses.replace(harness.TINY, peers=False, progress=False, cold_compile=False)
    (e,) = run(settings, only="T1", log=lambda line: None)["workloads"]
    assert e["name"] == "T1 LayerNormGrad(1024) 8x1024" and e["verified"] is True and "numpy" in e["impls"]
    fused, unfused = e["impls"]["fused"]["phases"], e["impls"]["unfused"]["phases"]
    assert 0 < fused["backward"] < unfused["backward"]
    assert sum(fused.values()) == e["impls"]["fused"]["kernels"]


@pytest.mark.slow
def test_training_workloads_verify_and_count_kernels_per_phase():
    settings = dataclasses.replace(harness.TINY, peers=False, progress=False, cold_compile=False)
    results = run(settings, only="T1,T2,BERT layer fwd", log=lambda line: None)
    by_name = {e["name"]: e for e in results["workloads"]}
    assert set(by_name) == {"T1 LayerNormGrad(1024) 8x1024", "T2 SoftmaxGrad(128) 8x1024",
                            "BERT layer fwd+bwd b2 s8 h64"}
    for e in by_name.values():
        assert e["verified"] is True
        fused, unfused = e["impls"]["fused"]["phases"], e["impls"]["unfused"]["phases"]
        assert 0 < fused["backward"] < unfused["backward"]
        assert sum(fused.values()) == e["impls"]["fused"]["kernels"]
    assert "numpy" in by_name["T1 LayerNormGrad(1024) 8x1024"]["impls"]
    step = by_name["BERT layer fwd+bwd b2 s8 h64"]
    assert "numpy" not in step["impls"] and "numpy cannot differentiate" in step["no_array_code"]
    assert "outside_opaque fused/unfused" in step["ratios"]


# --- graphkernel bench --train at a tiny size (workers in processes of their own; the peers' frameworks
# taken as not installed, so none runs): each compiles a BERT encoder's training step fused, unfused and on
# the reference, so they are slow; their small twins are the tests of the pieces below them
# (test_train_bench_disagreeing_losses_stop_the_run, test_train_bench_times_quiet_and_loaded_rounds) ------

TRAIN_LOG = []


@pytest.fixture(scope="module")
def train_results():
    from graphkernel.tools.bench import train_bench, train_peers
    settings = dataclasses.replace(train_bench.TRAIN_TINY, layers=(1,), equal_steps=4, progress=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_peers, "installed", lambda name: False)
        return train_bench.run(settings, log=TRAIN_LOG.append)


@pytest.mark.slow
def test_train_bench_announces_a_missing_framework_once(train_results):
    from graphkernel.tools.bench import train_peers
    frameworks = sorted({p.split(".")[0] for p in train_peers.PEERS})
    assert [line for line in TRAIN_LOG if "not installed" in line] == [
        f"{name}: not installed, skipped ({train_peers.INSTALL[name]})" for name in frameworks]
    started = [line.strip().split(":")[0] for line in TRAIN_LOG if line.endswith(": starting")]
    assert sorted(started) == ["fused", "reference", "unfused"]   # no worker of a peer
    (c,) = train_results["configs"]
    assert all(c["impls"][p]["skipped"].startswith("not installed") for p in train_peers.PEERS)


@pytest.mark.slow
def test_train_bench_checks_losses_and_measures_every_phase(train_results):
    (c,) = train_results["configs"]
    assert c["name"] == "BERT encoder x1 b2 s8 h64"
    checks = c["loss_checks"]
    assert set(checks) == {"fused vs reference", "unfused vs reference", "fused vs unfused"}
    assert checks["fused vs unfused"]["steps"] == 4 and all(v["ok"] for v in checks.values())
    ref = c["impls"]["reference"]["losses"]
    assert len(ref) == 3 and ref[2] < ref[0]          # AdamW lowers the MSE loss
    for impl in ("fused", "unfused"):
        d = c["impls"][impl]
        assert set(d["phases"]) == {"forward", "backward", "optimizer"}
        assert d["time"]["calls"] == 1 and d["compile_s"] > 0
        assert d["peak_bytes"] >= d["peak_before_bytes"] > 0 and d["maxrss_bytes"] > 0
        f = c["figures"][impl]
        assert 0 < f["matmul_s"] and 0 < f["fwd_bwd_outside_matmul_s"] < f["fwd_bwd_s"]
        assert d["profile"]["optimizer_bytes"] > 0 and f["optimizer_fraction_of_bound"] > 0
    fused, unfused = c["impls"]["fused"]["phases"], c["impls"]["unfused"]["phases"]
    assert all(fused[p] < unfused[p] for p in fused)
    assert {"step fused/unfused", "fwd+bwd outside MatMul fused/unfused"} <= set(c["ratios"])


@pytest.mark.slow
def test_train_bench_outputs(train_results, tmp_path):
    from graphkernel.tools.bench import train_outputs
    names = [t["target"] for t in train_results["targets"]]
    assert "1 layers: step fused/unfused" in names
    paths = train_outputs.write(train_results, str(tmp_path), "train_tiny")
    text = open(paths["markdown"]).read()
    assert "| BERT encoder x1 b2 s8 h64 | fused |" in text and "fused vs unfused" in text
    assert json.loads(open(paths["json"]).read())["configs"][0]["shape"]["hidden"] == 64


@pytest.mark.slow
def test_train_bench_full_model_with_embeddings():
    from graphkernel.tools.bench import train_bench
    settings = dataclasses.replace(train_bench.BERT_LARGE_TINY, layers=(1,), rounds=1, progress=False)
    (c,) = train_bench.run(settings, log=lambda line: None)["configs"]
    assert c["shape"]["vocab"] == 100 and "reference" not in c["impls"]
    assert c["loss_checks"]["fused vs unfused"]["ok"]
    assert c["impls"]["fused"]["time"]["calls"] == 1


def test_train_bench_disagreeing_losses_stop_the_run():
    from graphkernel.tools.bench.train_bench import TrainBenchError, _check
    losses = {"reference": [1.0, 0.9, 0.8], "fused": [1.0, 0.9, 0.8], "unfused": [1.0, 0.9, 0.8],
              "torch": [1.0, 0.9, 0.8001]}
    _check(dict(losses, torch=[1.0, 0.9, 0.800001]), {"name": "n"})
    with pytest.raises(TrainBenchError, match=r"torch vs reference: max relative difference 0.000125 > 2e-05"):
        _check(losses, {"name": "n"})


def test_train_peers_missing_or_unknown():
    from graphkernel.tools.bench import train_peers
    from graphkernel.tools.bench.train_model import Shape
    with pytest.raises(ValueError, match="unknown peer 'nonesuch'"):
        train_peers.make("nonesuch", Shape(64, 4, 256, 8, 2), {}, {})
    with pytest.raises(train_peers.PeerMissing, match="encoder stack only"):
        train_peers.make("torch", Shape(64, 4, 256, 8, 2, vocab=100), {}, {})


def test_onnx_models_run_as_torch_exports_them():
    """The two models of the rows workloads: graphkernel (fusion on and off) and numpy agree with the
    reference, and the model ONNX Runtime would run computes the same (onnx's own reference evaluator)."""
    import numpy as np
    from onnx.reference import ReferenceEvaluator
    from graphkernel.tools.bench import workloads

    settings = dataclasses.replace(harness.TINY, peers=False, progress=False)
    chosen = workload_list(settings, only="ONNX")
    assert [w.name for w in chosen] == ["ONNX masked Softmax 1x2x8x8", "ONNX residual+LayerNorm 8x64"]
    ops = [[n.op_type for n in w.onnx_model().graph.node] for w in chosen]
    assert ops == [["Mul", "Add", "Softmax", "Identity"], ["Add", "LayerNormalization", "Identity"]]
    out = run(settings, only="ONNX", log=lambda line: None)
    for w, e in zip(chosen, out["workloads"]):
        assert e["verified"] is True and e["impls"]["fused"]["kernels"] == 1, e["name"]
        arrays = w.inputs(np.random.default_rng(0))
        model = w.onnx_model()
        got = ReferenceEvaluator(model).run(None, dict(zip([i.name for i in model.graph.input], arrays)))[0]
        want = w.arrays(np, w.consts, *arrays)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert workloads.onnx_suite(*harness.MODELS)[0].inputs(np.random.default_rng(0))[1].shape == (2, 1, 1, 128)


def test_the_bound_copies_copy():
    """Both copies the bound is taken from move every element (the bound's bandwidth is only as good as
    the copy it times), for one thread and several, on sizes that do not split evenly."""
    import numpy as np
    from graphkernel.tools.bench import timing
    for threads in (1, 2, 3):
        impl = timing.stream_impl(1001, threads)
        out = impl.call()
        np.testing.assert_array_equal(out, impl.call.src)
    copy = timing.copy_impl(999)
    copy.call()


def test_targets_count_the_row_workloads_against_onnx_runtime():
    def entry(name, family, ratio):
        return {"name": name, "family": family, "ratios": {"fused/onnxruntime": ratio}}
    results = {"workloads": [entry("W4 LayerNorm(1024) 256x1024", "W4", 0.8), entry("W5 Softmax(128) 256x1024", "W5", 2.0),
                             entry("ONNX masked Softmax 2x16x128x128", "ONNX masked Softmax", 1.5),
                             entry("W1 x*2+1 256x1024", "W1", 3.0)]}
    lines = [t for t in outputs.targets(results) if t.startswith("LayerNorm and Softmax rows")]
    assert lines == ["LayerNorm and Softmax rows (W4, W5, the ONNX models), fused/ORT <= 1.0: 1 of 3 "
                     "(worst W5 Softmax(128) 256x1024 2.00)"]


def test_interleaved_waits_out_a_spinning_peer_and_settles_each_side(monkeypatch):
    """Each side is timed in its steady state: the implementation after one whose threads spin on
    (ONNX Runtime's pool) waits that one's `spins_s` first, and every side makes untimed calls for
    SETTLE_S before its timed ones."""
    import time
    from graphkernel.tools.bench import timing
    calls, sleeps = [], []
    monkeypatch.setattr(timing.time, "sleep", sleeps.append)

    def impl(name, spins_s=0.0):
        return timing.Impl(name, lambda: calls.append((name, time.perf_counter())), spins_s=spins_s)
    times = timing.interleaved([impl("spinner", spins_s=0.03), impl("ours")], rounds=2, per_round=2)
    assert {k: len(v) for k, v in times.items()} == {"spinner": 4, "ours": 4}
    runs = []                                   # consecutive calls of one implementation: (name, first, last)
    for name, t in calls:
        if runs and runs[-1][0] == name:
            runs[-1][2] = t
        else:
            runs.append([name, t, t])
    assert [r[0] for r in runs] == ["spinner", "ours", "spinner"]   # round 2 starts with "ours", as round 1 ended
    assert sleeps == [0.03, 0.0]                # after the spinner its spins_s; after "ours", which does not spin, 0
    for _, first, last in runs:
        assert last - first >= timing.SETTLE_S                     # settled before the timed calls


def _state(pid: int) -> str:
    """The process state letter from /proc (R running, S sleeping, T stopped, Z zombie)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _settles(pids, states: str) -> bool:
    """Whether every process is in one of `states` within 10 s: a signal takes effect when the process is
    next scheduled, and a nice-19 process on a busy machine waits for its turn."""
    import time
    deadline = time.monotonic() + 10.0
    while not all(_state(p) in states for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc (Linux)")
def test_background_load_runs_only_inside_its_block():
    from graphkernel.tools.bench.background import BackgroundLoad, BackgroundLoadError
    with pytest.raises(BackgroundLoadError, match="K\\[:nice\\]"):
        BackgroundLoad.parse("two")
    with pytest.raises(BackgroundLoadError, match="nice"):
        BackgroundLoad.parse("1:40")
    load = BackgroundLoad.parse("2:19")
    assert (load.processes, load.nice) == (2, 19) and load.label() == "2 busy processes at nice 19"
    try:
        with load:
            pids = [p.pid for p in load._procs]
            assert len(pids) == 2 and _settles(pids, "RS")
            assert all(os.getpriority(os.PRIO_PROCESS, p) == 19 for p in pids)
        assert _settles(pids, "T")   # paused between loaded rounds: no CPU taken
    finally:
        load.close()
    assert not load._procs


def test_train_bench_times_quiet_and_loaded_rounds(monkeypatch):
    """Each round times every implementation quiet, then beside the load; the ratios follow."""
    from graphkernel.tools.bench import train_bench
    from graphkernel.tools.bench.background import BackgroundLoad
    busy = []
    monkeypatch.setattr(BackgroundLoad, "__enter__", lambda self: busy.append(True) or self)
    monkeypatch.setattr(BackgroundLoad, "__exit__", lambda self, *exc: busy.pop())

    class Stand:
        def __init__(self, impl, quiet_s):
            self.impl, self.quiet_s = impl, quiet_s

        def ask(self, cmd, n):
            return {"times": [self.quiet_s * (3 if busy else 1)] * n}
    entry = {"impls": {"fused": {}, "unfused": {}}}
    s = train_bench.TrainSettings("t", train_bench.BERT, rounds=2, per_round=2, background="1", progress=False)
    train_bench._time([Stand("fused", 0.1), Stand("unfused", 0.2)], s, entry, print)
    assert entry["impls"]["fused"]["time"]["median_s"] == pytest.approx(0.1)
    assert entry["impls"]["fused"]["time_loaded"]["median_s"] == pytest.approx(0.3)
    assert entry["background"] == "1 busy process at nice 0" and len(entry["loadavg_loaded"]) == 2
    train_bench.derive(entry)
    assert entry["ratios"]["fused loaded/quiet"] == pytest.approx(3.0)
