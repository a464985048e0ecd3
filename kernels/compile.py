"""Turn kernel source into a compiled numba dispatcher, two ways:

    in memory   exec(compile(source, "<graphkernel:NAME>", "exec"), explicit globals), then njit
    from a file the same source compiled with the path of its copy under the cache dir as file name,
                then njit with numba's disk cache pointed at `<cache dir>/__pycache__`
                (`*.nbi|.nbc`): a second process loads the machine code from there (numba cannot
                cache exec'd code: it needs a real source file to stamp)

The file route never imports the file: it compiles the source text the caller rendered (and checked
the file against), so neither a changed `.py` nor a `.pyc` on disk is ever run. numba's files go to
`<cache dir>/__pycache__` and nowhere else: our own locator takes no notice of NUMBA_CACHE_DIR, and
a dispatcher whose cache would live elsewhere (NUMBA_CACHE_LOCATOR_CLASSES) raises
CacheLocationError instead of writing there.

Kernels are compiled eagerly for their one signature (flat C arrays of the buffers' dtypes, int64
sizes) and then closed to new signatures, so a wrong call is a clear TypeError, not a recompile.
No fast-math: numba's default keeps every float32 rounding, so fused and unfused kernels agree.
"""
from __future__ import annotations

import gc
import hashlib
import math
import os
import sys
import types as pytypes
from contextlib import contextmanager

import numpy as np
from numba import njit, types
from numba.core.caching import CompileResultCacheImpl, FunctionCache

from ir.dtypes import DType
from kernels.emitters import kernel_functions
from kernels.layout import const_value

# a half float's buffer holds its uint16 bits, a sub-byte integer's its bytes (kernels/emitters.py converts them)
_NUMBA_DTYPE = {DType.float16: types.uint16, DType.bfloat16: types.uint16, DType.float32: types.float32,
                DType.float64: types.float64, DType.int8: types.int8, DType.int16: types.int16,
                DType.int32: types.int32, DType.int64: types.int64, DType.uint8: types.uint8,
                DType.uint16: types.uint16, DType.uint32: types.uint32, DType.uint64: types.uint64,
                DType.int4: types.uint8, DType.uint4: types.uint8, DType.int2: types.uint8, DType.uint2: types.uint8,
                DType.float4_e2m1fn: types.uint8, DType.bool: types.boolean}


class CacheLocationError(RuntimeError):
    """numba would keep a kernel's cache files outside the kernel cache directory."""


def signature(buffer_dtypes, num_sizes: int, num_scalars: int = 0, fold: bool = False) -> tuple:
    """Argument types of a kernel: flat C-contiguous arrays, int64 sizes, float64 scalar constants,
    then int64 block_dim, tile, width, the range of blocks (and a split kernel's fold flag)."""
    return (tuple(types.Array(_NUMBA_DTYPE[d], 1, "C") for d in buffer_dtypes) + (types.int64,) * num_sizes
            + (types.float64,) * num_scalars + (types.int64,) * (5 + fold))


def multi_tensor_signature(mspec) -> tuple:
    """Argument types of a multi-tensor kernel (kernels/multi_tensor.py): per buffer one flat C array, or
    a tuple of one per tensor; the int64 counts; the float64 constants; block_dim, tile, width and the
    range of blocks."""
    spec, aliased = mspec.spec, mspec.spec.aliased
    arrays = [(d, not shared) for (d, _), shared in zip(spec.inputs, mspec.shared)]
    arrays += [(d, True) for k, (d, _) in enumerate(spec.outputs) if k not in aliased]
    out = []
    for dtype, per_tensor in arrays:
        array = types.Array(_NUMBA_DTYPE[dtype], 1, "C")
        out.append(types.UniTuple(array, mspec.tensors) if per_tensor else array)
    scalars = sum(const_value(node) is None for node in spec.nodes if node.op == "Const")
    return tuple(out) + (types.Array(types.int64, 1, "C"),) + (types.float64,) * scalars + (types.int64,) * 5


# Kernels are sequential functions over a range of blocks; kernels.threads runs a launch's blocks on
# its threads, a chunk per call, while the kernel holds no GIL. They are called from Python only: no C
# callback wrapper (numba lowers and optimizes one per function unless told not to: work of a cold
# build that nothing uses, docs/kernels.md "The first step").
OPTIONS = dict(error_model="numpy", cache=False, nogil=True, no_cfunc_wrapper=True)


def kernel_globals() -> dict:
    """The explicit globals of an exec'd kernel: what its source names, nothing else."""
    return {"math": math, "np": np, **kernel_functions()}


def from_source(name: str, source: str):
    """An njit dispatcher of `name` defined by `source`, without touching the disk."""
    namespace = kernel_globals()
    exec(compile(source, f"<graphkernel:{name}>", "exec"), namespace)
    return njit(**OPTIONS)(namespace[name])


class _KernelFileLocator:
    """Where numba keeps the cache of a kernel defined in `<cache dir>/<name>.py`:
    `<cache dir>/__pycache__`, stamped with the sha256 of the file, as numba's in-tree locator does
    (the methods are the ones numba's CacheImpl calls on a locator)."""

    def __init__(self, py_func, py_file: str):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(os.path.dirname(py_file), "__pycache__")

    @classmethod
    def from_function(cls, py_func, py_file: str):
        return cls(py_func, py_file)

    def ensure_cache_path(self) -> None:
        os.makedirs(self._cache_path, mode=0o700, exist_ok=True)

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> bytes:
        with open(self._py_file, "rb") as f:
            return hashlib.sha256(f.read()).digest()

    def get_disambiguator(self) -> str:
        return str(self._lineno)


class _KernelCacheImpl(CompileResultCacheImpl):
    _locator_classes = [_KernelFileLocator]


class _KernelFunctionCache(FunctionCache):
    _impl_class = _KernelCacheImpl


def from_file(name: str, path: str, source: str):
    """An njit dispatcher of `name` from `source`, whose copy is the file at `path`, with numba's disk
    cache in `__pycache__` beside it. The module is registered in sys.modules because numba's cached
    code looks its module up by name when it is loaded."""
    modname = f"graphkernel_kernel_{name}"
    module = pytypes.ModuleType(modname)
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)
    sys.modules[modname] = module
    py_func = getattr(module, name)
    dispatcher = njit(**OPTIONS)(py_func)
    disk_cache = _KernelFunctionCache(py_func)
    wanted = os.path.join(os.path.dirname(path), "__pycache__")
    if os.path.abspath(disk_cache.cache_path) != os.path.abspath(wanted):
        raise CacheLocationError(f"numba would cache kernel {name} in {disk_cache.cache_path!r}, "
                                 f"not in {wanted!r} (is NUMBA_CACHE_LOCATOR_CLASSES set?)")
    dispatcher._cache = disk_cache  # what njit(cache=True) sets, with our locator
    return dispatcher


def compile_for(dispatcher, sig: tuple):
    """Compile the one signature now and close the dispatcher; returns whether numba's disk cache
    supplied it."""
    hits_before = sum(dispatcher.stats.cache_hits.values())
    with _no_cyclic_gc():
        dispatcher.compile(sig)
    dispatcher.disable_compile()
    return sum(dispatcher.stats.cache_hits.values()) > hits_before


@contextmanager
def _no_cyclic_gc():
    """Python's cyclic collector off during a build: numba's compile makes objects by the hundred
    thousand, and every collection it triggers walks the whole heap of the process (the user's arrays
    and graphs too): 9% of the build time of three kernel test files on one worker. The cycles it
    leaves are collected at the next collection after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
