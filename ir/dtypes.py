"""The tensor element types of the IR.

Eighteen dtypes, each knowing its numpy dtype and the short name the text form uses (`f32[4,4]`).
`as_dtype` turns whatever a user may write (a DType, a numpy dtype or type, a name) into a DType.

float16 and bfloat16 (numpy's dtype from ml_dtypes) are the half floats (`is_half`): an op on them
computes in float32 and rounds its result once to the half dtype, as MindSpore's kernels do; sums and
matrix products accumulate in float32 (`wide_np`). numpy sees bfloat16 as a void kind ('V'), not a
float: ask `is_float_array`, never `dtype.kind == "f"`.

int4, uint4, int2, uint2 (ONNX's sub-byte integers) and float4_e2m1fn (ONNX's FLOAT4E2M1: the 4-bit
float of +-0, 0.5, 1, 1.5, 2, 3, 4, 6, without infinities or NaN) are storage dtypes (`computes` is
False; numpy's dtypes from ml_dtypes, one element a byte, the value in its low bits): tensors,
Parameters and constants hold them, the ops that only move data (`moves_data`, and the INJECTIVE ones:
Reshape, Transpose, Slice, Concat, ...) take them, and Cast converts to and from them
(ir/ops/conversions.py says how: to an integer one a value wraps to the type's bits, as a cast between
integers does; to float4_e2m1fn it rounds to nearest even and saturates); any other op is a DTypeError
naming the op and the dtype. `bounds` gives an integer dtype's range. numpy sees bfloat16 and
float4_e2m1fn as a void kind too.
"""
from enum import Enum

import ml_dtypes
import numpy as np

from ir.errors import DTypeError


class DType(Enum):
    float16 = "float16"
    float32 = "float32"
    float64 = "float64"
    bfloat16 = "bfloat16"
    int8 = "int8"
    int16 = "int16"
    int32 = "int32"
    int64 = "int64"
    uint8 = "uint8"
    uint16 = "uint16"
    uint32 = "uint32"
    uint64 = "uint64"
    int4 = "int4"
    uint4 = "uint4"
    int2 = "int2"
    uint2 = "uint2"
    float4_e2m1fn = "float4_e2m1fn"
    bool = "bool"

    @property
    def np(self) -> np.dtype:
        return _NP[self]

    @property
    def short(self) -> str:
        return _SHORT[self]

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_half(self) -> bool:
        """float16 or bfloat16: computed in float32, rounded to the dtype after every op."""
        return self in (DType.float16, DType.bfloat16)

    @property
    def is_int(self) -> bool:
        return self in _INTS

    @property
    def is_unsigned(self) -> bool:
        return self in (DType.uint8, DType.uint16, DType.uint32, DType.uint64, DType.uint4, DType.uint2)

    @property
    def computes(self) -> bool:
        """False for a storage dtype (the sub-byte integers, float4_e2m1fn): held, moved and converted, never
        computed in."""
        return self not in _STORED

    @property
    def bits(self) -> int:
        """The width of a value: 4 for int4, 16 for float16, 8 for bool."""
        return _BITS[self]

    @property
    def bounds(self) -> tuple[int, int]:
        """The smallest and largest value of an integer dtype."""
        return _BOUNDS[self]

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    __hash__ = object.__hash__   # members are singletons compared by identity; Enum's hashes the name in Python

    def __repr__(self) -> str:
        return f"DType.{self.value}"

    def __str__(self) -> str:
        return self.value


_INTS = frozenset({DType.int8, DType.int16, DType.int32, DType.int64, DType.uint8, DType.uint16, DType.uint32,
                   DType.uint64, DType.int4, DType.uint4, DType.int2, DType.uint2})
_STORED = frozenset({DType.int4, DType.uint4, DType.int2, DType.uint2, DType.float4_e2m1fn})
_FLOATS = frozenset({DType.float16, DType.bfloat16, DType.float32, DType.float64, DType.float4_e2m1fn})
_SHORT = {DType.float16: "f16", DType.float32: "f32", DType.float64: "f64", DType.bfloat16: "bf16",
          DType.int8: "i8", DType.int16: "i16", DType.int32: "i32", DType.int64: "i64", DType.uint8: "u8",
          DType.uint16: "u16", DType.uint32: "u32", DType.uint64: "u64", DType.int4: "i4", DType.uint4: "u4",
          DType.int2: "i2", DType.uint2: "u2", DType.float4_e2m1fn: "f4e2m1", DType.bool: "bool"}
_BY_SHORT = {short: dt for dt, short in _SHORT.items()}
# looked up, not made, on every use: passes ask often
_NP = {dt: np.dtype(getattr(ml_dtypes, dt.value)) if dt is DType.bfloat16 or dt in _STORED else np.dtype(dt.value)
       for dt in DType}
_ITEMSIZE = {dt: npd.itemsize for dt, npd in _NP.items()}
_BITS = {dt: {DType.int4: 4, DType.uint4: 4, DType.int2: 2, DType.uint2: 2, DType.float4_e2m1fn: 4}.get(
    dt, 8 * _ITEMSIZE[dt]) for dt in DType}
_BOUNDS = {dt: (int(ml_dtypes.iinfo(_NP[dt]).min), int(ml_dtypes.iinfo(_NP[dt]).max)) for dt in _INTS}
_BY_NP = {npd: dt for dt, npd in _NP.items()}
BFLOAT16_NP = _NP[DType.bfloat16]
FLOAT4_NP = _NP[DType.float4_e2m1fn]
HALF_NP = frozenset({np.dtype(np.float16), BFLOAT16_NP})   # held as uint16 bits by the kernels
STORED_NP = frozenset(_NP[dt] for dt in _STORED)            # held as their uint8 bytes by the kernels


def wide_np(npd) -> np.dtype:
    """The numpy dtype an array of `npd` computes in: float32 for the half floats, else its own."""
    npd = np.dtype(npd)
    return np.dtype(np.float32) if npd in HALF_NP else npd


def widened(a: np.ndarray) -> np.ndarray:
    """`a` as float32 when it holds a half float or a float4_e2m1fn (exact), else `a` itself."""
    return a.astype(np.float32) if a.dtype in HALF_NP or a.dtype == FLOAT4_NP else a


def is_float_array(a) -> bool:
    """Whether a numpy array (or dtype) holds floats, bfloat16 and float4_e2m1fn included (numpy calls
    them kind 'V')."""
    npd = np.dtype(getattr(a, "dtype", a))
    return npd.kind == "f" or npd == BFLOAT16_NP or npd == FLOAT4_NP


def as_dtype(x) -> DType:
    """A DType from a DType, a numpy dtype or scalar type, or a name ('float32', 'f32')."""
    if isinstance(x, DType):
        return x
    dtype = getattr(x, "ir_dtype", None)  # graphkernel's mstype objects carry their DType
    if isinstance(dtype, DType):
        return dtype
    if isinstance(x, str):
        if x in _BY_SHORT:
            return _BY_SHORT[x]
        if x in DType.__members__:
            return DType[x]
    try:
        npd = np.dtype(x)
    except TypeError:
        npd = None
    if npd is not None and npd in _BY_NP:
        return _BY_NP[npd]
    raise DTypeError(f"unsupported dtype {x!r}; supported: {', '.join(d.value for d in DType)}")


def from_short(name: str) -> DType:
    return _BY_SHORT[name]


SHORT_NAMES = tuple(_BY_SHORT)
