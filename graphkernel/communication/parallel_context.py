"""MindSpore's auto-parallel context: `context.ParallelMode`, `context.set_auto_parallel_context(...)`,
`get_auto_parallel_context(key)`, `reset_auto_parallel_context()` (also `graphkernel.set_auto_parallel_context`
and `graphkernel.ParallelMode`, as MindSpore 2.x exports them).

    parallel_mode      STAND_ALONE (default) or DATA_PARALLEL: each rank computes on its share of the batch
                       and the train cells reduce the gradients (nn.DistributedGradReducer). The other
                       modes (SEMI_AUTO_PARALLEL, AUTO_PARALLEL, HYBRID_PARALLEL: operator sharding) are
                       refused by name.
    gradients_mean     the reducer divides the summed gradients by the group size
    device_num         the data-parallel group's size: once init() ran, it must equal get_group_size()
    global_rank        this process's rank: once init() ran, it must equal get_rank()
    all_reduce_fusion_config
                       Parameter indices where the reducer's buckets split ([20, 35]: Parameters 0-19,
                       20-34, 35-...); empty: buckets of about 25 MB (nn/wrap/grad_reducer.py)
    parameter_broadcast
                       the train cells send rank 0's Parameters to every rank when they are built
    gradient_fp32_sync the buckets reduce in float32 (a float16 gradient is widened; always so here)

The other keys MindSpore has (full_batch, enable_parallel_optimizer, ...) are kept and read back.
"""
from __future__ import annotations

import difflib

from ir.errors import GraphKernelError
from graphkernel.communication.management import GlobalComm, get_group_size, get_rank


class ParallelContextError(GraphKernelError, ValueError):
    """An unknown auto-parallel key, or a value the data-parallel group cannot take."""


class ParallelMode:
    """MindSpore's parallel modes (strings, as there)."""
    STAND_ALONE = "stand_alone"
    DATA_PARALLEL = "data_parallel"
    HYBRID_PARALLEL = "hybrid_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"
    MODE_LIST = [STAND_ALONE, DATA_PARALLEL, HYBRID_PARALLEL, SEMI_AUTO_PARALLEL, AUTO_PARALLEL]


SUPPORTED_MODES = (ParallelMode.STAND_ALONE, ParallelMode.DATA_PARALLEL)


def _parallel_mode(v):
    if v not in ParallelMode.MODE_LIST:
        raise ParallelContextError(f"parallel_mode {v!r}; accepted: {', '.join(ParallelMode.MODE_LIST)}")
    if v not in SUPPORTED_MODES:
        raise ParallelContextError(f"parallel_mode {v!r}: graphkernel trains data-parallel only (each rank holds "
                                   f"every Parameter); supported: {', '.join(map(repr, SUPPORTED_MODES))}. "
                                   f"{v!r} shards operators across devices, which is not built")
    return v


def _positive_int(key):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ParallelContextError(f"{key} {v!r}: expected a positive int")
        return v
    return check


def _device_num(v):
    _positive_int("device_num")(v)
    if GlobalComm.INITED and v != get_group_size():
        raise ParallelContextError(f"device_num {v}: the data-parallel group has {get_group_size()} rank(s) "
                                   "(get_group_size()); launch that many processes or set device_num to it")
    return v


def _rank(v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ParallelContextError(f"global_rank {v!r}: expected a non-negative int")
    if GlobalComm.INITED and v != get_rank():
        raise ParallelContextError(f"global_rank {v}: this process is rank {get_rank()} (get_rank())")
    return v


def _bool(v):
    if not isinstance(v, bool):
        raise ParallelContextError(f"got {v!r}; accepted: True or False")
    return v


def _int_list(v):
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise ParallelContextError(f"got {v!r}; accepted: a list of ints")
    return list(v)


def _split_indices(v):
    v = _int_list(v)
    if not v:
        raise ParallelContextError("all_reduce_fusion_config: the split indices can not be empty (MindSpore's "
                                   "rule; reset_auto_parallel_context() goes back to buckets by size)")
    if any(x < 0 for x in v) or any(b <= a for a, b in zip(v, v[1:])):
        raise ParallelContextError(f"all_reduce_fusion_config {v}: Parameter indices, increasing and non-negative")
    return v


def _any(v):
    return v


KEYS = {
    "parallel_mode": (ParallelMode.STAND_ALONE, _parallel_mode),
    "device_num": (1, _device_num),
    "global_rank": (0, _rank),
    "gradients_mean": (False, _bool),
    "gradient_fp32_sync": (True, _bool),
    "all_reduce_fusion_config": ([], _split_indices),
    "enable_parallel_optimizer": (False, _bool),
    "parameter_broadcast": (False, _bool),
    "full_batch": (False, _bool),
    "search_mode": ("dynamic_programming", _any),
    "pipeline_stages": (1, _any),
}

_settings = {k: default for k, (default, _) in KEYS.items()}
_explicit: set = set()    # keys set since the last reset
_DERIVED = {"device_num": get_group_size, "global_rank": get_rank}


def _unknown(key: str) -> ParallelContextError:
    near = difflib.get_close_matches(key, KEYS, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return ParallelContextError(f"unknown auto-parallel context key {key!r}{hint}; accepted: {', '.join(KEYS)}")


def set_auto_parallel_context(**kwargs) -> None:
    """Check every key, then set them all (a bad one changes nothing)."""
    staged = {}
    for key, value in kwargs.items():
        if key not in KEYS:
            raise _unknown(key)
        try:
            staged[key] = KEYS[key][1](value)
        except ParallelContextError as e:
            raise ParallelContextError(f"set_auto_parallel_context: {e}" if str(e).startswith(key) else
                                       f"set_auto_parallel_context: {key}: {e}") from None
    _settings.update(staged)
    _explicit.update(staged)


def get_auto_parallel_context(key: str):
    """The value set; device_num and global_rank, unset, follow the group once init() ran (as MindSpore's)."""
    if key not in KEYS:
        raise _unknown(key)
    if key in _DERIVED and key not in _explicit and GlobalComm.INITED:
        return _DERIVED[key]()
    return _settings[key]


def reset_auto_parallel_context() -> None:
    _settings.update({k: default for k, (default, _) in KEYS.items()})
    _explicit.clear()


__all__ = ["ParallelMode", "ParallelContextError", "set_auto_parallel_context", "get_auto_parallel_context",
           "reset_auto_parallel_context"]
