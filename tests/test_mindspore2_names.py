"""MindSpore 2.x names a script reaches for at the top level: dtype names (those graphkernel has are
its dtypes; the others name themselves in a clear error when used) and the import paths of 2.x."""
import ml_dtypes
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import GraphKernelError, Tensor
from graphkernel import dtype as mstype
from graphkernel.ops import operations as P


@pytest.mark.parametrize("name, np_dtype", [("float16", np.float16), ("float32", np.float32),
                                            ("float64", np.float64), ("int32", np.int32), ("int64", np.int64),
                                            ("bool_", np.bool_), ("int8", np.int8), ("int16", np.int16),
                                            ("uint8", np.uint8), ("uint16", np.uint16), ("uint32", np.uint32),
                                            ("uint64", np.uint64), ("bfloat16", ml_dtypes.bfloat16)])
def test_top_level_dtype_names(name, np_dtype):
    dtype = getattr(ms, name)
    assert dtype is getattr(mstype, name)
    assert Tensor(np.zeros(2), dtype).asnumpy().dtype == np_dtype


@pytest.mark.parametrize("name", ["complex64", "complex128"])
def test_dtype_names_without_a_dtype_here_are_clear_errors(cpu, name):
    dtype = getattr(ms, name, None) or getattr(mstype, name)
    with pytest.raises(GraphKernelError, match=rf"dtype {name} \(MindSpore's mstype.{name}\) is not supported"):
        Tensor(np.zeros(2), dtype)
    with pytest.raises(GraphKernelError, match=rf"Cast .*dtype {name} .*is not supported"):
        P.Cast()(Tensor(np.zeros(2, np.float32)), dtype)
