"""Turn kernel source into a compiled numba dispatcher, two ways:

    in memory   exec(compile(source, "<graphkernel:NAME>", "exec"), explicit globals), then njit
    from a file import the module written under the cache dir, then njit(cache=True): numba keeps
                the machine code next to it (`__pycache__/*.nbi|.nbc`) and a second process loads it
                (numba cannot cache exec'd code: it needs a real source file)

Kernels are compiled eagerly for their one signature (flat C arrays of the buffers' dtypes, int64
sizes) and then closed to new signatures, so a wrong call is a clear TypeError, not a recompile.
No fast-math: numba's default keeps every float32 rounding, so fused and unfused kernels agree.
"""
from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
from numba import njit, prange, types

from ir.dtypes import DType
from kernels.emitters import math_functions

_NUMBA_DTYPE = {DType.float16: types.uint16, DType.float32: types.float32, DType.float64: types.float64,
                DType.int32: types.int32, DType.int64: types.int64, DType.bool: types.boolean}


def signature(buffer_dtypes, num_ints: int) -> tuple:
    """Argument types of a kernel: flat C-contiguous arrays, then int64 sizes/block_dim/tile."""
    return tuple(types.Array(_NUMBA_DTYPE[d], 1, "C") for d in buffer_dtypes) + (types.int64,) * num_ints


def _options(parallel: bool, cache: bool) -> dict:
    return dict(parallel=parallel, error_model="numpy", cache=cache, nogil=True)


def kernel_globals() -> dict:
    """The explicit globals of an exec'd kernel: what its source names, nothing else."""
    return {"math": math, "np": np, "prange": prange, **math_functions()}


def from_source(name: str, source: str, parallel: bool):
    """An njit dispatcher of `name` defined by `source`, without touching the disk."""
    namespace = kernel_globals()
    exec(compile(source, f"<graphkernel:{name}>", "exec"), namespace)
    return njit(**_options(parallel, cache=False))(namespace[name])


def from_file(name: str, path: str, parallel: bool):
    """An njit(cache=True) dispatcher of `name` from the module file at `path`."""
    modname = f"graphkernel_kernel_{name}"
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules.setdefault(modname, module)
    return njit(**_options(parallel, cache=True))(getattr(module, name))


def compile_for(dispatcher, sig: tuple):
    """Compile the one signature now and close the dispatcher; returns whether numba's disk cache
    supplied it."""
    hits_before = sum(dispatcher.stats.cache_hits.values())
    dispatcher.compile(sig)
    dispatcher.disable_compile()
    return sum(dispatcher.stats.cache_hits.values()) > hits_before
