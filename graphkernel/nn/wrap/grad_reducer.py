"""MindSpore's `DistributedGradReducer(parameters, mean=None, degree=None, fusion_type=1, group=...)`
(`mindspore.nn.wrap.grad_reducer`): the gradients summed over the data-parallel group, times 1/degree
when `mean` (mean None: `gradients_mean` of the auto-parallel context; degree None: the group's size),
each cast to float32 for the transfer and back to its own dtype after, as MindSpore's does.

Buckets. The gradients travel in buckets, each one AllReduce of one flat buffer:

    all_reduce_fusion_config=[i, j, ...]   Parameters [0, i), [i, j), ..., [last, n): MindSpore's split
    otherwise                              consecutive Parameters up to BUCKET_BYTES (25 MB) of float32

A backward produces the last Parameters' gradients first, so the buckets are traced in reverse
(the last Parameters' bucket is bucket 0). Each is an AllReduceStart of its gradients (they are packed
into the bucket's persistent buffer and its AllReduce starts on the communicator's thread) and an
AllReduceWait (ir/ops/collective.py); in a compiled step the communication schedule
(graphkernel/passes/comm_schedule.py) moves the Start to just after the bucket's last gradient and the
Wait to just before the first kernel reading a reduced gradient, so the transfer of bucket k overlaps
the backward of the layers before it. Called on Tensors (PYNATIVE_MODE) the buckets start and are
waited for in turn.

In a group of one (no launcher, or one rank) with degree 1 the reducer gives the gradients back as
they are (nothing to reduce, 1/1 = 1).

parameter_broadcast=True (auto-parallel context): building the reducer sends rank 0's values of its
Parameters to every rank, so every rank starts from rank 0's initialization (the train cells build
one under DATA_PARALLEL; a MindSpore 2.x script builds it itself).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ir.dtypes import DType
from ir.errors import GraphKernelError
from graphkernel.cell import Cell
from graphkernel.communication.management import GlobalComm, engine, group_size_or_one
from graphkernel.communication.parallel_context import get_auto_parallel_context
from graphkernel.ops import operations as P
from graphkernel.ops.primitive import Primitive
from graphkernel.tensor import Tensor

BUCKET_BYTES = 25 * 2 ** 20


class TrainCellError(GraphKernelError, TypeError):
    """A train cell (or its gradient reducer) built from arguments MindSpore refuses."""


_reducers = itertools.count()   # reducer k names its buckets "r<k>b<j>": the same on every rank


class Bucket:
    """Which gradients (indices into the parameters) one AllReduce carries, and its two primitives."""

    def __init__(self, name: str, indices: list[int], parameters: list, group: str):
        self.name, self.indices = name, indices
        wide = any(parameters[i].dtype == DType.float64 for i in indices)
        self.dtype = DType.float64 if wide else DType.float32
        self.nbytes = sum(math.prod(parameters[i].shape) for i in indices) * self.dtype.itemsize
        self.start = _Start(len(indices), group=group, bucket=name)
        self.wait = _Wait(group=group, bucket=name, shapes=[tuple(parameters[i].shape) for i in indices],
                          dtypes=[self.dtype] * len(indices))


class _Start(Primitive):
    op = "AllReduceStart"

    def __init__(self, count: int, **attrs):
        super().__init__(op="sum", **attrs)
        self.num_tensors = count


class _Wait(Primitive):
    op = "AllReduceWait"


def split(parameters: list, indices=None, bucket_bytes: int = BUCKET_BYTES) -> list[list[int]]:
    """The buckets' Parameter indices, in the order the backward completes them (the last Parameters first).
    `indices`: all_reduce_fusion_config's split points; empty or None: by size."""
    n = len(parameters)
    if indices:
        bounds = [0] + [i for i in indices if 0 < i < n] + [n]
        ranges = [list(range(a, b)) for a, b in zip(bounds, bounds[1:]) if b > a]
        return ranges[::-1]
    buckets, current, size = [], [], 0
    for i in reversed(range(n)):
        nbytes = math.prod(parameters[i].shape) * 4
        if current and size + nbytes > bucket_bytes:
            buckets.append(current[::-1])
            current, size = [], 0
        current.append(i)
        size += nbytes
    if current:
        buckets.append(current[::-1])
    return buckets


