"""Writing Parameters: `ops.assign(variable, value)`, `ops.assign_add`, `ops.assign_sub` and
`ops.depend(value, expr)`, with the primitive classes `P.Assign`, `P.AssignAdd`, `P.AssignSub`,
`P.Depend`, as MindSpore has them.

In GRAPH_MODE an assign is a side effect of the compiled call, in program order: later reads of the
Parameter in construct see the new value, an assign whose result is unused still happens, and the call
writes the final value into the Parameter's own storage after every reader of the old one has run (one
Assign node per Parameter at the end of the graph: ir/ops/state.py, kernels/lower.py). In PYNATIVE_MODE
it writes at once. `depend(value, expr)` is `value`: an assign inside `expr` happens either way.
"""
from __future__ import annotations

import math

import numpy as np

from ir.errors import GraphKernelError
from graphkernel.tensor import Parameter, Tensor, operations
from graphkernel.tracing.trace import SymbolicTensor, active_trace


class AssignError(GraphKernelError, TypeError):
    """An assign to something that is not a Parameter, or of a value of another shape or dtype."""


def _cast_like(variable, value):
    """`value` as a tensor of the variable's dtype, a one-element value broadcast to its shape."""
    P = operations()
    if isinstance(value, (Tensor, SymbolicTensor)):
        shape = tuple(variable.shape)
        if tuple(value.shape) != shape and math.prod(value.shape) == 1:
            value = P.Reshape()(value, ())
            value = P.BroadcastTo(shape)(value) if shape else value
        return value if value.dtype == variable.dtype else P.Cast()(value, variable.dtype)
    if isinstance(value, (bool, int, float, np.number, np.bool_, np.ndarray, list, tuple)):
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise AssignError(f"assign: Parameter {variable.name} cannot take a {array.dtype} value")
        if array.size != 1 and array.shape != tuple(variable.shape):
            raise AssignError(f"assign: Parameter {variable.name} has shape {list(variable.shape)}, the value "
                              f"{list(array.shape)}")
        return Tensor(np.broadcast_to(array.astype(variable.dtype.np).reshape(array.shape if array.size != 1
                                                                                else ()), variable.shape).copy())
    raise AssignError(f"assign: Parameter {variable.name} cannot take a {type(value).__name__}")


def assign(variable, value):
    """`variable` (a Parameter) takes `value` (same shape; cast to its dtype); returns the new value."""
    if not isinstance(variable, Parameter):
        raise AssignError(f"assign: the variable must be a Parameter, got {type(variable).__name__}")
    value = _cast_like(variable, value)
    if tuple(value.shape) != tuple(variable.shape):
        raise AssignError(f"assign: Parameter {variable.name} has shape {list(variable.shape)}, the value "
                          f"{list(value.shape)}")
    trace = active_trace()
    if trace is not None:
        if isinstance(value, SymbolicTensor):
            v = value.value
        elif isinstance(value, Parameter):
            v = trace.parameter(value)
        else:
            v = trace.constant(value.asnumpy())
        trace.assign(variable, v)
        return SymbolicTensor(trace.parameter(variable))
    if isinstance(value, SymbolicTensor):
        raise AssignError("assign: a traced value outside its trace")
    np.copyto(variable._array, value._array)
    return Tensor._wrap(variable._array.copy())   # the value now, not the Parameter (it changes later)


def assign_add(variable, value):
    """variable += value; returns the new value."""
    return assign(variable, variable + _cast_like(variable, value))


def assign_sub(variable, value):
    """variable -= value; returns the new value."""
    return assign(variable, variable - _cast_like(variable, value))


def depend(value, expr):
    """`value`; `expr` is computed (and its assigns happen) whatever uses `value`."""
    return value


class _StatePrimitive:
    fn = None

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args):
        return type(self).fn(*args)


class Assign(_StatePrimitive):
    """MindSpore's P.Assign()(variable, value)."""
    fn = staticmethod(assign)


class AssignAdd(_StatePrimitive):
    """MindSpore's P.AssignAdd()(variable, value)."""
    fn = staticmethod(assign_add)


class AssignSub(_StatePrimitive):
    """MindSpore's P.AssignSub()(variable, value)."""
    fn = staticmethod(assign_sub)


class Depend(_StatePrimitive):
    """MindSpore's P.Depend()(value, expr)."""
    fn = staticmethod(depend)
