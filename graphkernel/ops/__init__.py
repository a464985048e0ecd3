"""MindSpore's `ops`: the primitive classes (`ops.MatMul()`, also `from graphkernel.ops import operations
as P`) and the functional forms (`ops.exp(x)`, `ops.stop_gradient(x)`), both generated from the op table;
`ops.GradOperation` (also `from graphkernel.ops import composite as C; C.GradOperation`)."""
from graphkernel.ops import composite, functional, operations
from graphkernel.gradients import GradOperation
from graphkernel.ops.clip import clip_by_global_norm
from graphkernel.assign import assign, assign_add, assign_sub, depend
from graphkernel.ops.dropout import dropout
from graphkernel.ops.functional import *  # noqa: F401,F403  (ops.exp, ops.add, ...)
from graphkernel.ops.operations import *  # noqa: F401,F403  (ops.MatMul, ops.ReduceSum, ...)

__all__ = ["operations", "functional", "composite", "GradOperation", "clip_by_global_norm", "assign",
           "assign_add", "assign_sub", "depend", "dropout", *functional.__all__, *operations.__all__]
