"""What the launcher tells a process, and the cores its rank may use.

    launched()          whether an MPI launcher started this process as one of several or as a job of
                        its own: MPICH's Hydra (mpiexec, mpirun) sets PMI_RANK and PMI_SIZE, Open MPI's
                        mpirun OMPI_COMM_WORLD_RANK/SIZE (and PMIX_RANK), Slurm's srun with PMI/PMIx the same
    env_rank(), env_size()
                        the rank and size the launcher announces (before MPI is initialized)
    share_cores(local_size)
                        N ranks on one machine split the cores this process may run on (its affinity
                        and cgroup quota, kernels.threads.allowed_cores): each gets max(1, cores // N)
                        threads for graphkernel's pool (kernels.threads.set_num_threads: kernel launches
                        and the GEMMs of a program) and for BLAS outside a program (the reference's
                        MatMuls; threadpoolctl). A variable the user set (NUMBA_NUM_THREADS,
                        OPENBLAS_NUM_THREADS, OMP_NUM_THREADS) is left alone. `graphkernel msrun` sets the
                        same variables for each rank before it starts.

No MPI is imported here: a process no launcher started stays a group of one without touching MPI.
"""
from __future__ import annotations

import os

from kernels import threads

RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")
LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")
THREAD_VARS = ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


def _first_int(names) -> int | None:
    for name in names:
        text = os.environ.get(name)
        if text is not None and text.strip().isdigit():
            return int(text)
    return None


def launched() -> bool:
    return _first_int(RANK_VARS) is not None


def env_rank() -> int | None:
    return _first_int(RANK_VARS)


def env_size() -> int | None:
    return _first_int(SIZE_VARS)


def env_local_size() -> int | None:
    return _first_int(LOCAL_SIZE_VARS)



def threads_per_rank(local_size: int, cores: int | None = None) -> int:
    """A rank's share of the machine's cores when `local_size` ranks run on it."""
    cores = threads.allowed_cores() if cores is None else cores
    return max(1, cores // max(1, local_size))


def share_cores(local_size: int) -> dict:
    """Give this rank its share of the cores (the module docstring); what was set, by what."""
    if local_size <= 1:
        return {}
    n = threads_per_rank(local_size)
    done = {}
    if "NUMBA_NUM_THREADS" not in os.environ:
        threads.set_num_threads(n)
        done["threads"] = threads.pool_threads()
    if "OPENBLAS_NUM_THREADS" not in os.environ and "OMP_NUM_THREADS" not in os.environ:
        threads.set_blas_threads(n)
        done["blas"] = n
    return done


def rank_environment(local_size: int, cores: int | None = None) -> dict[str, str]:
    """The thread variables a launcher sets for each of `local_size` ranks on this machine (unset ones)."""
    n = str(threads_per_rank(local_size, cores))
    return {name: n for name in THREAD_VARS if name not in os.environ}
