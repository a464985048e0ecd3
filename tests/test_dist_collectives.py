"""The collective primitives among two ranks (tests/mpi_scripts/collectives.py under `mpiexec -n 2`): AllReduce
(sum, max, min, prod; float32 and float16), AllGather, ReduceScatter, Broadcast from rank 1 and Barrier, in
GRAPH_MODE on the numpy reference and on the emulated device (fused) and in PYNATIVE_MODE, equal to numpy
over both ranks' inputs; MindSpore's gradient rules through AllReduce; parameter_broadcast; a group made by create_group;
the rank queries; a collective's arrays freed once it returns. (A process that is its own group: tests/op_cases.py and tests/grad_samples.py.)"""
from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

from dist_helpers import SCRIPTS, need_mpi, run_job, shared_dir
from tolerance import assert_close

_spec = importlib.util.spec_from_file_location("collectives_script", os.path.join(SCRIPTS, "collectives.py"))
_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_script)
inputs, NAMES = _script.inputs, _script.NAMES
SIZE = 2


def _job(out: str) -> None:
    code, output, _ = run_job([out, "CPU", "Ascend"], n=SIZE, script="collectives.py")
    assert code == 0, output


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    need_mpi()
    out = shared_dir(tmp_path_factory, "dist-collectives", _job)   # one job for every xdist worker
    ranks = []
    for r in range(SIZE):
        with open(os.path.join(out, f"rank{r}.json")) as f:
            ranks.append((dict(np.load(os.path.join(out, f"rank{r}.npz"))), json.load(f)))
    return ranks


def expected(rank: int) -> dict:
    xs = [inputs(r)[0] for r in range(SIZE)]
    hs = [inputs(r)[1] for r in range(SIZE)]
    total = xs[0] + xs[1]
    rows = xs[0].shape[0] // SIZE
    return {"sum": 2 * xs[0] + 2 * xs[1], "max": np.maximum(*xs), "min": np.minimum(*xs),
            "prod": (xs[0] * 0.5) * (xs[1] * 0.5), "gather": np.concatenate([x + 1 for x in xs]),
            "scatter": total[rank * rows:(rank + 1) * rows], "broadcast": xs[1],
            "sum_f16": (hs[0].astype(np.float32) + hs[1].astype(np.float32)).astype(np.float16)}


@pytest.mark.parametrize("where", ["CPU/graph", "CPU/pynative", "Ascend/graph", "Ascend/pynative"])
@pytest.mark.parametrize("name", NAMES)
def test_collectives_equal_numpy_over_both_ranks(results, where, name):
    for rank, (got, _) in enumerate(results):
        assert_close(got[f"{where}/{name}"], expected(rank)[name], err_msg=f"rank {rank} {where}/{name}")


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_gradients_through_all_reduce_are_mindspores_rules(results, op):
    """loss_r = sum(AllReduce_op(x_r) * w_r): dx = AllReduce(sum) of w (times x == out for max/min; of w*out,
    over x, for prod), as mindspore/ops/_grad_experimental/grad_comm_ops.py."""
    ws = [np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3) * (r + 1) for r in range(SIZE)]
    xs = [inputs(r)[0] for r in range(SIZE)]
    out = {"sum": xs[0] + xs[1], "max": np.maximum(*xs), "min": np.minimum(*xs), "prod": xs[0] * xs[1]}[op]
    for rank, (got, _) in enumerate(results):
        if op == "prod":
            want = (ws[0] * out + ws[1] * out) / xs[rank]
        elif op == "sum":
            want = ws[0] + ws[1]
        else:
            want = (ws[0] + ws[1]) * (xs[rank] == out)
        assert_close(got[f"grad/{op}"], want.astype(np.float32), err_msg=f"rank {rank}")


def test_a_created_group_and_the_rank_queries(results):
    for rank, (got, info) in enumerate(results):
        assert_close(got["group/sum"], expected(rank)["sum"])
        assert info == {"rank": rank, "size": SIZE, "local_rank": rank, "local_size": SIZE, "pair_rank": rank,
                        "pair_size": SIZE, "pair": [0, 1], "released": True}


def test_parameter_broadcast_gives_every_rank_rank_0s_parameters(results):
    for got, _ in results:
        assert_close(got["parameter_broadcast/w"], np.full(3, 1.0, np.float32), bitwise=True)
        assert_close(got["parameter_broadcast/b"], np.full((2, 2), 10.0, np.float32), bitwise=True)
