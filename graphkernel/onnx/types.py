"""What ONNX's types and tensors mean to graphkernel, and the errors of the ONNX frontend.

    onnx elem type FLOAT, FLOAT16, BFLOAT16, DOUBLE,           ->  our DTypes of the same names
      INT8/16/32/64, UINT8/16/32/64, BOOL,
      INT4, UINT4, INT2, UINT2, FLOAT4E2M1                        (the 4- and 2-bit ones, float4_e2m1fn
                                                                  for FLOAT4E2M1, storage dtypes: Cast,
                                                                  Q/DQ and data movement only)
    any other type (FLOAT8*, FLOAT8E8M0, STRING, ...)          ->  OnnxImportError naming the tensor
    TensorProto                                               ->  a numpy array (to_array), its declared
                                                                  dims checked against the memory limit
                                                                  first; a sub-byte type unpacked, one
                                                                  element a byte (numpy_helper's ml_dtypes)
    a graph input's declared dims                             ->  ints, or names/None when dynamic
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.errors import GraphKernelError
from ir.limits import check_shape
from graphkernel.context import max_device_memory


class OnnxImportError(GraphKernelError, ValueError):
    """An ONNX model graphkernel cannot load: unreadable, invalid, or using an op or type we lack."""


class OnnxInputError(GraphKernelError, TypeError):
    """Inputs given to an ONNX model that do not match what the model declares."""


# TensorProto.DataType numbers
_DTYPES = {1: DType.float32, 10: DType.float16, 16: DType.bfloat16, 11: DType.float64, 3: DType.int8,
           5: DType.int16, 6: DType.int32, 7: DType.int64, 2: DType.uint8, 4: DType.uint16, 12: DType.uint32,
           13: DType.uint64, 22: DType.int4, 21: DType.uint4, 26: DType.int2, 25: DType.uint2, 23: DType.float4_e2m1fn,
           9: DType.bool}
_ONNX_OF = {d: t for t, d in _DTYPES.items()}


def type_name(elem_type: int) -> str:
    from onnx import TensorProto
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type #{elem_type}"


def supported_types() -> str:
    return ", ".join(type_name(t) for t in _DTYPES)


def to_dtype(elem_type: int, what: str) -> DType:
    """Our DType for an ONNX element type; `what` names the tensor for the error message."""
    if elem_type in _DTYPES:
        return _DTYPES[elem_type]
    raise OnnxImportError(f"{what} has element type {type_name(elem_type)}, which graphkernel does not "
                          f"support (supported: {supported_types()})")


def to_onnx_type(dtype: DType) -> int:
    return _ONNX_OF[dtype]


def to_array(tensor, what: str, base_dir: str | None = None) -> np.ndarray:
    """A TensorProto's values as a numpy array of one of our dtypes."""
    from onnx import numpy_helper
    dtype = to_dtype(tensor.data_type, what)
    check_shape(tensor.dims, dtype, max_device_memory(), what)  # before its data is read or expanded
    try:
        arr = numpy_helper.to_array(tensor, base_dir or "")
    except Exception as e:  # protobuf and external-data failures: say which tensor
        raise OnnxImportError(f"{what}: cannot read its data ({type(e).__name__}: {e})") from None
    return np.asarray(arr, dtype=dtype.np)


def declared_dims(value_info, what: str) -> tuple[DType, tuple]:
    """The dtype and dims of a graph input: each dim an int, a dim_param name, or None (unknown)."""
    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise OnnxImportError(f"{what} is a {kind or 'typeless value'}, not a tensor; graphkernel takes "
                              "tensor inputs and outputs only")
    tt = value_info.type.tensor_type
    dtype = to_dtype(tt.elem_type, what)
    if not tt.HasField("shape"):
        return dtype, None
    dims = []
    for d in tt.shape.dim:
        which = d.WhichOneof("value")
        dims.append(d.dim_value if which == "dim_value" else d.dim_param if which == "dim_param" else None)
    return dtype, tuple(dims)


def format_dims(dims) -> str:
    if dims is None:
        return "[?]"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
