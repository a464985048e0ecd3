"""The MPI communicator (mpi4py over MPICH or Open MPI, the optional extra `graphkernel[dist]`): what the
collective ops of a process launched by `mpiexec` run on (ir/ops/collective.py calls it).

    main thread                                   communicator thread ("graphkernel-comm")
    -----------                                   -----------------------------------------
    AllReduce(x)     submit job, wait  ------->   comm.Allreduce(x, out)     (blocking MPI call)
    AllReduceStart   pack into bucket, submit ->  comm.Allreduce(IN_PLACE, bucket)
    ... backward kernels run meanwhile ...            ... reducing the bucket meanwhile ...
    AllReduceWait    wait, unpack        <-----   done

One thread makes every collective call, in the order the main thread submits them, so every rank
issues its collectives in its program's order (MPI's rule) and a bucket's AllReduce runs while the
main thread computes; blocking MPI calls make their own progress (a non-blocking call from the main
thread would advance only inside MPI calls: neither MPICH nor Open MPI runs a progress thread by default). The main
thread waits on an event, in slices of POLL seconds, so it can answer other ranks' questions (below).

Persistent buckets: each bucket (named by the reducer: "r<k>b<j>") keeps one flat buffer, float32 (or
float64 when a gradient is), allocated at its first step and reused by every step after; the start
copies the gradients in (casting), the AllReduce runs in place, the wait copies the results out.

Timeouts. A wait longer than `timeout` seconds (HCCL_EXEC_TIMEOUT's meaning, default 1800; the
environment's GRAPHKERNEL_COMM_TIMEOUT or HCCL_EXEC_TIMEOUT, or `management.set_comm_timeout`)
raises CollectiveTimeoutError naming the collective (op, sequence number, group) and the ranks that
did not arrive: the waiting rank asks every other member, on a communicator of its own, how many
collectives of that group it has entered; a rank waiting in a collective answers within POLL seconds,
a rank that is computing or stuck cannot answer and is reported as not there. After a timeout the
communicator is broken (the collective may still be in flight): the error ends the job (faults.py).
"""
from __future__ import annotations

import collections
import itertools
import os
import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ir.errors import GraphKernelError
from ir.ops.collective import unknown_token
from kernels import threads

DEFAULT_TIMEOUT = 1800.0      # seconds: HCCL_EXEC_TIMEOUT's default order of magnitude (CANN: 1836 s)
POLL = 0.05                   # seconds between a waiting main thread's looks at other ranks' questions
GRACE = 2.0                   # seconds a timed-out rank waits for the answers of the others
QUERY, ANSWER = 7001, 7002    # message tags on the question communicator
SPANS_KEPT = 4096             # collectives whose timings the communicator remembers (timeline())


class CommunicationError(GraphKernelError, RuntimeError):
    """A communication query before init(), an unknown group, or a collective that failed."""


class CollectiveTimeoutError(CommunicationError):
    """A collective waited longer than the timeout for the other members of its group."""


def timeout_from_env(default: float = DEFAULT_TIMEOUT) -> float:
    for key in ("GRAPHKERNEL_COMM_TIMEOUT", "HCCL_EXEC_TIMEOUT"):
        text = os.environ.get(key)
        if text:
            try:
                value = float(text)
            except ValueError:
                raise CommunicationError(f"{key}={text!r}: expected seconds (a positive number)") from None
            if not value > 0:
                raise CommunicationError(f"{key}={text!r}: expected seconds (a positive number)")
            return value
    return default


@dataclass
class Group:
    name: str
    comm: object                  # the group's MPI communicator (None on a rank outside it)
    world_ranks: tuple[int, ...]
    entered: int = 0              # collectives this rank has started on it

    @property
    def size(self) -> int:
        return len(self.world_ranks)


@dataclass
class Job:
    """One collective for the communicator thread; the main thread waits on `done`."""
    label: str                    # "AllReduce(sum) #3 on hccl_world_group"
    group: Group
    sequence: int
    work: object                  # comm -> result (dropped once run: it holds the arrays)
    bucket: str = ""
    submitted: float = 0.0
    started: float = 0.0
    finished: float = 0.0
    waited: tuple = ()            # (from, to) of the main thread's wait
    result: object = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


def _mpi_op(MPI, op: str):
    return {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}[op]


def _wire(x: np.ndarray) -> np.ndarray:
    """The array as MPI can send it: C-contiguous, at least one dimension, float16 widened to float32
    (MPI has no half type)."""
    x = np.asarray(x)
    x = x.astype(np.float32) if x.dtype == np.float16 else np.ascontiguousarray(x)
    return x.reshape(1) if x.ndim == 0 else x


