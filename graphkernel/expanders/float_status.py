"""FloatStatus(x) -> [max over x of (not isfinite(x))] as float32; NPUGetFloatStatus(status, *watched)
-> the largest FloatStatus of the watched values broadcast to the status (ir/ops/float_status.py):
each check is an elementwise test and a reduction, which fusion puts into the kernel producing the
value. NPUAllocFloatStatus, NPUClearFloatStatus -> zeros."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.dtypes import DType
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


def _flag(x: Value, b: GraphBuilder) -> Value:
    """A () float32: 1 if x holds an inf or a NaN."""
    if not x.type.size:
        return b.scalar(0, DType.float32)
    bad = b.op("Cast", b.op("LogicalNot", b.op("IsFinite", x)), dtype=DType.float32)
    flag = b.reduce("ReduceMax", bad, tuple(range(x.type.rank))) if x.type.rank else bad
    return flag if flag.shape == () else b.op("Reshape", flag, shape=())


@expands("FloatStatus")
def expand_float_status(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    return (b.op("Reshape", _flag(inputs[0], b), shape=(1,)),)


@expands("NPUGetFloatStatus", "NPUGetFloatStatusV2")
def expand_get_float_status(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    status, *watched = inputs
    flag = b.scalar(0, DType.float32)
    for x in watched:
        flag = b.op("Maximum", flag, _flag(x, b))
    return (b.op("BroadcastTo", b.cast(flag, status.dtype), shape=status.shape),)


@expands("NPUAllocFloatStatus", "NPUClearFloatStatus", "NPUClearFloatStatusV2")
def expand_zeros(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    return (b.fill(0, node.out.type),)
