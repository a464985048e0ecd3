"""The tensor element types of the IR.

Ten dtypes, each knowing its numpy dtype and the short name the text form uses (`f32[4,4]`).
`as_dtype` turns whatever a user may write (a DType, a numpy dtype or type, a name) into a DType.

bfloat16 (numpy's dtype from ml_dtypes) is a storage dtype: tensors and Parameters hold it and Cast
converts to and from it, but no op computes in it (`computes` is False; ops other than those that move
or convert data refuse it with a DTypeError saying to Cast it first).
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
    bool = "bool"

    @property
    def np(self) -> np.dtype:
        return _NP[self]

    @property
    def short(self) -> str:
        return _SHORT[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.float16, DType.float32, DType.float64)

    @property
    def is_int(self) -> bool:
        return self in _INTS

    @property
    def computes(self) -> bool:
        """False for a storage dtype (bfloat16): held and converted, never computed in."""
        return self is not DType.bfloat16

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    __hash__ = object.__hash__   # members are singletons compared by identity; Enum's hashes the name in Python

    def __repr__(self) -> str:
        return f"DType.{self.value}"

    def __str__(self) -> str:
        return self.value


_INTS = frozenset({DType.int8, DType.int16, DType.int32, DType.int64, DType.uint8})
_SHORT = {DType.float16: "f16", DType.float32: "f32", DType.float64: "f64", DType.bfloat16: "bf16",
          DType.int8: "i8", DType.int16: "i16", DType.int32: "i32", DType.int64: "i64", DType.uint8: "u8",
          DType.bool: "bool"}
_BY_SHORT = {short: dt for dt, short in _SHORT.items()}
# looked up, not made, on every use: passes ask often
_NP = {dt: np.dtype(ml_dtypes.bfloat16) if dt is DType.bfloat16 else np.dtype(dt.value) for dt in DType}
_ITEMSIZE = {dt: npd.itemsize for dt, npd in _NP.items()}
_BY_NP = {npd: dt for dt, npd in _NP.items()}


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
