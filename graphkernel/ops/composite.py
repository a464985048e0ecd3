"""MindSpore's `ops.composite` (`from graphkernel.ops import composite as C`): `C.GradOperation`,
`C.grad`, `C.value_and_grad`; the composite-function API `C.MultitypeFuncGraph`, `C.HyperMap`, `C.Map`,
`C.add_flags` (graphkernel/ops/multitype.py); `C.clip_by_value`, `C.clip_by_global_norm`."""
from graphkernel.gradients import GradOperation, grad, value_and_grad
from graphkernel.ops.clip import clip_by_global_norm, clip_by_norm, clip_by_value
from graphkernel.ops.multitype import HyperMap, Map, MultitypeFuncGraph, add_flags

__all__ = ["GradOperation", "grad", "value_and_grad", "MultitypeFuncGraph", "HyperMap", "Map", "add_flags",
           "clip_by_value", "clip_by_global_norm", "clip_by_norm"]
