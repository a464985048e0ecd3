"""MindSpore's `mindspore.common` paths: `graphkernel.common.initializer` (Normal, XavierUniform, ...,
initializer), `graphkernel.common.api.jit` and `set_seed`."""
from graphkernel.common import api, initializer
from graphkernel.seed import get_seed, set_seed

__all__ = ["api", "initializer", "set_seed", "get_seed"]
