"""The kernel cache: in memory for the process, on disk across processes.

    key   the kernel name: its ops and a hash of its source, which the KernelSpec (ops and attrs,
            dtypes, collapsed rank and broadcast pattern, reduce axes) and the variant (elementwise,
            rows, split, columns or multi-tensor) determine; no sizes (kernels are shape-generic)
    mode  "enable"  memory, then disk, then build (and store)
          "disable" memory only (exec'd source, nothing written)
          "force"   build anew and overwrite the disk entry
    disk  one entry per kernel in <cache_dir>:
            <name>.py                   the rendered source (numba needs a real file to cache)
            __pycache__/<name>.*.nbi    numba's index (a pickle)
            __pycache__/<name>.*.nbc    numba's machine code (a pickle)
            <name>.manifest             JSON: the sha256 of each file above, written after a build
            .<name>.lock                serializes the processes that load or build the entry; a wait
                                        is bounded (kernels/cache_lock.py, `set_lock_timeout`): past
                                        it a stalled holder is bypassed, the kernel built in memory

Trust model. Loading an entry runs what is in it: numba unpickles the index and the object file
and jumps into the machine code. So an entry is only as safe as whoever can write it, and the cache
trusts one writer: the user running the process (and root, who can write anything anyway).
  - The directory, the parents we create, and `__pycache__` are made 0700; source and numba files
    are set to 0600 after a build, whatever the umask.
  - A directory (or `__pycache__`) owned by another user or writable by group or others is refused
    with a CacheWarning, before anything is written to it, and kernels are built in memory; so is
    an entry with such a file, or with a file that is not a regular file (a symlink). The checks read
    mode bits and owners (os.stat / os.lstat), so they hold for root too.
  - An entry is used only when its files are exactly the ones its manifest lists and each file's
    sha256 matches, and the source's hash is that of the source just rendered; checked before numba
    opens any file (under the entry's lock; between the check and numba's read only the owner could
    change a file, which the checks above make sure of). Anything else (a changed source, index or object file, an extra or missing file,
    no manifest: an older layout, a crashed build) is a CacheWarning and a rebuild from scratch.
  - The `.py` file is never imported: the module is compiled from the rendered source, with the
    file's path as its name so numba can stamp it, so no `.pyc` is written or read either.
  - numba's files land in `<cache_dir>/__pycache__` whatever NUMBA_CACHE_DIR says (our own locator,
    kernels/compile.py); if numba would put them elsewhere the kernel is built in memory.
What it does not defend against: someone who can already write as this user (the manifest is a
checksum, not a signature: it catches corruption, partial writes and edits, the ownership and mode
checks keep other users out), and a parent directory that another user can write (they could swap
the whole cache directory): keep the cache under a directory only you control.

STATS counts what each request cost, so tests can tell "a second process took kernels from disk":
"compiled" (numba built it), "disk" (numba's cache supplied it), "memory" (already in this process),
"rebuilt" (a corrupt or stale entry was replaced), "refused" (an unsafe entry was left alone and
the kernel built in memory), "bypassed" (an entry whose lock a stalled process held past the bound,
built in memory), "stale locks" (lock files no process held, removed).
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import stat
import tempfile
import threading
import warnings
from collections import Counter

from kernels import cache_lock, compile as kc

STATS: Counter = Counter()
_MEMORY: dict = {}
_LOCK = threading.RLock()
_DIR_PROBLEM: dict[str, str | None] = {}
_MANIFEST_FORMAT = 1
_KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_LOCK_TIMEOUT = 10.0   # seconds
_LOCK_TIMEOUT = [DEFAULT_LOCK_TIMEOUT]


class CacheWarning(RuntimeWarning):
    """The kernel disk cache could not be used as asked; the run goes on."""


def default_cache_dir() -> str:
    return os.environ.get("GRAPHKERNEL_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "graphkernel")


# --- directories -------------------------------------------------------------------------------

def _make_private_dirs(path: str) -> None:
    """Create `path` and its missing parents, each 0700 whatever the umask."""
    missing = []
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        missing.append(current)
        current = os.path.dirname(current)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:  # another process made it first: its mode is checked later
            continue
        os.chmod(directory, 0o700)


def _unsafe(st: os.stat_result) -> str | None:
    """Why a file or directory with this stat may hold another user's code, or None."""
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _dir_problem(path: str) -> str | None:
    """Why kernels cannot be stored in `path`, or None once it and its __pycache__ are ready."""
    try:
        _make_private_dirs(path)
        problem = _unsafe(os.stat(path))
        if problem:
            return f"is not private: {problem}"
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
        numba_dir = os.path.join(path, "__pycache__")
        _make_private_dirs(numba_dir)
        problem = _unsafe(os.lstat(numba_dir))
        if problem or not stat.S_ISDIR(os.lstat(numba_dir).st_mode):
            return f"is not private: its __pycache__ is {problem or 'not a directory'}"
    except OSError as e:
        return f"cannot be written ({e})"
    return None


