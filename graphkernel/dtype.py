"""MindSpore's dtype names (`from graphkernel import dtype as mstype`; `mstype.float32`, ...).

Each name is the IR's DType itself, so `mstype.float16` can go wherever a dtype is accepted; numpy
dtypes and names are accepted too (`ir.as_dtype`).
"""
from ir.dtypes import DType, as_dtype

float16 = DType.float16
float32 = DType.float32
float64 = DType.float64
int32 = DType.int32
int64 = DType.int64
bool_ = DType.bool

# MindSpore's shorter aliases
half, single, double = float16, float32, float64

__all__ = ["DType", "as_dtype", "float16", "float32", "float64", "int32", "int64", "bool_",
           "half", "single", "double"]
