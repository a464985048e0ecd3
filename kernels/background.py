"""Kernels built in the background while a program runs on stand-ins (`--compile_mode=background`).

    lowering         a kernel missing from the cache (memory and disk) becomes a Job; its launches run
                     a PendingLaunch, which calls the launch's stand-in (kernels/standin.py)
    the builder      worker processes (`python -m kernels.build_worker`) at a low priority build the
                     jobs in order into the kernel cache's disk directory; a thread per worker sends it
                     one job at a time, then loads the built kernel from disk in this process (a cache
                     hit) and marks the job ready, or failed with the build's error
    between steps    Program.run, before a call, swaps the real launch in for every PendingLaunch whose
                     job is ready, in every Plan of the program (kernels/plan.py: Program.arrive,
                     swap); a failed job gives a KernelBuildWarning there,
                     in the caller's thread, and its launch stays on its stand-in

Why processes: numba's compile is mostly Python (typing and lowering hold the GIL; docs/kernels.md has
the measured shares), so a builder thread would hold the GIL whenever the user's step wants it back
between two launches, up to the switch interval (5 ms) each time, for hundreds of launches a step. A process at nice 10 takes a core when the steps leave one idle and little when they do
not (on a machine other processes keep busy, a nice-10 worker gets little: $GRAPHKERNEL_BUILD_NICE=0
puts it beside them). The workers stay inside the process's core budget (kernels.threads.allowed_threads:
its affinity, cgroup quota, NUMBA_NUM_THREADS, set_num_threads): one worker when the budget is two
cores or fewer, half of it above that, so the steps keep their share; each worker inherits the
process's CPU affinity and computes on one thread (WORKER_THREADS). Processes need the disk cache to hand
kernels over: without a usable cache directory a program builds its kernels while it is lowered, as
with `--compile_mode=wait`.

A job is per kernel and cache directory, shared by every program that needs that kernel. At the
interpreter's exit the workers' stdin closes: a worker ends after the kernel it is building (its entry
is whole: written under the entry's lock, its manifest last).
"""
from __future__ import annotations

import atexit
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
import types
import warnings
from dataclasses import dataclass

from kernels import threads
from kernels.cache import fetch_kernel, lock_timeout

NICE = 10                    # the workers' priority: below the user's steps ($GRAPHKERNEL_BUILD_NICE sets another)
NICE_ENV = "GRAPHKERNEL_BUILD_NICE"
WORKER_THREADS = {name: "1" for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                         "MKL_NUM_THREADS")}


class KernelBuildWarning(RuntimeWarning):
    """A kernel did not build; its work runs in smaller kernels, on the numpy reference or on its
    stand-in (a background build)."""


class Job:
    """One kernel to build: its state ("queued", "building", "ready", "failed"), the dispatcher when
    ready, the error text when failed, and when it was queued and done (time.perf_counter())."""

    def __init__(self, name: str, source: str, sig: tuple, mode: str, cache_dir: str | None):
        self.name, self.source, self.sig, self.mode, self.cache_dir = name, source, sig, mode, cache_dir
        self.state = "queued"
        self.dispatcher = None
        self.error: str | None = None
        self.queued_at = time.perf_counter()
        self.done_at: float | None = None
        self.build_seconds = 0.0
        self.done = threading.Event()

    def finish(self, dispatcher, error: str | None, seconds: float) -> None:
        self.dispatcher, self.error, self.build_seconds = dispatcher, error, seconds
        self.done_at = time.perf_counter()
        self.state = "failed" if error is not None else "ready"
        self.done.set()


class PendingLaunch:
    """The launch of a kernel that builds in the background: called, it runs its stand-in (never the
    kernel: the swap happens between steps, kernels/plan.py); `launch()` is the real launch once
    the job is ready, `make(dispatcher)` building it (kernels.launch.launch_of)."""

    def __init__(self, job: Job, standin, make):
        self.job, self.standin, self.make = job, standin, make

    def __call__(self, *args):
        return self.standin(*args)

    def launch(self):
        return self.make(self.job.dispatcher)


@dataclass(frozen=True)
class Arrival:
    """A kernel built in the background and swapped in for its stand-ins (time.perf_counter() times)."""
    kernel: str                 # the kernel's name
    positions: tuple[int, ...]  # its launches, in the program's launch list
    queued_at: float            # when its build was asked for (while the graph was lowered)
    built_at: float             # when the build process had it on disk and this process had loaded it
    build_seconds: float        # the build process's time for it
    swapped_at: float           # the start of the call that first ran it
    call: int                   # calls of the program before that one (0: the first call ran the kernel)


