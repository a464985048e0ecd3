"""MindSpore's `ops`: the primitive classes (`ops.MatMul()`, also `from graphkernel.ops import operations
as P`) and the functional forms (`ops.exp(x)`, `ops.stop_gradient(x)`), both generated from the op table;
`ops.GradOperation` (also `from graphkernel.ops import composite as C; C.GradOperation`), and the
composite-function API `ops.MultitypeFuncGraph`, `ops.HyperMap`, `ops.Map`."""
from graphkernel.ops import composite, extend, functional, operations
from graphkernel.gradients import GradOperation
from graphkernel.ops.clip import clip_by_global_norm, clip_by_norm, clip_by_value
from graphkernel.ops.multitype import HyperMap, Map, MultitypeFuncGraph
from graphkernel.assign import assign, assign_add, assign_sub, depend
from graphkernel.ops.dropout import dropout
from graphkernel.ops.functional import *  # noqa: F401,F403  (ops.exp, ops.add, ...)
from graphkernel.ops.operations import *  # noqa: F401,F403  (ops.MatMul, ops.ReduceSum, ...)

__all__ = ["operations", "functional", "composite", "extend", "GradOperation", "clip_by_global_norm", "clip_by_value",
           "clip_by_norm", "MultitypeFuncGraph", "HyperMap", "Map", "assign",
           "assign_add", "assign_sub", "depend", "dropout", *functional.__all__, *operations.__all__]
