"""MindSpore's `mindspore.common.tensor` path of `Tensor`."""
from graphkernel.tensor import Tensor

__all__ = ["Tensor"]
