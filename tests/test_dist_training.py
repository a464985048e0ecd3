"""Data-parallel training under `mpiexec -n 2` (tests/mpi_scripts/mlp_dp.py, a MindSpore 2.x-style script): two
ranks, each on its half of every batch, train as one process whose loss is the mean of the halves' losses
(losses within 1e-5 relative at every step, Parameters within float32 tolerance) and as MindSpore 2.10's
own msrun of the same script (tests/data/mindspore_dp_losses.json, bench/mindspore_dist_check.py); the two
ranks' Parameters are bitwise identical after every step; an overflow on one rank skips the step on both;
the buckets split as all_reduce_fusion_config says and start inside the backward. One job runs every
configuration in turn (a job costs seconds of start-up and compiles)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from dist_helpers import ROOT, need_mpi, read_ranks, run_job, run_reference, shared_dir
from tolerance import assert_close


def assert_relative(got, want, rtol: float, what: str) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = got == want   # an overflow step's inf loss on both sides (inf - inf would be a NaN difference)
    with np.errstate(invalid="ignore"):
        worst = float(np.max(np.where(same, 0.0, np.abs(got - want) / np.abs(np.where(same, 1.0, want)))))
    assert worst <= rtol, f"{what}: {worst:.2e} relative (at most {rtol:g}): {got.tolist()} vs {want.tolist()}"

# the numpy reference (no kernels to compile) but for `train`, on the emulated device, fused: its kernel
# list shows the buckets inside the backward (the slow twin runs every one on the device)
RUNS = {
    "mean": "",                                       # the reducer averages
    "sum": "mean=0",                                  # it sums, the script divides
    "train": "cell=train,buckets=3,target=Ascend,profile=1",   # TrainOneStepCell's own reducer, three buckets
    "pynative": "mode=pynative,jit=0",                # op by op: the buckets start and are waited in turn
    "overflow": "cell=lossscale,overflow_rank=1,overflow_step=2",
    "saturation": "cell=lossscale,overflow_rank=0,overflow_step=1,overflow_mode=saturation",
    "model": "cell=model",                            # Model.train over a sharded NumpySlicesDataset
}
STEPS = 4
with open(os.path.join(ROOT, "tests", "data", "mindspore_dp_losses.json")) as _f:
    MINDSPORE = json.load(_f)


def _train(out: str, runs: dict) -> None:
    args = ["--out", out, "--steps", str(STEPS)] + [a for name, keys in runs.items() for a in ("--run", f"{name}:{keys}")]
    code, output, _ = run_job(args)
    assert code == 0, output


def _job(out: str) -> None:
    _train(out, RUNS)
    run_reference(["--out", os.path.join(out, "reference"), "--steps", str(STEPS), "--run", "fn:",
                   "--run", "ls:cell=lossscale", "--run", "model:cell=model"])


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    need_mpi()
    out = shared_dir(tmp_path_factory, "dist-training", _job)   # one job, whichever xdist worker comes first
    return out, os.path.join(out, "reference")


def _reference(ref: str, name: str):
    with open(os.path.join(ref, name, "rank0.json")) as f:
        return json.load(f), np.load(os.path.join(ref, name, "rank0.npz"))


@pytest.mark.parametrize("name", ["mean", "sum", "train", "pynative", "model"])
def test_two_ranks_train_as_one_process_over_both_halves(job, name):
    """`model`: Model.train, each rank over its shard (rows r, r+2, ...) in batches of 4, against the one
    process over all rows in batches of 8 (equal halves, a mean loss: the same gradient)."""
    out, ref = job
    ranks = read_ranks(out, name)
    want, want_params = _reference(ref, "model" if name == "model" else "fn")
    mean = np.mean([r["losses"] for r in ranks], axis=0)
    assert_relative(mean, want["losses"], 1e-5, f"{name}: the mean of the ranks' losses")
    assert ranks[0]["losses"] != ranks[1]["losses"], "each rank trains on its own half"
    assert ranks[0]["digests"] == ranks[1]["digests"], f"{name}: the ranks' Parameters differ after a step"
    got = np.load(os.path.join(out, name, "rank0.npz"))
    for key in want_params.files:
        assert_close(got[key], want_params[key], err_msg=f"{name}: Parameter {key}")


@pytest.mark.parametrize("name, theirs", [("mean", "mean:mean=1"), ("sum", "sum:mean=0"), ("train", "train:cell=train")])
def test_per_rank_losses_match_mindspore_data_parallel(job, name, theirs):
    """MindSpore 2.10's msrun (mccl on its CPU) of the same script: the same loss on each rank, each step."""
    out, _ = job
    for rank, record in enumerate(read_ranks(out, name)):
        assert_relative(record["losses"], MINDSPORE["runs"][theirs][f"rank{rank}"], 1e-5,
                        f"{name} rank {rank} against MindSpore {MINDSPORE['mindspore']}")


