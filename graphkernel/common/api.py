"""MindSpore's `mindspore.common.api` path of `jit` (2.x scripts import it from there too)."""
from graphkernel.gradients import jit

__all__ = ["jit"]
