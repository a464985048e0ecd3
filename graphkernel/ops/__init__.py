"""MindSpore's `ops`: the primitive classes (`ops.MatMul()`, also `from graphkernel.ops import operations
as P`) and the functional forms (`ops.exp(x)`), both generated from the op table."""
from graphkernel.ops import functional, operations
from graphkernel.ops.functional import *  # noqa: F401,F403  (ops.exp, ops.add, ...)
from graphkernel.ops.operations import *  # noqa: F401,F403  (ops.MatMul, ops.ReduceSum, ...)

__all__ = ["operations", "functional", *functional.__all__, *operations.__all__]