def broadcast_parameters(parameters, root: int = 0, group: str | None = None) -> None:
    """Every rank's Parameters take the values of rank `root`'s (parameter_broadcast)."""
    comm = engine()
    if comm is None:
        return
    group = group or GlobalComm.WORLD_COMM_GROUP
    params = list(parameters)
    values = comm.broadcast([p.asnumpy() for p in params], root, group)
    for p, v in zip(params, values):
        p.set_data(Tensor(np.asarray(v, p.dtype.np)))


class DistributedGradReducer(Cell):
    def __init__(self, parameters, mean=None, degree=None, fusion_type=1, group=None):
        super().__init__(auto_prefix=False)
        self.group = GlobalComm.WORLD_COMM_GROUP if group is None else group
        self.mean = get_auto_parallel_context("gradients_mean") if mean is None else bool(mean)
        if degree is not None and (isinstance(degree, bool) or not isinstance(degree, int) or degree < 1):
            raise TrainCellError(f"DistributedGradReducer: degree must be a positive int, got {degree!r}")
        self.group_size = group_size_or_one(self.group)
        self.degree = self.group_size if degree is None else degree
        self.fusion_type = fusion_type
        self.parameters = list(parameters)
        self.parameter_count = len(self.parameters)
        self.reduces = self.group_size > 1
        self.split_indices = list(get_auto_parallel_context("all_reduce_fusion_config"))
        self.split_fusion = bool(self.split_indices)
        prefix = f"r{next(_reducers)}b"
        self.buckets = [Bucket(f"{prefix}{k}", ids, self.parameters, self.group)
                        for k, ids in enumerate(split(self.parameters, self.split_indices))]
        self.scale = Tensor(np.array(1.0 / self.degree, np.float32))
        if get_auto_parallel_context("parameter_broadcast") and self.reduces:
            broadcast_parameters(self.parameters, 0, self.group)

    def construct(self, grads):
        grads = tuple(grads)
        if len(grads) != self.parameter_count:
            raise TrainCellError(f"DistributedGradReducer: {len(grads)} gradients for {self.parameter_count} "
                                 "Parameters (the reducer was built with the optimizer's Parameters)")
        if not self.reduces and self.degree == 1:
            return grads
        out = list(grads)
        for bucket in self.buckets:
            if self.reduces:
                token = bucket.start(*[grads[i] for i in bucket.indices])
                reduced = bucket.wait(token)
                reduced = reduced if isinstance(reduced, tuple) else (reduced,)
            else:
                reduced = [P.Cast()(grads[i], bucket.dtype) for i in bucket.indices]
            for i, r in zip(bucket.indices, reduced):
                if self.mean:
                    r = r * P.Cast()(self.scale, r.dtype)
                out[i] = r if r.dtype == grads[i].dtype else P.Cast()(r, grads[i].dtype)
        return tuple(out)

    def __call__(self, grads):
        """Inside a traced construct: its nodes join the caller's graph; called on Tensors (PYNATIVE_MODE,
        or a MindSpore 2.x script's un-jitted step): the buckets run op by op."""
        return self.construct(grads)

    def bucket_sizes(self) -> list[tuple[str, int, int]]:
        """(name, Parameters, bytes) of each bucket, in the order they are reduced."""
        return [(b.name, len(b.indices), b.nbytes) for b in self.buckets]

    def __repr__(self) -> str:
        return (f"DistributedGradReducer({self.parameter_count} Parameters, mean={self.mean}, degree={self.degree}, "
                f"{len(self.buckets)} bucket(s))")
