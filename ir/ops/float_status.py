"""The overflow status a loss-scale cell reads: MindSpore's float-status primitives.

    FloatStatus(x) -> (1,) float32            1 if x holds an inf or a NaN, else 0
    NPUAllocFloatStatus() -> (8,) float32     a status buffer, zeros
    NPUClearFloatStatus(status) -> zeros      (8,) float32; V2: (8,) int32
    NPUGetFloatStatus(status, *watched) -> (8,), every element 1 if any watched value holds an inf or
                                             a NaN, else 0 (float32; V2: int32)

The status is sticky: it is set by any op producing an inf or a NaN after the last Clear and before
the Get. That order is program order, the order construct runs in (F.depend orders nothing a Python
trace does not order already): the Get primitive (graphkernel/ops/float_status.py) passes as its
`watched` inputs every float value the trace made since the last Clear, a gradient counting by its
results. So a graph with no Get checks nothing, and one with a Get checks each watched value once,
with reductions that fuse into the kernels producing them (graphkernel/expanders/float_status.py):
no kernel makes a pass over its outputs of its own.
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType, is_float_array
from ir.errors import DTypeError, ShapeError
from ir.graph import TensorType
from ir.ops.composite import composite
from ir.ops.registry import Api, Precision

STATUS = Precision("black", True, "an overflow status")
CLEAR_OPS = ("NPUClearFloatStatus", "NPUClearFloatStatusV2")
GET_OPS = ("NPUGetFloatStatus", "NPUGetFloatStatusV2")
STATUS_OPS = ("NPUAllocFloatStatus", *CLEAR_OPS, *GET_OPS)


def overflowed(arrays) -> bool:
    return any(is_float_array(a) and not np.isfinite(a).all() for a in arrays)


def _float_status_infer(types, attrs):
    if not types[0].dtype.is_float:
        raise DTypeError(f"x must be float16 or float32, got {types[0].dtype}")
    return (TensorType((1,), DType.float32),)


composite("FloatStatus", 1, _float_status_infer,
          lambda a, attrs: np.array([float(overflowed(a))], np.float32), precision=STATUS,
          doc="[1.0] if x holds an inf or a NaN, else [0.0]", api=Api(inputs=("x",)))

composite("NPUAllocFloatStatus", 0, lambda types, attrs: (TensorType((8,), DType.float32),),
          lambda a, attrs: np.zeros(8, np.float32), precision=STATUS, doc="an (8,) float32 status, zeros",
          api=Api(primitive=False))   # P.NPUAllocFloatStatus: graphkernel/ops/float_status.py


def _status(dtype: DType):
    def infer(types, attrs):
        status = types[0]
        if status.shape != (8,) or status.dtype != dtype:
            raise ShapeError(f"the status must be an (8,) {dtype} tensor, got {status}")
        for t in types[1:]:
            if not t.dtype.is_float:
                raise DTypeError(f"a watched value must be a float tensor, got {t}")
        return (status,)
    return infer


for _v, _dtype in (("", DType.float32), ("V2", DType.int32)):
    composite(f"NPUClearFloatStatus{_v}", 1, _status(_dtype), lambda a, attrs: np.zeros_like(a[0]), precision=STATUS,
              doc="clears the sticky overflow status; zeros", api=Api(primitive=False))
    composite(f"NPUGetFloatStatus{_v}", None, _status(_dtype),
              lambda a, attrs: np.full_like(a[0], overflowed(a[1:])), precision=STATUS,
              doc="the sticky overflow status: ones if a value made since the last Clear holds an inf or NaN",
              api=Api(primitive=False))
