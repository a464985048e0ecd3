"""MindSpore's `mindspore.common` paths: `common.dtype` (with `dtype_to_nptype`), `common.initializer`,
`common.parameter` (Parameter, ParameterTuple), `common.tensor` (Tensor), `common.api.jit`, `set_seed`."""
from graphkernel.common import api, dtype, initializer, parameter, tensor
from graphkernel.settings.seed import get_seed, set_seed
from graphkernel.tensor import Parameter, ParameterTuple, Tensor

__all__ = ["api", "dtype", "initializer", "parameter", "tensor", "Parameter", "ParameterTuple", "Tensor",
           "set_seed", "get_seed"]
