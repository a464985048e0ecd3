"""MindSpore's `mindspore.communication`: `management` (init, get_rank, get_group_size) for one device."""
from graphkernel.communication import management
from graphkernel.communication.management import (GlobalComm, HCCL_WORLD_COMM_GROUP, NCCL_WORLD_COMM_GROUP,
                                                  CommunicationError, get_group_size, get_local_rank,
                                                  get_local_rank_size, get_rank, init, release)

__all__ = ["management", "init", "release", "get_rank", "get_group_size", "get_local_rank", "get_local_rank_size",
           "GlobalComm", "HCCL_WORLD_COMM_GROUP", "NCCL_WORLD_COMM_GROUP", "CommunicationError"]
