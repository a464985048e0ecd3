"""MindSpore's `mindspore.common` paths: `graphkernel.common.initializer` (Normal, XavierUniform, ...,
initializer) and `set_seed`."""
from graphkernel.common import initializer
from graphkernel.seed import get_seed, set_seed

__all__ = ["initializer", "set_seed", "get_seed"]