def rebind(runner, changes: dict):
    """The runner with some of its globals changed: a new function, so a call still running the old
    one (another thread's step) keeps its launches to its end."""
    env = dict(runner.__globals__)
    env.update(changes)
    return types.FunctionType(runner.__code__, env, runner.__name__)


def warn_failed(failed: list) -> None:
    """One KernelBuildWarning per kernel of `failed`, (job, launch name) pairs, naming its launches."""
    names: dict = {}
    for job, launch in failed:
        names.setdefault(job, []).append(launch)
    for job, launches in names.items():
        shown = ", ".join(launches[:3]) + (f" and {len(launches) - 3} more" if len(launches) > 3 else "")
        warnings.warn(f"kernel of {shown} ({job.name}) failed to build in the background ({job.error}); "
                      "its launches stay on their stand-in (the numpy reference op by op)",
                      KernelBuildWarning, stacklevel=4)


class Builder:
    """The queue of jobs and the worker processes building them, `workers` at most (each started with
    its first job; a worker that died is started again for the next)."""

    def __init__(self, workers: int):
        self.workers = workers
        self._queue: queue.Queue = queue.Queue()
        self._jobs: dict[tuple, Job] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._procs: list[subprocess.Popen] = []

    def job_of(self, name: str, cache_dir: str | None) -> Job | None:
        with self._lock:
            return self._jobs.get((name, cache_dir))

    def submit(self, name: str, source: str, sig: tuple, mode: str, cache_dir: str | None) -> Job:
        """The job building kernel `name` into `cache_dir`: an existing one unless it failed."""
        with self._lock:
            job = self._jobs.get((name, cache_dir))
            if job is not None and job.state != "failed":
                return job
            job = self._jobs[(name, cache_dir)] = Job(name, source, sig, mode, cache_dir)
            self._queue.put(job)
            if len(self._threads) < self.workers:
                t = threading.Thread(target=self._serve, name=f"graphkernel-builder-{len(self._threads)}",
                                     daemon=True)
                self._threads.append(t)
                t.start()
        return job

    def _spawn(self) -> subprocess.Popen:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # where `kernels` is imported from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH", "")]))
        env.update(WORKER_THREADS)   # a build runs on one thread: no pools of numba's, BLAS's or OpenMP's
        nice = os.environ.get(NICE_ENV, "")
        nice = int(nice) if nice.lstrip("-").isdigit() else NICE
        proc = subprocess.Popen([sys.executable, "-m", "kernels.build_worker", str(nice)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
        with self._lock:
            self._procs.append(proc)
        return proc

    def _serve(self) -> None:
        proc = None
        while True:
            job = self._queue.get()
            if job is None:
                break
            job.state = "building"
            if proc is None or proc.poll() is not None:
                proc = self._spawn()
            try:
                pickle.dump((id(job), job.name, job.source, job.sig, job.mode, job.cache_dir, lock_timeout()),
                            proc.stdin)
                proc.stdin.flush()
                _, error, seconds = pickle.load(proc.stdout)
            except (EOFError, OSError, pickle.PickleError) as e:
                error, seconds = f"the background build process ended ({type(e).__name__})", 0.0
                proc = None
            dispatcher = None
            if error is None:
                try:   # from the disk entry the worker wrote: a cache hit
                    dispatcher, _ = fetch_kernel(job.name, job.name, job.source, job.sig, job.mode, job.cache_dir)
                except Exception as e:  # noqa: BLE001 - reported where the launch swaps
                    error = f"{type(e).__name__}: {e}"
            job.finish(dispatcher, error, seconds)
        if proc is not None and proc.stdin:
            proc.stdin.close()

    def close(self) -> None:
        """Stop taking jobs; each worker process ends after its current kernel."""
        for _ in self._threads:
            self._queue.put(None)
        with self._lock:
            for proc in self._procs:
                try:
                    proc.stdin.close()
                except OSError:
                    pass


_builder: Builder | None = None
_builder_lock = threading.Lock()


def builder() -> Builder:
    """The process's builder, made on first use."""
    global _builder
    with _builder_lock:
        if _builder is None:
            cores = threads.allowed_threads()
            _builder = Builder(1 if cores <= 2 else cores // 2)
            atexit.register(_builder.close)
        return _builder


def wait(jobs, timeout: float | None = None) -> bool:
    """Wait until every job is done (ready or failed); False when `timeout` seconds passed first."""
    deadline = None if timeout is None else time.perf_counter() + timeout
    for job in jobs:
        left = None if deadline is None else max(0.0, deadline - time.perf_counter())
        if not job.done.wait(left):
            return False
    return True