def usable_dir(path: str) -> str | None:
    """`path` when kernels can be kept there, else None (warned once per directory)."""
    if path not in _DIR_PROBLEM:
        _DIR_PROBLEM[path] = _dir_problem(path)
        if _DIR_PROBLEM[path]:
            warnings.warn(f"kernel cache directory {path!r} {_DIR_PROBLEM[path]}; "
                          "kernels are kept in memory only", CacheWarning, stacklevel=3)
        else:
            STATS["stale locks"] += cache_lock.sweep(path)   # left by processes that died holding them
    return path if _DIR_PROBLEM[path] is None else None


# --- entries -----------------------------------------------------------------------------------

def _entry_files(directory: str, name: str) -> list[str]:
    """The entry's source and numba files present on disk, relative to `directory`."""
    source = [f"{name}.py"] if os.path.lexists(os.path.join(directory, f"{name}.py")) else []
    numba_files = glob.glob(os.path.join(directory, "__pycache__", f"{name}.*"))
    return source + sorted(os.path.relpath(f, directory) for f in numba_files)


def _manifest_path(directory: str, name: str) -> str:
    return os.path.join(directory, f"{name}.manifest")


def _entry_problem(directory: str, name: str) -> str | None:
    """Why the entry's files may hold another user's code, or None."""
    manifest = os.path.relpath(_manifest_path(directory, name), directory)
    for rel in _entry_files(directory, name) + [manifest]:
        try:
            st = os.lstat(os.path.join(directory, rel))
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            return f"{rel} is not a regular file"
        problem = _unsafe(st)
        if problem:
            return f"{rel} is {problem}"
    return None


