"""MindSpore's float-status primitives, with the sticky status of the device they model
(ir/ops/float_status.py):

    status = P.NPUAllocFloatStatus()()                (8,) float32 zeros
    P.NPUClearFloatStatus()(status)                   clears the status: only what runs after it counts
    ... computation (forward, gradients, ...)
    P.NPUGetFloatStatus()(status)                     writes the status into `status` (and returns it):
                                                      ones if an op since the Clear made an inf or a NaN
    overflow = P.ReduceSum()(status, (0,)) > 0
    P.NPUClearFloatStatusV2()(s), P.NPUGetFloatStatusV2()(s)   the same with an (8,) int32 status; the
                                                      V2 Get returns the status and leaves s as it is
    P.FloatStatus()(x)                                [1.0] if x holds an inf or a NaN, else [0.0]

In a trace the Get reads the float values construct made since the last Clear (program order, which
F.depend leaves as it is); run op by op, the Clear arms a check of every later op's results.
"""
from __future__ import annotations

import numpy as np

from ir.graph import Node
from ir.ops import make_node
from ir.ops.float_status import CLEAR_OPS, STATUS_OPS
from graphkernel.assign import assign
from graphkernel.ops.primitive import EAGER_STATUS, Primitive, PrimitiveCallError
from graphkernel.tensor import Parameter, Tensor
from graphkernel.tracing.trace import SymbolicTensor, active_trace


class NPUAllocFloatStatus(Primitive):
    """MindSpore's NPUAllocFloatStatus()(): an (8,) float32 status of zeros."""
    op = "NPUAllocFloatStatus"
    num_tensors = 0


class NPUClearFloatStatus(Primitive):
    """MindSpore's NPUClearFloatStatus()(status): clears the sticky overflow status; returns zeros."""
    op = "NPUClearFloatStatus"

    def __call__(self, status):
        result = super().__call__(status)
        if active_trace() is None:
            EAGER_STATUS.clear()
        return result


class NPUClearFloatStatusV2(NPUClearFloatStatus):
    """MindSpore's NPUClearFloatStatusV2()(status): NPUClearFloatStatus with an (8,) int32 status."""
    op = "NPUClearFloatStatusV2"


def _watched(nodes: list[Node]):
    """The float values made after the last Clear in `nodes` (all of them when there is none)."""
    start = next((k + 1 for k in range(len(nodes) - 1, -1, -1) if nodes[k].op in CLEAR_OPS), 0)
    return [v for n in nodes[start:] if n.op not in ("Const", "Input") and n.op not in STATUS_OPS
            for v in n.outputs if v.dtype.is_float]


class NPUGetFloatStatus(Primitive):
    """MindSpore's NPUGetFloatStatus()(status): the sticky overflow status (ones if an op since the
    last Clear made an inf or a NaN), written into `status` and returned."""
    op = "NPUGetFloatStatus"
    writes_input = True

    def __call__(self, status):
        if not isinstance(status, (Tensor, SymbolicTensor)):
            raise PrimitiveCallError(f"P.{type(self).__name__}: the status must be a Tensor, got "
                                     f"{type(status).__name__}")
        trace = active_trace()
        if trace is not None:
            value = self._value(trace, status)
            node = trace.add(make_node(self.op, (value, *_watched(trace.nodes)), {},
                                       name=trace.scope_name(self.op)))
            result = SymbolicTensor(node.out)
        else:
            super().__call__(status)   # checks the status; its one-op graph watches nothing
            result = Tensor(np.full(status.shape, EAGER_STATUS.overflow, status.dtype.np))
        if self.writes_input:
            self._write(status, result)
        return result

    @staticmethod
    def _value(trace, status):
        if isinstance(status, SymbolicTensor):
            return status.value
        if isinstance(status, Parameter):
            return trace.parameter(status)
        return trace.constant(status.asnumpy())

    @staticmethod
    def _write(status, result) -> None:
        """`status` holds the result from here on: a traced value is rebound, a Parameter assigned, a
        Tensor's array overwritten."""
        if isinstance(status, Parameter):
            assign(status, result)
        elif isinstance(status, SymbolicTensor):
            status.value = result.value
        else:
            np.copyto(status._array, result.asnumpy())


class NPUGetFloatStatusV2(NPUGetFloatStatus):
    """MindSpore's NPUGetFloatStatusV2()(status): the sticky status as an (8,) int32, returned (status
    is left as it is)."""
    op = "NPUGetFloatStatusV2"
    writes_input = False


__all__ = ["NPUAllocFloatStatus", "NPUClearFloatStatus", "NPUClearFloatStatusV2", "NPUGetFloatStatus",
           "NPUGetFloatStatusV2"]
