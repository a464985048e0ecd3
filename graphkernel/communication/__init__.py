"""MindSpore's `mindspore.communication`: init, get_rank, get_group_size, groups (management.py), on MPI
when an MPI launcher started the process (engine.py, launcher.py), a group of one otherwise.

A process an MPI launcher started as one of several gets, on import, the excepthook that ends the whole
job when it raises (faults.py)."""
from graphkernel.communication import faults, launcher, management
from graphkernel.communication.management import (
    HCCL_WORLD_COMM_GROUP, MCCL_WORLD_COMM_GROUP, NCCL_WORLD_COMM_GROUP, CollectiveTimeoutError, CommunicationError,
    GlobalComm, create_group, destroy_group, get_group_rank_from_world_rank, get_group_size, get_local_rank,
    get_local_rank_size, get_process_group_ranks, get_rank, get_world_rank_from_group_rank, init, release,
    set_comm_timeout)

if launcher.launched() and (launcher.env_size() or 1) > 1:
    faults.install(launcher.env_rank(), launcher.env_size())

__all__ = ["management", "init", "release", "get_rank", "get_group_size", "get_local_rank", "get_local_rank_size",
           "get_world_rank_from_group_rank", "get_group_rank_from_world_rank", "get_process_group_ranks",
           "create_group", "destroy_group", "set_comm_timeout", "GlobalComm", "HCCL_WORLD_COMM_GROUP",
           "NCCL_WORLD_COMM_GROUP", "MCCL_WORLD_COMM_GROUP", "CommunicationError", "CollectiveTimeoutError"]
