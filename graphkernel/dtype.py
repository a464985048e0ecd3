"""MindSpore's dtype names (`from graphkernel import dtype as mstype`; `mstype.float32`, ...).

Each name is the IR's DType itself, so `mstype.float16` can go wherever a dtype is accepted; numpy
dtypes and names are accepted too (`ir.as_dtype`).
"""
from ir.dtypes import DType, as_dtype
from ir.errors import DTypeError

float16 = DType.float16
float32 = DType.float32
float64 = DType.float64
int32 = DType.int32
int64 = DType.int64
int8 = DType.int8
int16 = DType.int16
uint8 = DType.uint8
uint16 = DType.uint16
uint32 = DType.uint32
uint64 = DType.uint64
bfloat16 = DType.bfloat16   # computed in float32 and rounded to bfloat16 after every op (ir/dtypes.py)
bool_ = DType.bool

# MindSpore's shorter aliases
half, single, double = float16, float32, float64


class UnsupportedDType:
    """A MindSpore dtype name graphkernel has no dtype for: the name exists (so a 2.x script imports),
    and using it as a dtype (a Tensor's, a Cast's, a Parameter's) raises a DTypeError naming it."""

    def __init__(self, name: str):
        self.name = name

    @property
    def ir_dtype(self):
        raise DTypeError(f"dtype {self.name} (MindSpore's mstype.{self.name}) is not supported by graphkernel; "
                         f"supported: {', '.join(d.value for d in DType)}")

    def __repr__(self) -> str:
        return f"mstype.{self.name} (not supported)"


complex64, complex128 = (UnsupportedDType(n) for n in ("complex64", "complex128"))

__all__ = ["DType", "as_dtype", "float16", "float32", "float64", "int32", "int64", "bool_",
           "half", "single", "double", "int8", "int16", "uint8", "uint16", "uint32", "uint64", "bfloat16",
           "complex64", "complex128"]
