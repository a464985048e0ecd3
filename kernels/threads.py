"""The process's cores, and the one pool of threads that runs every parallel launch on them.

    affinity(), cpu_quota()
                        the CPUs this process may run on, its cgroup's CPU quota in cores
    allowed_threads()   the cores this process may use: its CPU affinity, its cgroup's CPU quota,
                        NUMBA_NUM_THREADS when the user set it, and set_num_threads(); the pool
                        never holds more threads than that (no oversubscription)
    CorePool.run(task, chunks)
                        runs task(0) ... task(chunks - 1) on the pool's workers and the calling
                        thread; a chunk is taken by whichever thread is free (dynamic, a shared
                        counter), so a worker the OS does not schedule (another process holds its
                        core) delays the launch by at most the chunk it already holds, never by its
                        whole share
    blas_single_threaded()
                        while a program runs, OpenBLAS computes each GEMM call on the thread that
                        makes it: the large GEMMs are split into fixed chunks over this pool
                        (kernels/matmul.py), so BLAS's own threads never compete with the pool's

Generated kernels are sequential numba functions over a range of blocks `[blk_lo, blk_hi)`
(nogil: they release the GIL while they compute), so any thread can run any chunk of blocks, and a
block computes the same bits whichever thread runs it and however many there are.

A launch submitted while another thread's launch holds the pool runs all its chunks on its own
thread: calls from several threads never wait for each other's workers.
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager

_forced: int | None = None      # set_num_threads()


def _cgroup_cpus() -> float | None:
    """The cgroup's CPU quota in cores (v2 cpu.max, v1 cfs_quota_us / cfs_period_us), None if unlimited."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period = int(f.read())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError):
        return None


def cpu_quota() -> float | None:
    """The cgroup's CPU quota in cores, None if unlimited."""
    return _cgroup_cpus()


def affinity() -> frozenset[int]:
    """The CPUs this process may run on (its affinity mask; every CPU where there is none)."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # not Linux
        return frozenset(range(os.cpu_count() or 1))


def allowed_cores() -> int:
    """The cores this process may run on: its affinity mask, no more than its cgroup's CPU quota
    (rounded down, at least one)."""
    n = len(affinity())
    quota = _cgroup_cpus()
    if quota is not None:
        n = min(n, max(1, int(quota)))
    return n


def allowed_threads() -> int:
    """Threads a launch may run on: allowed_cores(), no more than NUMBA_NUM_THREADS if set and
    set_num_threads() if called."""
    n = allowed_cores()
    env = os.environ.get("NUMBA_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        n = min(n, int(env))
    if _forced is not None:
        n = min(n, _forced)
    return max(1, n)


def set_num_threads(n: int | None) -> int | None:
    """Use at most `n` threads for launches (None: as many as allowed_threads finds); returns the
    previous setting, to restore it."""
    global _forced, _pool
    if n is not None and (not isinstance(n, int) or n < 1):
        raise ValueError(f"set_num_threads: the thread count must be a positive int, got {n!r}")
    previous, _forced = _forced, n
    with _pool_lock:
        if _pool is not None and _pool.threads != allowed_threads():
            _pool.close()
            _pool = None
    return previous


class CorePool:
    """`threads - 1` worker threads and the caller (see the module docstring)."""

    def __init__(self, threads: int):
        self.threads = threads
        self._submit = threading.Lock()          # one launch at a time holds the workers
        self._work = threading.Condition()
        self._generation = 0                     # bumped per launch: wakes the workers
        self._task = None
        self._next = 0                           # the next chunk to take
        self._chunks = 0
        self._running = 0                        # workers inside the current launch
        self._error: BaseException | None = None
        self._closed = False
        self._workers = [threading.Thread(target=self._serve, name=f"graphkernel-{k}", daemon=True)
                         for k in range(threads - 1)]
        for t in self._workers:
            t.start()

    def _take(self, generation: int) -> int:
        """The next chunk of launch `generation`, or -1 when none is left, that launch is over, or one
        of its chunks failed (under self._work)."""
        k = self._next
        if generation != self._generation or k >= self._chunks or self._error is not None:
            return -1
        self._next = k + 1
        return k

    def _drain(self, task, generation: int) -> None:
        """Run chunks of `task` until none is left; the first exception stops the launch."""
        while True:
            with self._work:
                k = self._take(generation)
            if k < 0:
                return
            try:
                task(k)
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                with self._work:
                    if self._error is None:
                        self._error = e
                return

    def _serve(self) -> None:
        seen = 0
        while True:
            with self._work:
                while self._generation == seen and not self._closed:
                    self._work.wait()
                if self._closed:
                    return
                seen, task = self._generation, self._task
                self._running += 1
            self._drain(task, seen)
            with self._work:
                self._running -= 1
                if self._running == 0:
                    self._work.notify_all()

    def run(self, task, chunks: int) -> None:
        """task(k) for k in range(chunks), spread over the pool; returns when every chunk is done.
        An exception in a chunk is raised here once the chunks already started have finished."""
        if chunks <= 1 or self.threads == 1 or not self._submit.acquire(blocking=False):
            for k in range(chunks):     # the pool is busy with another thread's launch: run alone
                task(k)
            return
        try:
            with self._work:
                self._task, self._next, self._chunks, self._error = task, 0, chunks, None
                self._generation += 1
                generation = self._generation
                self._work.notify_all()
            self._drain(task, generation)
            with self._work:
                while self._running:
                    self._work.wait()
                error, self._error, self._task = self._error, None, None
            if error is not None:
                raise error
        finally:
            self._submit.release()

    def close(self) -> None:
        with self._work:
            self._closed = True
            self._work.notify_all()


_pool: CorePool | None = None
_pool_lock = threading.Lock()


def pool() -> CorePool:
    """The process's pool, started on first use with allowed_threads() threads."""
    global _pool
    p = _pool
    if p is None:
        with _pool_lock:
            if _pool is None:
                _pool = CorePool(allowed_threads())
            p = _pool
    return p


