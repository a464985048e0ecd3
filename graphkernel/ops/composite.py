"""MindSpore's `ops.composite` (r0.7 scripts: `from graphkernel.ops import composite as C`):
`C.GradOperation`, and the 2.x functions `C.grad`, `C.value_and_grad`."""
from graphkernel.gradients import GradOperation, grad, value_and_grad

__all__ = ["GradOperation", "grad", "value_and_grad"]