@pytest.mark.parametrize("name, step", [("overflow", 2), ("saturation", 1)])
def test_an_overflow_on_one_rank_skips_the_step_on_both(job, name, step):
    out, _ = job
    ranks = read_ranks(out, name)
    for r in ranks:
        assert r["overflow"] == [k == step for k in range(STEPS)], r["overflow"]
        assert r["digests"][step] == r["digests"][step - 1], "the skipped step changed a Parameter"
        assert r["scale"][step] == r["scale"][step - 1] / 2, "the dynamic scale halves on overflow"
    assert ranks[0]["digests"] == ranks[1]["digests"] and ranks[0]["scale"] == ranks[1]["scale"]
    if name == "overflow":   # the steps before the overflow are the one-process run's
        want, _ = _reference(job[1], "ls")
        mean = np.mean([r["losses"][:step] for r in ranks], axis=0)
        assert_relative(mean, want["losses"][:step], 1e-5, f"{name}: the steps before the overflow")


def test_buckets_split_as_configured_and_start_inside_the_backward(job):
    out, _ = job
    record = read_ranks(out, "train")[0]
    # all_reduce_fusion_config=[2, 4] over fc1.w fc1.b | fc2.w fc2.b | fc3.w fc3.b, the last Parameters first
    assert [(n, k) for _, n, k in record["buckets"]] == [(2, (16 * 3 + 3) * 4), (2, (16 * 16 + 16) * 4),
                                                           (2, (6 * 16 + 16) * 4)]
    kernels = record["kernels"]
    kinds = [k[1][0] if k[2] == "comm" else k[3] for k in kernels]
    starts = [i for i, k in enumerate(kinds) if k == "AllReduceStart"]
    waits = [i for i, k in enumerate(kinds) if k == "AllReduceWait"]
    last_backward = max(i for i, k in enumerate(kinds) if k == "backward")
    first_update = min(i for i, k in enumerate(kernels) if k[3] == "optimizer" and k[2] == "device")
    assert len(starts) == len(waits) == 3
    assert starts[0] < starts[1] < last_backward, "a bucket's AllReduce starts while the backward still runs"
    for s in starts:   # each starts right after the kernel that made its last gradient
        assert kinds[s - 1] == "backward"
    assert max(waits) < first_update and min(waits) > max(starts), "the waits come last, before the updates"


@pytest.mark.slow
def test_every_configuration_on_the_emulated_device(tmp_path, job):
    """The default runs again on the emulated device, fused (a cold kernel cache compiles for minutes)."""
    runs = {name: ",".join(filter(None, [keys, "target=Ascend"])) for name, keys in RUNS.items() if "Ascend" not in keys}
    _train(str(tmp_path), runs)
    for name in runs:
        mine, theirs = read_ranks(str(tmp_path), name), read_ranks(job[0], name)
        assert mine[0]["digests"] == mine[1]["digests"]
        for a, b in zip(mine, theirs):
            assert_relative(a["losses"], b["losses"], 1e-5, f"{name} on the device against the reference")
            assert a["overflow"] == b["overflow"]


def test_the_profiler_trace_shows_each_buckets_allreduce_on_the_communicator(job):
    out, _ = job
    with open(os.path.join(out, "train", "profile0", "profiler", "trace.json")) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("cat") == "collective"]
    assert sorted({e["args"]["bucket"] for e in spans}) == sorted(name for name, _, _ in read_ranks(out, "train")[0]["buckets"])
    assert len(spans) == 3 * (STEPS - 1) and all(e["dur"] >= 0 for e in spans)
    names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    assert "communicator" in names
    launches = [e for e in events if e.get("cat") == "comm"]
    assert {e["args"]["ops"][0] for e in launches} == {"AllReduceStart", "AllReduceWait"}


def test_model_checkpoints_go_to_a_folder_per_rank(job):
    """ModelCheckpoint(directory=D) in a job of two ranks: D/rank_0/ and D/rank_1/, never one file for two."""
    from graphkernel import load_checkpoint
    out, _ = job
    paths = [r["checkpoint"] for r in read_ranks(out, "model")]
    assert paths == [os.path.join("model", "ckpt", f"rank_{r}", f"mlp-1_{STEPS}.ckpt") for r in (0, 1)]
    saved = [load_checkpoint(os.path.join(out, p)) for p in paths]
    assert sorted(saved[0]) == sorted(saved[1])
    for name in saved[0]:
        assert_close(saved[0][name].asnumpy(), saved[1][name].asnumpy(), bitwise=True, err_msg=name)
