"""MindSpore's `mindspore.communication.management` for a one-device run.

    init()              starts the communication group: here one process, one device (rank 0 of 1)
    get_group_size()    1 after init(); before it, an error naming init (as MindSpore raises)
    get_rank()          0 after init(); before it, the same error
    release()           ends it

Multi-process data parallelism will plug in here; until then a script that calls `init()` runs as
the single member of its group.
"""
from __future__ import annotations

from ir.errors import GraphKernelError

HCCL_WORLD_COMM_GROUP = "hccl_world_group"
NCCL_WORLD_COMM_GROUP = "nccl_world_group"
_BACKENDS = ("hccl", "nccl", "mccl", None)


class CommunicationError(GraphKernelError, RuntimeError):
    """A communication query before init(), or an unknown backend or group."""


class GlobalComm:
    """The state of the communication group (MindSpore's name)."""
    BACKEND = None
    WORLD_COMM_GROUP = HCCL_WORLD_COMM_GROUP
    INITED = False


def init(backend_name=None) -> None:
    if backend_name not in _BACKENDS:
        raise CommunicationError(f"init: backend_name {backend_name!r}; accepted: 'hccl', 'nccl', 'mccl' or None")
    GlobalComm.BACKEND = backend_name or "hccl"
    GlobalComm.WORLD_COMM_GROUP = NCCL_WORLD_COMM_GROUP if backend_name == "nccl" else HCCL_WORLD_COMM_GROUP
    GlobalComm.INITED = True


def release() -> None:
    GlobalComm.INITED = False


def _check(what: str, group) -> None:
    if not GlobalComm.INITED:
        raise CommunicationError(f"{what}: the communication service is not initialized; call "
                                 "mindspore.communication.management.init() (graphkernel.communication"
                                 ".management.init()) first")
    if group is not None and group not in (HCCL_WORLD_COMM_GROUP, NCCL_WORLD_COMM_GROUP):
        raise CommunicationError(f"{what}: unknown group {group!r}; a one-device run has only the world group")


def get_group_size(group=None) -> int:
    _check("get_group_size", group)
    return 1


def get_rank(group=None) -> int:
    _check("get_rank", group)
    return 0


def get_local_rank(group=None) -> int:
    _check("get_local_rank", group)
    return 0


def get_local_rank_size(group=None) -> int:
    _check("get_local_rank_size", group)
    return 1


__all__ = ["init", "release", "get_rank", "get_group_size", "get_local_rank", "get_local_rank_size",
           "GlobalComm", "HCCL_WORLD_COMM_GROUP", "NCCL_WORLD_COMM_GROUP", "CommunicationError"]
