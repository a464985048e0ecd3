"""The kernel cache: in memory for the process, on disk across processes.

    key   the kernel name: its ops and a hash of its source, which the KernelSpec (ops and attrs,
            dtypes, collapsed rank and broadcast pattern, reduce axes) and the variant (elementwise,
            rows or split; sequential or parallel) determine; no sizes (kernels are shape-generic)
    mode  "enable"  memory, then disk, then build (and store)
          "disable" memory only (exec'd source, nothing written)
          "force"   build anew and overwrite the disk entry
    disk  <cache_dir>/<kernel name>.py, the rendered source; numba keeps the machine code beside it
          in __pycache__. An entry whose text is not the expected source, or whose numba files do not
          load, is rebuilt with a CacheWarning; a directory that cannot be written falls back to
          memory with a CacheWarning.

STATS counts what each request cost, so tests can tell "a second process took kernels from disk":
"compiled" (numba built it), "disk" (numba's cache supplied it), "memory" (already in this process),
"rebuilt" (a corrupt or stale entry was replaced).
"""
from __future__ import annotations

import glob
import os
import tempfile
import threading
import warnings
from collections import Counter

from kernels import compile as kc

STATS: Counter = Counter()
_MEMORY: dict = {}
_LOCK = threading.RLock()
_DIR_OK: dict[str, bool] = {}


class CacheWarning(RuntimeWarning):
    """The kernel disk cache could not be used as asked; the run goes on."""


def default_cache_dir() -> str:
    return os.environ.get("GRAPHKERNEL_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "graphkernel")


def usable_dir(path: str) -> str | None:
    """`path` when kernels can be written there, else None (warned once per directory)."""
    if path not in _DIR_OK:
        try:
            os.makedirs(path, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
                pass
            _DIR_OK[path] = True
        except OSError as e:
            _DIR_OK[path] = False
            warnings.warn(f"kernel cache directory {path!r} cannot be written ({e}); "
                          "kernels are kept in memory only", CacheWarning, stacklevel=3)
    return path if _DIR_OK[path] else None


def _write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".py")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _purge_numba_files(directory: str, name: str) -> None:
    for f in glob.glob(os.path.join(directory, "__pycache__", f"{name}.*")):
        try:
            os.remove(f)
        except OSError:
            pass


def _from_disk(name: str, source: str, parallel: bool, sig: tuple, directory: str, force: bool):
    path = os.path.join(directory, f"{name}.py")
    try:
        with open(path) as f:
            stored = f.read()
    except (OSError, UnicodeDecodeError):
        stored = None
    if force or stored != source:
        if stored is not None and not force:
            warnings.warn(f"kernel cache entry {path} is corrupt or stale; rebuilt", CacheWarning,
                          stacklevel=4)
            STATS["rebuilt"] += 1
        _purge_numba_files(directory, name)
        _write_atomic(path, source)
    try:
        dispatcher = kc.from_file(name, path, parallel)
        from_cache = kc.compile_for(dispatcher, sig)
    except Exception as first:  # numba's files unreadable: drop them and build once more
        _purge_numba_files(directory, name)
        dispatcher = kc.from_file(name, path, parallel)
        from_cache = kc.compile_for(dispatcher, sig)  # a real build error propagates from here
        warnings.warn(f"kernel cache entry {name} did not load ({type(first).__name__}: {first}); "
                      "rebuilt", CacheWarning, stacklevel=4)
        STATS["rebuilt"] += 1
    return dispatcher, from_cache


def get_kernel(key: str, name: str, source: str, parallel: bool, sig: tuple, mode: str = "enable",
               cache_dir: str | None = None):
    """The compiled dispatcher for `key`, from memory, disk or a fresh build."""
    with _LOCK:
        if mode != "force" and key in _MEMORY:
            STATS["memory"] += 1
            return _MEMORY[key]
        directory = usable_dir(cache_dir or default_cache_dir()) if mode != "disable" else None
        if directory is None:
            dispatcher = kc.from_source(name, source, parallel)
            kc.compile_for(dispatcher, sig)
            from_cache = False
        else:
            dispatcher, from_cache = _from_disk(name, source, parallel, sig, directory, mode == "force")
        STATS["disk" if from_cache else "compiled"] += 1
        _MEMORY[key] = dispatcher
        return dispatcher


def clear_memory() -> None:
    """Forget the kernels of this process (tests use it to exercise the disk path)."""
    with _LOCK:
        _MEMORY.clear()
        _DIR_OK.clear()
