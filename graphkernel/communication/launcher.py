"""What the launcher tells a process, and the cores its rank may use.

    announced(environ)  the rank, size, local rank and local size an MPI launcher put in the environment
                        (before MPI is initialized), all read from one launcher's variables (FAMILIES):
                            MPICH's Hydra (mpiexec, mpirun; Intel MPI's too)
                                          PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
                            Open MPI's mpirun/mpiexec (PRRTE)
                                          OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
                            a PMIx launcher alone (Slurm's srun --mpi=pmix)
                                          PMIX_RANK (no size: MPI tells it at init)
                        None when no launcher started this process
    launched(), env_rank(), env_size(), env_local_rank(), env_local_size()
                        the same, one at a time, from os.environ
    without_launcher(environ)
                        an environment with every variable a launcher sets removed (what a job started
                        from inside a rank, or a test run under a launcher, must not inherit)
    rank_threads(cpu_sets, me, quota)
                        the threads of rank `me` among the ranks of one machine, from each rank's CPU
                        affinity (below)
    share_cores(cpu_sets, me)
                        gives this rank that many threads for graphkernel's pool (kernels.threads: kernel
                        launches and the GEMMs of a program) and for BLAS outside a program (the
                        reference's MatMuls; threadpoolctl). A variable the user set (NUMBA_NUM_THREADS,
                        OPENBLAS_NUM_THREADS, OMP_NUM_THREADS) is left alone. `graphkernel msrun` sets the
                        same variables for each rank before it starts (rank_environment).

Cores. The ranks on one machine tell each other their affinity (engine.py). A rank shares its cores with
the ranks whose affinity overlaps its own: MPICH's Hydra binds nothing by default, so every rank has
every core and N ranks take cores // N threads each; Open MPI binds each rank to a core of its own (to a
package past two ranks), or to k cores with `--map-by slot:PE=k`, and then a rank takes all of its own
cores. The cgroup's CPU quota, which the ranks of a machine share, caps each at quota // N.

No MPI is imported here: a process no launcher started stays a group of one without touching MPI.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from kernels import threads

# (launcher, rank, size, local rank, local size): the variables each launcher sets in a rank's environment,
# checked in this order; a launcher's rank variable present means that launcher started the process
FAMILIES = (
    ("MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMIx", "PMIX_RANK", None, None, None),
)
# what a launcher sets in a rank's environment besides those (Hydra 5, Open MPI 5's PRRTE, seen here);
# the user's own Open MPI settings (OMPI_MCA_btl, OMPI_ALLOW_RUN_AS_ROOT, ...) are not among them
LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "PRTE_", "HYDI_", "OMPI_COMM_WORLD_", "OMPI_WORLD_")
LAUNCHER_NAMES = ("MPI_LOCALRANKID", "MPI_LOCALNRANKS", "OMPI_UNIVERSE_SIZE", "OMPI_COMMAND", "OMPI_ARGV",
                  "OMPI_FILE_LOCATION", "OMPI_NUM_APP_CTX", "OMPI_TOOL_NAME", "OMPI_FIRST_RANKS",
                  "OMPI_APP_CTX_NUM_PROCS", "OMPI_MCA_initial_wdir", "OMPI_MCA_num_procs", "OMPI_MCA_cpu_type",
                  "OMPI_MCA_PREFIXES", "OPAL_USER_PARAMS_GIVEN", "GFORTRAN_UNBUFFERED_PRECONNECTED")
THREAD_VARS = ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


@dataclass(frozen=True)
class Announced:
    """What one launcher told this process (None: that launcher does not say)."""
    launcher: str
    size_name: str | None         # the variable the size was read from
    rank: int
    size: int | None
    local_rank: int | None
    local_size: int | None


def _int(environ, name) -> int | None:
    text = environ.get(name) if name else None
    return int(text) if text is not None and text.strip().isdigit() else None


def announced(environ=None) -> Announced | None:
    environ = os.environ if environ is None else environ
    for launcher, *names in FAMILIES:
        rank, size, local_rank, local_size = (_int(environ, name) for name in names)
        if rank is not None:
            return Announced(launcher, names[1], rank, size, local_rank, local_size)
    return None


def launched() -> bool:
    return announced() is not None


def env_rank() -> int | None:
    seen = announced()
    return None if seen is None else seen.rank


def env_size() -> int | None:
    seen = announced()
    return None if seen is None else seen.size


def env_local_rank() -> int | None:
    seen = announced()
    return None if seen is None else seen.local_rank


def env_local_size() -> int | None:
    seen = announced()
    return None if seen is None else seen.local_size


def without_launcher(environ=None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_NAMES}


def threads_per_rank(local_size: int, cores: int | None = None) -> int:
    """A rank's share of the machine's cores when `local_size` ranks run on it, all on every core."""
    cores = threads.allowed_cores() if cores is None else cores
    return max(1, cores // max(1, local_size))


def rank_threads(cpu_sets, me: int, quota: float | None = None) -> int:
    """Threads for rank `me` of the ranks on one machine, whose CPU affinities are `cpu_sets`: its own
    cores divided among the ranks that share any of them (itself included), and no more than its part
    of the CPU quota (cores) the ranks share."""
    mine = set(cpu_sets[me])
    sharing = sum(1 for cpus in cpu_sets if mine & set(cpus))
    n = len(mine) // max(1, sharing)
    if quota is not None:
        n = min(n, int(quota) // len(cpu_sets))
    return max(1, n)


def share_cores(cpu_sets, me: int) -> dict:
    """Give this rank its threads (the module docstring); what was set, by what."""
    if len(cpu_sets) <= 1:
        return {}
    n = rank_threads(cpu_sets, me, threads.cpu_quota())
    done = {}
    if "NUMBA_NUM_THREADS" not in os.environ:
        threads.set_num_threads(n)
        done["threads"] = threads.pool_threads()
    if "OPENBLAS_NUM_THREADS" not in os.environ and "OMP_NUM_THREADS" not in os.environ:
        threads.set_blas_threads(n)
        done["blas"] = n
    return done


def rank_environment(local_size: int, cores: int | None = None) -> dict[str, str]:
    """The thread variables a launcher sets for each of `local_size` ranks on this machine (unset ones),
    when it starts them all on every core (graphkernel msrun)."""
    n = str(threads_per_rank(local_size, cores))
    return {name: n for name in THREAD_VARS if name not in os.environ}
