"""MindSpore's `mindspore.common.parameter` path of `Parameter` and `ParameterTuple`."""
from graphkernel.tensor import Parameter, ParameterTuple

__all__ = ["Parameter", "ParameterTuple"]