def pool_threads() -> int:
    """Threads a launch can use (the pool's, without starting it)."""
    return _pool.threads if _pool is not None else allowed_threads()


# --- BLAS ------------------------------------------------------------------------------------------
_blas_lock = threading.Lock()
_blas_users = 0
_blas_saved: list = []
_blas_controllers: tuple[int, list] = (-1, [])


def _controllers() -> list:
    """threadpoolctl's controllers of the BLAS libraries the process has loaded: numpy's, and scipy's that
    numba's np.dot calls, and any a later import brings (torch's): looked up again after an import (a
    lookup takes ~0.2 ms; the length of sys.modules tells cheaply that nothing new can have come)."""
    global _blas_controllers
    modules, found = _blas_controllers
    if modules != len(sys.modules):
        from threadpoolctl import ThreadpoolController   # a well-kept library: finds OpenBLAS/MKL/BLIS
        found = list(ThreadpoolController().select(user_api="blas").lib_controllers)
        _blas_controllers = (len(sys.modules), found)
    return found


def set_blas_threads(n: int) -> None:
    """BLAS's own thread count, process-wide (what numpy's MatMul uses outside a program's run)."""
    with _blas_lock:
        for c in _controllers():
            c.set_num_threads(n)


@contextmanager
def blas_single_threaded():
    """BLAS at one thread inside the block (nested and concurrent uses share one setting; the last to
    leave restores the library's own count)."""
    global _blas_users
    with _blas_lock:
        if _blas_users == 0:
            _blas_saved[:] = [(c, c.get_num_threads()) for c in _controllers()]
            for c, n in _blas_saved:
                if n != 1:
                    c.set_num_threads(1)
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                for c, n in _blas_saved:
                    if n != 1:
                        c.set_num_threads(n)


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's worker threads, and maybe a lock one of them held: it
    starts a pool of its own, with fresh locks."""
    global _pool, _pool_lock, _blas_lock, _blas_users
    _pool, _pool_lock, _blas_lock, _blas_users = None, threading.Lock(), threading.Lock(), 0


os.register_at_fork(after_in_child=_after_fork_in_child)
