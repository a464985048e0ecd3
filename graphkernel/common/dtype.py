"""MindSpore's `mindspore.common.dtype` path (`import mindspore.common.dtype as mstype`): the dtype names
of graphkernel.dtype, and `dtype_to_nptype`."""
import numpy as np

from ir.dtypes import as_dtype
from graphkernel.dtype import *  # noqa: F401,F403
from graphkernel.dtype import __all__ as _names


def dtype_to_nptype(type_):
    """The numpy scalar type of a dtype (`mstype.float16` -> `np.float16`), as MindSpore's."""
    return np.dtype(as_dtype(type_).np).type


__all__ = [*_names, "dtype_to_nptype"]