def _sha256_file(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _read_manifest(directory: str, name: str) -> dict | None:
    try:
        with open(_manifest_path(directory, name)) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != _MANIFEST_FORMAT:
        return None
    files = manifest.get("files")
    return files if isinstance(files, dict) else None


def _mismatch(directory: str, name: str, source: str) -> str | None:
    """Why the entry on disk is not the one recorded for `source`, or None when every file matches."""
    recorded = _read_manifest(directory, name)
    if recorded is None:
        return "no readable manifest"
    present = _entry_files(directory, name)
    if sorted(recorded) != sorted(present):
        return "its files are not the ones its manifest lists"
    if recorded.get(f"{name}.py") != hashlib.sha256(source.encode()).hexdigest():
        return "its source is not this kernel's"
    for rel in present:
        if _sha256_file(os.path.join(directory, rel)) != recorded[rel]:
            return f"{rel} does not match its recorded hash"
    return None


def _write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _record(directory: str, name: str) -> None:
    """Make the entry's files private and write the manifest of their hashes (after a build)."""
    files = {}
    for rel in _entry_files(directory, name):
        path = os.path.join(directory, rel)
        os.chmod(path, 0o600)
        files[rel] = _sha256_file(path)
    _write_atomic(_manifest_path(directory, name),
                  json.dumps({"format": _MANIFEST_FORMAT, "kernel": name, "files": files}, indent=1))


def _drop_entry(directory: str, name: str) -> None:
    """Remove every file of the entry, the manifest first."""
    for path in [_manifest_path(directory, name)] + [
            os.path.join(directory, rel) for rel in _entry_files(directory, name)]:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _fresh_entry(directory: str, name: str, source: str) -> None:
    """Replace the entry by its source alone (numba adds its files when it builds)."""
    _drop_entry(directory, name)
    _write_atomic(os.path.join(directory, f"{name}.py"), source)


def lock_timeout() -> float:
    """Seconds a process waits for another that holds a cache entry (kernels/cache_lock.py)."""
    return _LOCK_TIMEOUT[0]


def set_lock_timeout(seconds: float) -> None:
    """The bound of every later wait (the context key op_compiler_cache_lock_timeout sets it)."""
    if not seconds > 0:
        raise ValueError(f"the cache lock timeout must be a positive number of seconds, got {seconds!r}")
    _LOCK_TIMEOUT[0] = float(seconds)


@contextlib.contextmanager
def _entry_lock(directory: str, name: str):
    """Hold the entry against other processes while it is checked, loaded or built; yields False when
    its holder stalled past the bound (the caller then builds without the cache)."""
    try:
        fd = cache_lock.acquire(directory, name, lock_timeout())
    except cache_lock.Bypassed as e:
        warnings.warn(f"kernel cache entry {name} in {directory!r}: {e.reason}; built in memory",
                      CacheWarning, stacklevel=5)
        STATS["bypassed"] += 1
        yield False
        return
    try:
        yield True
    finally:
        cache_lock.release(directory, name, fd)


def _prepare_entry(directory: str, name: str, source: str, force: bool) -> bool:
    """Leave an entry whose files all verify as it is, else replace it by the source alone (with a
    warning when it held files); returns whether it was replaced."""
    mismatch = None if force else _mismatch(directory, name, source)
    if mismatch and _entry_files(directory, name):
        warnings.warn(f"kernel cache entry {name} in {directory!r} is corrupt or stale ({mismatch}); "
                      "rebuilt", CacheWarning, stacklevel=5)
        STATS["rebuilt"] += 1
    if force or mismatch:
        _fresh_entry(directory, name, source)
        return True
    return False


def _from_disk(name: str, source: str, sig: tuple, directory: str, force: bool):
    """(dispatcher, from numba's cache) through the entry in `directory`; None when the entry is
    refused and the kernel must be built in memory."""
    with _entry_lock(directory, name) as held:
        if not held:
            return None
        problem = _entry_problem(directory, name)
        if problem:
            warnings.warn(f"kernel cache entry {name} in {directory!r} refused ({problem}); "
                          "built in memory", CacheWarning, stacklevel=4)
            STATS["refused"] += 1
            return None
        replaced = _prepare_entry(directory, name, source, force)
        path = os.path.join(directory, f"{name}.py")
        try:
            dispatcher = kc.from_file(name, path, source)
        except kc.CacheLocationError as e:
            if replaced:  # the source alone would be an entry without a manifest
                _drop_entry(directory, name)
            warnings.warn(f"{e}; built in memory", CacheWarning, stacklevel=4)
            STATS["refused"] += 1
            return None
        try:
            from_cache = kc.compile_for(dispatcher, sig)
        except Exception as first:  # verified files numba still cannot load: start over once
            _fresh_entry(directory, name, source)
            dispatcher = kc.from_file(name, path, source)
            try:
                from_cache = kc.compile_for(dispatcher, sig)  # a real build error propagates from here
            except Exception:
                _drop_entry(directory, name)  # else its source, without a manifest, is "corrupt or stale" next time
                raise
            warnings.warn(f"kernel cache entry {name} did not load ({type(first).__name__}: {first}); "
                          "rebuilt", CacheWarning, stacklevel=4)
            STATS["rebuilt"] += 1
        if not from_cache:
            _record(directory, name)
        return dispatcher, from_cache


def _disk_entry_ready(name: str, source: str, directory: str) -> bool:
    """Whether the entry in `directory` holds this kernel, every file verified (kernels that build in
    the background ask this first: a missing entry is no build in the foreground). An entry another
    process holds (it is building it) counts as missing: the background build waits for it, not the
    caller."""
    fd = cache_lock.try_acquire(directory, name)
    if fd is None:
        return False
    try:
        return _entry_problem(directory, name) is None and _mismatch(directory, name, source) is None
    finally:
        cache_lock.release(directory, name, fd)


def lookup_kernel(key: str, name: str, source: str, sig: tuple, mode: str = "enable",
                  cache_dir: str | None = None):
    """fetch_kernel's answer when the kernel is in memory or verified on disk, else None: never a
    build (kernels/background.py builds the missing ones elsewhere). The memory is checked without
    waiting for a build another thread runs."""
    if mode == "force":
        return None
    with _LOCK:
        if key in _MEMORY:
            STATS["memory"] += 1
            return _MEMORY[key], "memory"
    directory = usable_dir(cache_dir or default_cache_dir()) if mode != "disable" else None
    if directory is None or not _disk_entry_ready(name, source, directory):
        return None
    return fetch_kernel(key, name, source, sig, mode, cache_dir)


def fetch_kernel(key: str, name: str, source: str, sig: tuple, mode: str = "enable",
                 cache_dir: str | None = None):
    """(the compiled dispatcher for `key`, where it came from: "memory", "disk" or a fresh build,
    "compiled"); a compile's progress counts the cache hits."""
    if not _KERNEL_NAME.fullmatch(name):
        raise ValueError(f"kernel name {name!r} is not an identifier; it cannot name a cache file")
    with _LOCK:
        if mode != "force" and key in _MEMORY:
            STATS["memory"] += 1
            return _MEMORY[key], "memory"
        directory = usable_dir(cache_dir or default_cache_dir()) if mode != "disable" else None
        built = _from_disk(name, source, sig, directory, mode == "force") if directory else None
        if built is None:
            dispatcher = kc.from_source(name, source)
            kc.compile_for(dispatcher, sig)
            built = dispatcher, False
        dispatcher, from_cache = built
        origin = "disk" if from_cache else "compiled"
        STATS[origin] += 1
        _MEMORY[key] = dispatcher
        return dispatcher, origin


def clear_memory() -> None:
    """Forget the kernels of this process (tests use it to exercise the disk path)."""
    with _LOCK:
        _MEMORY.clear()
        _DIR_PROBLEM.clear()
