"""Faults in an MPI job end it, never hang it (graphkernel/communication/faults.py, engine.py): a rank that
raises at step 3 of `mpiexec -n 2 python tests/mpi_scripts/mlp_dp.py` ends the whole job with its error within 30 s
of raising; a rank that never reaches a collective gives the others a CollectiveTimeoutError naming the
collective and that rank, and two ranks waiting in different collectives each name the other's. Under
whichever MPI is installed (MPICH or Open MPI: tests/dist_helpers.py)."""
from __future__ import annotations

import re
import time

from dist_helpers import clean_env, need_mpi, run_job


def test_a_rank_raising_ends_the_job_with_its_error(tmp_path):
    need_mpi()
    code, output, _ = run_job(["--out", str(tmp_path), "--steps", "6", "--fail-rank", "1", "--fail-step", "3"],
                              timeout=300)
    ended = time.time()
    assert code != 0, output
    assert "graphkernel: rank 1 of 2 raised RuntimeError; ending the job (MPI_Abort)" in output
    raised = re.search(r"RuntimeError: rank 1 fails at step 3 on purpose at ([0-9.]+)", output)
    assert raised, output
    assert ended - float(raised.group(1)) < 30, "the job outlived the failed rank by 30 s or more"
    assert "rank 0 step 2" in output and "rank 0 step 4" not in output


def test_a_rank_missing_a_collective_times_the_others_out(tmp_path):
    need_mpi()
    code, output, _ = run_job(["--out", str(tmp_path), "--steps", "3", "--hang-rank", "1"],
                              env=clean_env(GRAPHKERNEL_COMM_TIMEOUT=3), timeout=300)
    assert code != 0, output
    assert "CollectiveTimeoutError: AllReduce(sum) of bucket" in output, output
    assert re.search(r"waited 3 s .*rank\(s\) \[1\] did not arrive: rank 1 is in no collective", output), output
    assert "graphkernel: rank 0 of 2 raised" in output


def test_ranks_waiting_in_different_collectives_name_each_others():
    """Each rank's main thread answers the other's question while its communicator thread waits in MPI.
    Both time out within milliseconds of each other; the first to abort may end the other before it
    prints, so one of the two reports is asked for."""
    need_mpi()
    code, output, _ = run_job([], env=clean_env(GRAPHKERNEL_COMM_TIMEOUT=3), timeout=300, script="crossed.py")
    assert code != 0, output
    head = ("Barrier #1 on group '{}' waited 3 s (the collective timeout: GRAPHKERNEL_COMM_TIMEOUT or "
            "HCCL_EXEC_TIMEOUT seconds); rank(s) [{}] did not arrive: rank {} has entered 0 collectives of this "
            "group and waits in Barrier #1 on group '{}'")
    reports = [head.format("pair", 1, 1, "hccl_world_group"), head.format("hccl_world_group", 0, 0, "pair")]
    assert any(r in output for r in reports), output
    assert "raised CollectiveTimeoutError" in output
