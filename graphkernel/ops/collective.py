"""MindSpore's collective primitives (`mindspore.ops.operations.comm_ops`), over the ops of
ir/ops/collective.py: usable in construct (GRAPH_MODE: nodes of the compiled graph, run between its
device subgraphs) and called on Tensors (PYNATIVE_MODE).

    P.AllReduce(op=ReduceOp.SUM, group=GlobalComm.WORLD_COMM_GROUP)(x)   sum, max, min or prod over the group
    P.AllGather(group=...)(x)                 the members' x concatenated on axis 0, in rank order
    P.ReduceScatter(op=ReduceOp.SUM, group=...)(x)   reduced, then split on axis 0; rank r keeps block r
    P.Broadcast(root_rank, group=...)((x, ...))      a tuple: the root's tensors (root_rank a world rank)
    P.Barrier(group=...)()                    waits for every member of the group

AllGather and ReduceScatter read the group's size when built (MindSpore's rank_size attribute), so
they are built after init(); built before it, or in a process that is a group by itself, the group has
one member. The group of a primitive is checked when it runs (an unknown group is an error naming it).
The gradients are MindSpore's (ir/ops/collective.py).

Barrier has no data to order it: in a graph it reads and writes a hidden token Parameter
(`BARRIER_TOKEN`), which keeps it in the compiled step, in program order with the other Barriers.
"""
from __future__ import annotations

import numpy as np

from ir.errors import GraphKernelError
from ir.ops.collective import REDUCE_OPS
from graphkernel.communication.management import GlobalComm, group_size_or_one
from graphkernel.ops.primitive import Primitive, _run_eager
from graphkernel.tensor import Parameter, Tensor
from graphkernel.tracing.trace import active_trace


class CollectiveError(GraphKernelError, ValueError):
    """A collective primitive built with an unknown reduction or a bad group."""


class ReduceOp:
    """The reductions of AllReduce and ReduceScatter (MindSpore's strings)."""
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"


def _reduce_op(prim: str, op) -> str:
    if op not in REDUCE_OPS:
        raise CollectiveError(f"P.{prim}: op {op!r}; accepted: ReduceOp.SUM, MAX, MIN, PROD "
                              f"({', '.join(map(repr, REDUCE_OPS))})")
    return op


def _group(prim: str, group) -> str:
    if group is None:
        return GlobalComm.WORLD_COMM_GROUP
    if not isinstance(group, str) or not group:
        raise CollectiveError(f"P.{prim}: group must be a group name (a string), got {group!r}")
    return group


class AllReduce(Primitive):
    """P.AllReduce(op=ReduceOp.SUM, group=GlobalComm.WORLD_COMM_GROUP)(x)."""
    op = "AllReduce"
    signature = "P.AllReduce(op=ReduceOp.SUM, group=GlobalComm.WORLD_COMM_GROUP)(x)"

    def __init__(self, op=ReduceOp.SUM, group=None):
        self.group = _group("AllReduce", group)
        super().__init__(op=_reduce_op("AllReduce", op), group=self.group)

    def __repr__(self) -> str:
        return f"P.AllReduce(op={self.attrs['op']!r}, group={self.group!r})"


class AllGather(Primitive):
    """P.AllGather(group=GlobalComm.WORLD_COMM_GROUP)(x): rank_size is the group's size when built."""
    op = "AllGather"
    signature = "P.AllGather(group=GlobalComm.WORLD_COMM_GROUP)(x)"

    def __init__(self, group=None):
        self.group = _group("AllGather", group)
        self.rank_size = group_size_or_one(self.group)
        super().__init__(group=self.group, rank_size=self.rank_size)


class ReduceScatter(Primitive):
    """P.ReduceScatter(op=ReduceOp.SUM, group=GlobalComm.WORLD_COMM_GROUP)(x)."""
    op = "ReduceScatter"
    signature = "P.ReduceScatter(op=ReduceOp.SUM, group=GlobalComm.WORLD_COMM_GROUP)(x)"

    def __init__(self, op=ReduceOp.SUM, group=None):
        self.group = _group("ReduceScatter", group)
        self.rank_size = group_size_or_one(self.group)
        super().__init__(op=_reduce_op("ReduceScatter", op), group=self.group, rank_size=self.rank_size)


class Broadcast(Primitive):
    """P.Broadcast(root_rank, group=GlobalComm.WORLD_COMM_GROUP)((x, ...)) -> a tuple."""
    op = "Broadcast"
    signature = "P.Broadcast(root_rank, group=GlobalComm.WORLD_COMM_GROUP)((x, ...))"
    packed = True

    def __init__(self, root_rank, group=None):
        if isinstance(root_rank, bool) or not isinstance(root_rank, int) or root_rank < 0:
            raise CollectiveError(f"P.Broadcast: root_rank must be a world rank (an int), got {root_rank!r}")
        self.root_rank, self.group = root_rank, _group("Broadcast", group)
        super().__init__(root_rank=root_rank, group=self.group)

    def __call__(self, *args, **kwargs):
        result = super().__call__(*args, **kwargs)
        return result if isinstance(result, tuple) else (result,)


BARRIER_TOKEN = Parameter(np.zeros(1, np.int32), name="graphkernel.barrier_token", requires_grad=False)


class Barrier(Primitive):
    """P.Barrier(group=GlobalComm.WORLD_COMM_GROUP)(): returns when every member has called it."""
    op = "Barrier"
    signature = "P.Barrier(group=GlobalComm.WORLD_COMM_GROUP)()"

    def __init__(self, group=None):
        self.group = _group("Barrier", group)
        super().__init__(group=self.group)

    def __call__(self):
        trace = active_trace()
        if trace is None:
            return _run_eager(self, [Tensor(BARRIER_TOKEN.asnumpy())], dict(self.attrs))
        out = self._emit(trace, [BARRIER_TOKEN], dict(self.attrs))
        trace.assign(BARRIER_TOKEN, out.value)
        return out


__all__ = ["ReduceOp", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Barrier", "CollectiveError"]