class MpiCommunicator:
    """The world (and the groups made from it) of a process launched by an MPI launcher."""

    def __init__(self, MPI, timeout: float = DEFAULT_TIMEOUT):
        self.MPI = MPI
        world = MPI.COMM_WORLD
        self.rank, self.size = world.Get_rank(), world.Get_size()
        self.world = world.Dup()            # ours alone: a script's own mpi4py traffic never mixes in
        self.questions = world.Dup()        # timeout diagnosis (module docstring)
        local = world.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = local.Get_rank(), local.Get_size()
        seen = local.allgather((self.rank, sorted(threads.affinity())))   # in local rank order
        self.local_ranks = tuple(rank for rank, _ in seen)
        self.local_cpus = tuple(frozenset(cpus) for _, cpus in seen)      # launcher.share_cores reads them
        local.Free()
        self.threads_ok = MPI.Query_thread() >= MPI.THREAD_MULTIPLE
        self.timeout = timeout
        self.groups: dict[str, Group] = {}
        self.world_group = Group("world", self.world, tuple(range(self.size)))
        self.buffers: dict[str, np.ndarray] = {}
        self.pending: dict[int, tuple] = {}
        self.spans: collections.deque = collections.deque(maxlen=SPANS_KEPT)
        self.broken: str | None = None
        self._handles = itertools.count(1)
        self._waiting: Job | None = None
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="graphkernel-comm", daemon=True)
        self._thread.start()

    # -- groups -------------------------------------------------------------------------------------------
    def add_world_names(self, names) -> None:
        for name in names:
            self.groups[name] = self.world_group

    def group(self, name: str) -> Group:
        g = self.groups.get(name)
        if g is None:
            raise CommunicationError(f"unknown communication group {name!r}; groups: {', '.join(sorted(self.groups))} "
                                     "(create_group makes one)")
        if g.comm is None:
            raise CommunicationError(f"rank {self.rank} is not a member of group {name!r} (ranks {list(g.world_ranks)})")
        return g

    def create_group(self, name: str, ranks: list[int]) -> Group:
        """Collective over the members (MPI_Comm_create_group): every rank in `ranks` calls it."""
        world_group = self.world.Get_group()
        sub = world_group.Incl(list(ranks))
        comm = self.world.Create_group(sub, tag=len(self.groups) + 1)
        sub.Free()
        world_group.Free()
        g = Group(name, comm, tuple(ranks))
        self.groups[name] = g
        return g

    def destroy_group(self, name: str) -> None:
        g = self.groups.pop(name)
        if g.comm is not None and g is not self.world_group:
            g.comm.Free()

    # -- the collectives (ir/ops/collective.py's protocol) ----------------------------------------------------
    def all_reduce(self, x, op, group):
        send = _wire(x)
        out = np.empty_like(send)
        mpi_op = _mpi_op(self.MPI, op)
        self._run(group, f"AllReduce({op})", lambda comm: comm.Allreduce(send, out, op=mpi_op))
        return out.astype(x.dtype, copy=False).reshape(np.shape(x))

    def all_gather(self, x, group):
        send = _wire(x)
        g = self.group(group)
        out = np.empty((send.shape[0] * g.size, *send.shape[1:]), send.dtype)
        self._run(group, "AllGather", lambda comm: comm.Allgather(send, out))
        return out.astype(x.dtype, copy=False)

    def reduce_scatter(self, x, op, group):
        send = _wire(x)
        g = self.group(group)
        out = np.empty((send.shape[0] // g.size, *send.shape[1:]), send.dtype)
        mpi_op = _mpi_op(self.MPI, op)
        self._run(group, f"ReduceScatter({op})", lambda comm: comm.Reduce_scatter_block(send, out, op=mpi_op))
        return out.astype(x.dtype, copy=False)

    def broadcast(self, xs, root, group):
        g = self.group(group)
        if root not in g.world_ranks:
            raise CommunicationError(f"Broadcast: root_rank {root} is not a member of group {group!r} "
                                     f"(ranks {list(g.world_ranks)})")
        bufs = [_wire(x).copy() for x in xs]
        at = g.world_ranks.index(root)

        def work(comm):
            for b in bufs:
                comm.Bcast(b, root=at)
        self._run(group, "Broadcast", work)
        return [b.astype(x.dtype, copy=False).reshape(np.shape(x)) for b, x in zip(bufs, xs)]

    def barrier(self, group):
        self._run(group, "Barrier", lambda comm: comm.Barrier())

    def start_all_reduce(self, arrays, op, group, bucket) -> int:
        total = sum(a.size for a in arrays)
        dtype = np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32
        buf = self.buffers.get(bucket)
        if buf is None or buf.size != total or buf.dtype != dtype:
            buf = self.buffers[bucket] = np.empty(total, dtype)
        offset = 0
        for a in arrays:
            buf[offset:offset + a.size] = a.reshape(-1)
            offset += a.size
        mpi_op = _mpi_op(self.MPI, op)
        job = self._submit(group, f"AllReduce({op}) of bucket {bucket}",
                           lambda comm: comm.Allreduce(self.MPI.IN_PLACE, buf, op=mpi_op), bucket)
        handle = next(self._handles)
        self.pending[handle] = (job, buf, [(a.shape, a.dtype) for a in arrays])
        return handle

    def wait_all_reduce(self, handle, group, bucket) -> list:
        try:
            job, buf, layout = self.pending.pop(handle)
        except KeyError:
            raise CommunicationError(unknown_token(handle, bucket)) from None
        self._wait(job)
        out, offset = [], 0
        for shape, dtype in layout:
            n = int(np.prod(shape, dtype=np.int64))
            out.append(buf[offset:offset + n].reshape(shape).astype(dtype))   # a copy: the buffer is reused
            offset += n
        return out

    # -- jobs -----------------------------------------------------------------------------------------------
    def _run(self, group, what, work):
        job = self._submit(group, what, work)
        return self._wait(job)

    def _submit(self, group_name, what, work, bucket="") -> Job:
        if self.broken:
            raise CommunicationError(f"{what} on group {group_name!r}: the communicator is broken since {self.broken}")
        g = self.group(group_name)
        g.entered += 1
        job = Job(f"{what} #{g.entered} on group {group_name!r}", g, g.entered, work, bucket,
                  submitted=time.perf_counter())
        self._jobs.put(job)
        return job

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job.started = time.perf_counter()
            try:
                job.result = job.work(job.group.comm)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                job.error = e
            job.finished = time.perf_counter()
            job.work = None   # its closure holds the collective's arrays; the timeline keeps only the times
            self.spans.append(job)
            job.done.set()

    def _wait(self, job: Job):
        began = time.perf_counter()
        deadline = time.monotonic() + self.timeout
        self._waiting = job
        try:
            while not job.done.wait(POLL):
                self._answer_questions()
                if time.monotonic() > deadline:
                    self.broken = f"{job.label} timed out"
                    raise self._timed_out(job)
        finally:
            self._waiting = None
            job.waited = (began, time.perf_counter())
        if job.error is not None:
            self.broken = f"{job.label} failed"
            raise CommunicationError(f"{job.label} failed: {type(job.error).__name__}: {job.error}") from job.error
        return job.result

    # -- timeout diagnosis ------------------------------------------------------------------------------------
    def _state(self) -> dict:
        """This rank's answer: how many collectives of each group it has entered, and which it waits in."""
        job = self._waiting
        return {"rank": self.rank, "names": {name: g.entered for name, g in self.groups.items()},
                "waiting": None if job is None else job.label}

    def _answer_questions(self) -> None:
        if not self.threads_ok:
            return
        status = self.MPI.Status()
        while self.questions.iprobe(source=self.MPI.ANY_SOURCE, tag=QUERY, status=status):
            source = status.Get_source()
            self.questions.recv(source=source, tag=QUERY)
            self.questions.send(self._state(), dest=source, tag=ANSWER)

    def _timed_out(self, job: Job) -> CollectiveTimeoutError:
        others = [r for r in job.group.world_ranks if r != self.rank]
        head = (f"{job.label} waited {self.timeout:g} s (the collective timeout: GRAPHKERNEL_COMM_TIMEOUT or "
                "HCCL_EXEC_TIMEOUT seconds)")
        if not self.threads_ok:
            return CollectiveTimeoutError(f"{head}; which of ranks {others} did not arrive is unknown (the MPI "
                                          "library gives no MPI_THREAD_MULTIPLE to ask them)")
        for r in others:
            self.questions.send(job.sequence, dest=r, tag=QUERY)
        answers: dict[int, dict] = {}
        status = self.MPI.Status()
        until = time.monotonic() + GRACE
        while time.monotonic() < until and len(answers) < len(others):
            self._answer_questions()   # they may be asking us too
            if self.questions.iprobe(source=self.MPI.ANY_SOURCE, tag=ANSWER, status=status):
                answers[status.Get_source()] = self.questions.recv(source=status.Get_source(), tag=ANSWER)
            else:
                time.sleep(0.01)
        missing, notes = [], []
        name = next(n for n, g in self.groups.items() if g is job.group)
        for r in others:
            a = answers.get(r)
            if a is None:
                missing.append(r)
                notes.append(f"rank {r} is in no collective (computing, stopped or gone)")
            elif a["names"].get(name, 0) < job.sequence:
                missing.append(r)
                notes.append(f"rank {r} has entered {a['names'].get(name, 0)} collectives of this group"
                             + (f" and waits in {a['waiting']}" if a["waiting"] else ""))
        if not missing:
            return CollectiveTimeoutError(f"{head}; every rank of the group has arrived, the transfer itself "
                                          "did not finish")
        return CollectiveTimeoutError(f"{head}; rank(s) {missing} did not arrive: {'; '.join(notes)}")

    # -- end ----------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the communicator thread and free the groups (MPI itself stays initialized: mpi4py
        finalizes it at exit)."""
        self._jobs.put(None)
        self._thread.join(timeout=5)
        for name in [n for n, g in self.groups.items() if g is not self.world_group]:
            self.destroy_group(name)
        self.groups.clear()
        if not self._thread.is_alive():   # a collective still in flight keeps its communicator
            self.world.Free()
            self.questions.Free()

    def timeline(self) -> list[Job]:
        """The collectives finished lately, oldest first (the bench and the profiler read their times)."""
        return list(self.spans)
