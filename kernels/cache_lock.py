"""The lock of one kernel cache entry, with a bound: no process waits forever for another.

Processes sharing a cache directory serialize each entry's check, load and build with an exclusive
flock on `.<name>.lock`. The holder writes "<pid> <host>" into the file; the kernel drops a flock
when its holder dies, so a dead process never blocks anyone, but a stopped one (SIGSTOP, Ctrl-Z, a
debugger) would block the entry until it is continued. So:

    held        the lock is taken within the bound (`lock_timeout`, seconds), or later while its
                holder is still visibly building (running and using CPU), up to BUSY_FACTOR bounds
    bypassed    the bound passed and the holder is stopped, idle (no CPU time for IDLE_SECONDS),
                gone, on another host, or unknown, or BUSY_FACTOR bounds passed: the caller builds the
                kernel without the cache (in memory), with one CacheWarning naming the entry
    released    the holder removes the lock file, then drops the lock: lock files do not pile up.
                A waiter that took the lock of a file removed meanwhile sees the path name another
                file (or none) and tries again, so two processes never hold one entry.
    swept       `sweep(directory)` removes the lock files no process holds (left by a process that
                died holding one, or by an older graphkernel that kept them); the cache runs it once
                per directory and process.

Whether a holder builds is read from /proc/<pid>/stat (Linux): its state ('T'/'t': stopped or traced)
and its CPU time. Elsewhere a holder is unknown and the bound alone applies.
"""
from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import socket
import time

BUSY_FACTOR = 6          # a holder still building is waited for up to this many bounds
IDLE_SECONDS = 3.0       # a holder that used no CPU time for this long is not building (a loaded machine
                         # still gives a running process some of every second)
_HOST = socket.gethostname()


def lock_path(directory: str, name: str) -> str:
    return os.path.join(directory, f".{name}.lock")


def _open(path: str, create: bool) -> int:
    flags = os.O_RDWR | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    return os.open(path, flags, 0o600)


def _same_file(fd: int, path: str) -> bool:
    """The path still names the file `fd` is open on (its holder did not remove it meanwhile)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _holder(path: str) -> tuple[int | None, str | None]:
    """(pid, host) the lock file names, or (None, None)."""
    try:
        with open(path, "rb") as f:
            pid, host = f.read(300).decode("utf-8", "replace").split()
        return int(pid), host
    except (OSError, ValueError):
        return None, None


def _cpu_ticks(pid: int) -> tuple[str, int] | None:
    """(state, user + system clock ticks) of a process, from /proc; None when unknown or gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


class _Watch:
    """Whether the holder of a lock still builds: running, and its CPU time grew within IDLE_SECONDS."""

    def __init__(self, path: str):
        self.path = path
        self.samples: list[tuple[float, int | None, int]] = []   # (time, pid, ticks)

    def why_stalled(self, now: float) -> str | None:
        """None while the holder visibly builds, else why it does not (for the warning)."""
        pid, host = _holder(self.path)
        if pid is None:
            return "held by a process that did not say who it is"
        if host != _HOST:
            return f"held by process {pid} on host {host}"
        seen = _cpu_ticks(pid)
        if seen is None:
            return f"held by process {pid}, which is gone (or hidden from this one)"
        state, ticks = seen
        if state in ("T", "t"):
            return f"held by process {pid}, which is stopped"
        self.samples = [s for s in self.samples if s[1] == pid and now - s[0] <= IDLE_SECONDS + 0.5] + \
            [(now, pid, ticks)]
        first = self.samples[0]
        if now - first[0] >= IDLE_SECONDS and ticks == first[2]:
            return f"held by process {pid}, which used no CPU time for {now - first[0]:.1f} s"
        return None


class Bypassed(Exception):
    """The entry's lock was not taken: `reason` says why (its holder, the time waited)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _take(path: str) -> int | None:
    """The fd of the lock file at `path`, locked by us and holding our pid and host; None when another
    process holds it."""
    while True:
        fd = _open(path, create=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if not _same_file(fd, path):   # its holder removed it after we opened it: take the new one
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {_HOST}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return fd


def acquire(directory: str, name: str, bound: float) -> int:
    """The fd of the entry's lock file, locked; Bypassed when the bound passed for a stalled holder."""
    path = lock_path(directory, name)
    start = time.monotonic()
    watch = _Watch(path)
    pause = 0.005
    while (fd := _take(path)) is None:
        waited = time.monotonic() - start
        why = watch.why_stalled(time.monotonic()) if waited >= bound - IDLE_SECONDS else None
        if waited >= bound and (why is not None or waited >= BUSY_FACTOR * bound):
            raise Bypassed(f"its lock is {why or 'held by a process still building'} "
                           f"(waited {waited:.1f} s, the bound is {bound:g} s)")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    return fd


def try_acquire(directory: str, name: str) -> int | None:
    """The fd of the entry's lock file, locked, or None at once when another process holds it (a
    kernel building in the background asks so: it never waits for the entry's holder)."""
    return _take(lock_path(directory, name))


def release(directory: str, name: str, fd: int) -> None:
    """Remove the lock file (while still holding it), then drop the lock."""
    try:
        path = lock_path(directory, name)
        if _same_file(fd, path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    finally:
        os.close(fd)


def sweep(directory: str) -> int:
    """Remove the entry lock files in `directory` that no process holds; returns how many."""
    removed = 0
    for path in glob.glob(os.path.join(glob.escape(directory), ".*.lock")):
        try:
            fd = _open(path, create=False)
        except OSError:   # gone meanwhile, or a symlink (O_NOFOLLOW): not ours to remove
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _same_file(fd, path):
                os.unlink(path)
                removed += 1
        except OSError:   # held: someone is using the entry
            pass
        finally:
            os.close(fd)
    return removed
