"""MPICH and Open MPI side by side, without starting a job: what each launcher puts in a rank's environment
(the variables below are the ones MPICH 5.0.2's Hydra and Open MPI 5.0.11's PRRTE set here, for rank 1 of
2) and how graphkernel reads it (graphkernel/communication/launcher.py); how the ranks of one machine
split its cores, bound or not; which launcher `mpiexec --version` names and the command each gets
(graphkernel/communication/mpiexec.py); Open MPI's refusal to run as root, named by msrun before a job
starts; and a launcher of another MPI than mpi4py's, which init() refuses (that one test needs mpi4py).
The jobs themselves run under whichever MPI is installed: tests/test_dist_*.py."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dist_helpers import ROOT, launcher as installed, need_mpi
from graphkernel.communication import launcher, mpiexec
from graphkernel.communication.launcher import Announced, announced, rank_threads, without_launcher
from graphkernel.communication.mpiexec import MPICH, OPEN_MPI, OTHER, Mpiexec
from graphkernel.tools.cli import main

HYDRA_RANK1 = {"PMI_RANK": "1", "PMI_SIZE": "2", "PMI_FD": "11", "PMI_HOSTNAME": "vm", "MPI_LOCALRANKID": "1",
               "MPI_LOCALNRANKS": "2", "HYDI_CONTROL_FD": "7", "GFORTRAN_UNBUFFERED_PRECONNECTED": "y"}
OPEN_MPI_RANK1 = {
    "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "1", "OMPI_WORLD_SIZE": "2",
    "OMPI_WORLD_LOCAL_SIZE": "2", "OMPI_UNIVERSE_SIZE": "2", "OMPI_COMMAND": "python", "OMPI_ARGV": "train.py",
    "OMPI_FILE_LOCATION": "/tmp/ompi.22986/1/1", "OMPI_NUM_APP_CTX": "1", "OMPI_TOOL_NAME": "mpiexec",
    "OMPI_MCA_initial_wdir": "/tmp", "OMPI_MCA_num_procs": "2", "OMPI_MCA_cpu_type": "x86_64",
    "OMPI_MCA_PREFIXES": "mca,opal,ompi", "OPAL_USER_PARAMS_GIVEN": "1", "PMIX_RANK": "1",
    "PMIX_NAMESPACE": "prterun-vm-22986@1", "PMIX_SERVER_URI41": "prterun-vm-22986@0.0;tcp4://127.0.0.1:54161",
    "PMIX_HOSTNAME": "vm", "PRTE_LAUNCHED": "1"}
# what a launcher may leave that is the user's, and must survive without_launcher
USERS = {"PATH": "/usr/bin", "OMPI_MCA_btl": "self,vader", "OMPI_ALLOW_RUN_AS_ROOT": "1", "MPI4PY_MPIABI": "mpich",
         "NUMBA_NUM_THREADS": "1"}

OPEN_MPI_VERSION = "mpiexec (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
HYDRA_VERSION = ("HYDRA build details:\n    Version:                                 5.0.2\n"
                 "    Release Date:                            Fri Sep 25 20:45:26 UTC 2026\n")


@pytest.mark.parametrize("environ, want", [
    (HYDRA_RANK1, Announced("MPICH", "PMI_SIZE", 1, 2, 1, 2)),
    (OPEN_MPI_RANK1, Announced("Open MPI", "OMPI_COMM_WORLD_SIZE", 1, 2, 1, 2)),
    ({"PMIX_RANK": "3", "PMIX_NAMESPACE": "slurm.pmix.7.0"}, Announced("PMIx", None, 3, None, None, None)),
    ({"PMI_RANK": "0", "PMI_SIZE": "4"}, Announced("MPICH", "PMI_SIZE", 0, 4, None, None)),   # Slurm's PMI-2
    (USERS, None),
])
def test_each_launchers_variables_are_read_together(environ, want):
    assert announced(dict(environ, **USERS)) == want


def test_the_module_functions_read_the_process_environment(monkeypatch):
    for name in {*HYDRA_RANK1, *OPEN_MPI_RANK1}:
        monkeypatch.delenv(name, raising=False)
    assert not launcher.launched() and launcher.env_rank() is None
    for name, value in OPEN_MPI_RANK1.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0")   # two machines, one rank each: world 1 of 2, local 0 of 1
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1")
    got = (launcher.launched(), launcher.env_rank(), launcher.env_size(), launcher.env_local_rank(),
           launcher.env_local_size())
    assert got == (True, 1, 2, 0, 1)


def test_a_job_started_from_a_rank_inherits_no_launcher_variable():
    for environ in (HYDRA_RANK1, OPEN_MPI_RANK1):
        assert without_launcher(dict(environ, **USERS)) == USERS


@pytest.mark.parametrize("cpu_sets, quota, want", [
    ([range(8)] * 2, None, [4, 4]),                     # Hydra binds none: every rank on every core
    ([range(8)] * 3, None, [2, 2, 2]),
    ([range(0, 4), range(4, 8)], None, [4, 4]),         # Open MPI --map-by slot:PE=4: four cores each
    ([{0}, {1}], None, [1, 1]),                         # Open MPI's default for two ranks: a core each
    ([{0}] * 3, None, [1, 1, 1]),                       # more ranks than cores: at least one thread
    ([range(8), range(8)], 2.5, [1, 1]),                # a cgroup quota of 2.5 cores over both
    ([range(0, 6), range(4, 8)], None, [3, 2]),         # overlapping: shared with the other rank
])
def test_ranks_take_the_cores_they_are_given(cpu_sets, quota, want):
    assert [rank_threads(cpu_sets, me, quota) for me in range(len(cpu_sets))] == want


@pytest.mark.parametrize("text, mpi, version, flags", [
    (OPEN_MPI_VERSION, OPEN_MPI, "5.0.11", ["--oversubscribe", "--bind-to", "none"]),
    (HYDRA_VERSION, MPICH, "5.0.2", []),
    ("Some MPI 1.0\n", OTHER, "", []),
])
def test_the_launcher_is_named_by_its_version_and_gets_its_flags(text, mpi, version, flags):
    assert mpiexec.identify(text) == (mpi, version)
    assert Mpiexec("/x/mpiexec", mpi, version).command(3, ["python", "t.py"]) == \
        ["/x/mpiexec", "-n", "3", *flags, "python", "t.py"]


def test_open_mpi_refuses_root_unless_its_own_switch_is_set(monkeypatch):
    ompi, hydra = Mpiexec("/x/mpiexec", OPEN_MPI, "5.0.11"), Mpiexec("/y/mpiexec", MPICH, "5.0.2")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    why = ompi.refusal({})
    assert "Open MPI 5.0.11's mpiexec (/x/mpiexec) refuses to run as root" in why
    assert "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in why
    assert ompi.refusal({"OMPI_ALLOW_RUN_AS_ROOT": "1"}) is not None   # Open MPI 5 wants both
    assert ompi.refusal(dict.fromkeys(mpiexec.ROOT_VARS, "1")) is None
    assert hydra.refusal({}) is None
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert ompi.refusal({}) is None


def test_a_launcher_of_another_mpi_than_mpi4pys_is_named():
    ompi, hydra = Mpiexec("/x/mpiexec", OPEN_MPI, "5.0.11"), Mpiexec("/y/mpiexec", MPICH, "5.0.2")
    ompi_lib, mpich_lib = "Open MPI v5.0.11, package: Open MPI", "MPICH Version:      5.0.2"
    assert mpiexec.mismatch(ompi, ompi_lib) is None and mpiexec.mismatch(hydra, mpich_lib) is None
    why = mpiexec.mismatch(hydra, ompi_lib)
    assert "is MPICH 5.0.2's, but mpi4py" in why and "loads Open MPI v5.0.11" in why
    assert "is Open MPI 5.0.11's" in mpiexec.mismatch(ompi, mpich_lib)


def test_msrun_names_open_mpis_root_guard_before_starting(monkeypatch, tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    monkeypatch.setattr(mpiexec, "find", lambda path=None: Mpiexec("/x/mpiexec", OPEN_MPI, "5.0.11"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    for name in mpiexec.ROOT_VARS:
        monkeypatch.delenv(name, raising=False)
    logs = tmp_path / "logs"
    assert main(["msrun", "--worker_num=2", "--local_worker_num=2", f"--log_dir={logs}", str(script)]) == 2
    err = capsys.readouterr().err
    assert "refuses to run as root" in err and "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in err
    assert not logs.exists(), "nothing is started or written"


_INIT = "from graphkernel.communication import init, get_group_size\ninit()\nprint('size', get_group_size())\n"


def test_init_refuses_a_launcher_of_another_mpi():
    """The other MPI's launcher variables without its launcher, as a launcher of the wrong MPI leaves them:
    MPI initializes a world of one; init() must say so instead of training alone."""
    need_mpi()
    others = {OPEN_MPI: {"PMI_RANK": "0", "PMI_SIZE": "2"}, MPICH: {"OMPI_COMM_WORLD_RANK": "0",
                                                                     "OMPI_COMM_WORLD_SIZE": "2"}}
    library = mpiexec.mpi4py_library(sys.executable)
    fake = others.get(mpiexec.library_mpi(library), others[OPEN_MPI])
    env = dict(without_launcher(), **fake)
    done = subprocess.run([sys.executable, "-c", _INIT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    name = next(k for k in fake if k.endswith("SIZE"))
    assert done.returncode != 0 and "size 1" not in done.stdout, done.stdout + done.stderr
    assert f"{name}=2) started 2 ranks, but the MPI library mpi4py loaded" in done.stderr, done.stderr
    assert "sees a world of 1" in done.stderr and "rank 0 of 2 raised CommunicationError" in done.stderr


def test_the_installed_launcher_is_identified():
    need_mpi()
    found = installed()
    assert found.mpi in (MPICH, OPEN_MPI) and found.version, found
