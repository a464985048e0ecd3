"""`graphkernel msrun` (graphkernel/tools/msrun.py): MindSpore's msrun flags on one machine over mpiexec,
per-rank logs worker_<rank>.log, each rank's share of the cores, a failing rank's status; msrun's
multi-machine flags refused with a pointer to mpiexec and a hostfile (no MPI needed for those)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dist_helpers import ROOT, SCRIPTS, clean_env, launcher, need_mpi
from graphkernel.communication.launcher import rank_environment, threads_per_rank
from graphkernel.communication.mpiexec import OPEN_MPI
from graphkernel.tools.cli import main

REPORT = os.path.join(SCRIPTS, "report.py")


@pytest.mark.parametrize("flags, match", [
    (["--worker_num=4", "--local_worker_num=2"], "spans several machines"),
    (["--worker_num=2", "--local_worker_num=2", "--master_addr=10.9.8.7"], "is another machine"),
    (["--worker_num=2", "--local_worker_num=2", "--node_rank=1"], "multi-machine flag"),
    (["--worker_num=2", "--local_worker_num=2", "--rank_table_file=rt.json"], "rank_table_file"),
    (["--worker_num=2", "--local_worker_num=2", "--master_port=80"], "1024..65535"),
])
def test_multi_machine_and_bad_flags_are_refused(capsys, flags, match):
    assert main(["msrun", *flags, REPORT]) == 2
    err = capsys.readouterr().err
    assert match in err
    if "machine" in match or "rank_table" in match:
        assert "mpiexec -f hostfile" in err and "docs/distributed.md" in err


def test_a_missing_script_is_named(capsys):
    assert main(["msrun", "--worker_num=2", "--local_worker_num=2", "no_such_script.py"]) == 2
    assert "'no_such_script.py' does not exist" in capsys.readouterr().err


def test_ranks_split_the_cores():
    assert [threads_per_rank(n, cores=8) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    env = rank_environment(2, cores=2)
    for name in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        assert env.get(name, os.environ.get(name)) is not None


def _msrun(tmp_path, *args, env=None):
    cmd = [sys.executable, "-m", "graphkernel", "msrun", "--worker_num=2", "--local_worker_num=2",
           f"--log_dir={tmp_path}", "--join=True", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env or clean_env(), capture_output=True, text=True, timeout=300)


def test_msrun_runs_the_ranks_with_their_logs_and_core_shares_and_reports_a_failed_rank(tmp_path):
    """One job: both ranks report what they see, then rank 1 raises."""
    need_mpi()
    env = clean_env(FAIL=1)
    for name in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        env.pop(name, None)
    done = _msrun(tmp_path, REPORT, env=env)
    share = str(threads_per_rank(2))
    for rank in (0, 1):
        with open(tmp_path / f"worker_{rank}.log") as f:
            log = f.read()
        line = next(x for x in log.splitlines() if x.startswith("REPORT "))
        seen = json.loads(line[len("REPORT "):])
        assert seen["rank"] == rank and seen["size"] == 2
        assert seen["env"] == dict.fromkeys(("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"), share)
        assert seen["threads"] == int(share)
        assert f"[worker_{rank}] REPORT " in done.stdout   # --join follows the logs
    assert "ValueError: rank 1 was asked to fail" in log and "rank 1 of 2 raised ValueError" in log
    assert done.returncode != 0 and "the job failed" in done.stderr
    if launcher().mpi == OPEN_MPI:   # Open MPI's launcher, not the rank, reports the abort: msrun shows it
        assert "mpiexec said (mpiexec.log):" in done.stderr and "MPI_ABORT was invoked on rank 1" in done.stderr


def test_the_scripts_own_flags_are_not_taken_for_abbreviations_of_msruns():
    """MindSpore 2.10's msrun reads a script's `--worker` as an ambiguous abbreviation of --worker_num."""
    from graphkernel.tools.cli import build_parser
    args = build_parser().parse_args(["msrun", "--worker_num=2", "--local_worker_num=2", "train.py", "--worker", "x",
                                      "--join", "1"])
    assert args.task_script == "train.py" and args.task_script_args == ["--worker", "x", "--join", "1"]
    assert args.join is False
