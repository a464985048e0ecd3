"""MindSpore's auto-parallel context, stand-alone: `context.ParallelMode`,
`context.set_auto_parallel_context(...)`, `get_auto_parallel_context(key)`,
`reset_auto_parallel_context()`.

graphkernel runs one device in one process: parallel_mode is ParallelMode.STAND_ALONE and device_num 1,
so the train cells' `reducer_flag` is False and their gradient reducer the identity. The other modes
are refused by name (multi-process data parallelism will plug in here); the settings a single device
can hold (gradients_mean, all_reduce_fusion_config, ...) are kept and read back.
"""
from __future__ import annotations

import difflib

from ir.errors import GraphKernelError


class ParallelContextError(GraphKernelError, ValueError):
    """An unknown auto-parallel key, or a value a single device cannot take."""


class ParallelMode:
    """MindSpore's parallel modes (strings, as there)."""
    STAND_ALONE = "stand_alone"
    DATA_PARALLEL = "data_parallel"
    HYBRID_PARALLEL = "hybrid_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"
    MODE_LIST = [STAND_ALONE, DATA_PARALLEL, HYBRID_PARALLEL, SEMI_AUTO_PARALLEL, AUTO_PARALLEL]


def _parallel_mode(v):
    if v not in ParallelMode.MODE_LIST:
        raise ParallelContextError(f"parallel_mode {v!r}; accepted: {', '.join(ParallelMode.MODE_LIST)}")
    if v != ParallelMode.STAND_ALONE:
        raise ParallelContextError(f"parallel_mode {v!r}: graphkernel runs one device in one process; only "
                                   f"{ParallelMode.STAND_ALONE!r} is supported")
    return v


def _one(v):
    if isinstance(v, bool) or not isinstance(v, int) or v != 1:
        raise ParallelContextError(f"device_num {v!r}: graphkernel runs one device; only 1 is supported")
    return v


def _rank(v):
    if isinstance(v, bool) or not isinstance(v, int) or v != 0:
        raise ParallelContextError(f"global_rank {v!r}: graphkernel runs one device; only 0 is supported")
    return v


def _bool(v):
    if not isinstance(v, bool):
        raise ParallelContextError(f"got {v!r}; accepted: True or False")
    return v


def _int_list(v):
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise ParallelContextError(f"got {v!r}; accepted: a list of ints")
    return list(v)


def _any(v):
    return v


KEYS = {
    "parallel_mode": (ParallelMode.STAND_ALONE, _parallel_mode),
    "device_num": (1, _one),
    "global_rank": (0, _rank),
    "gradients_mean": (False, _bool),
    "gradient_fp32_sync": (True, _bool),
    "all_reduce_fusion_config": ([], _int_list),
    "enable_parallel_optimizer": (False, _bool),
    "parameter_broadcast": (False, _bool),
    "full_batch": (False, _bool),
    "search_mode": ("dynamic_programming", _any),
    "pipeline_stages": (1, _any),
}

_settings = {k: default for k, (default, _) in KEYS.items()}


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
        staged[key] = KEYS[key][1](value)
    _settings.update(staged)


def get_auto_parallel_context(key: str):
    if key not in KEYS:
        raise _unknown(key)
    return _settings[key]


def reset_auto_parallel_context() -> None:
    _settings.update({k: default for k, (default, _) in KEYS.items()})


__all__ = ["ParallelMode", "ParallelContextError", "set_auto_parallel_context", "get_auto_parallel_context",
           "reset_auto_parallel_context"]
