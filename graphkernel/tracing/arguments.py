"""What a Cell call may pass, as MindSpore's GRAPH_MODE treats it: Tensors, Python constants, `mutable`.

    net(x, 1)               an int (a float, a bool, None, a string, a tuple or list of them) is a
                            constant of the compiled graph: part of the compile key, so each value
                            compiles once (`net(x, 2)` compiles anew, `net(x, 1)` again does not)
    net(x, ms.mutable(1))   a run-time value instead: a 0-d Tensor input (int64, float32 or bool, as
                            MindSpore makes a mutable scalar), one compile for every value

`signature(args)` is the hashable key part of a call's arguments, `graph_inputs(args)` the Tensors the
compiled graph takes (constants left out), `trace_arguments(args, make_input)` what construct receives
while it is traced (constants as they are, Tensors as symbolic inputs).
"""
from __future__ import annotations

import numpy as np

from ir.errors import GraphKernelError
from graphkernel.tensor import Tensor


class ArgumentError(GraphKernelError, TypeError):
    """A Cell argument that is neither a Tensor, a Python constant nor a mutable."""


_SCALARS = (bool, int, float, str, type(None), np.number, np.bool_)
_MUTABLE_DTYPES = {bool: np.bool_, int: np.int64, float: np.float32}


class Mutable:
    """`ms.mutable(value)`: a scalar, a Tensor, or a tuple/list of them passed as a run-time input."""

    def __init__(self, value):
        self.value = value
        self.tensors = _mutable_tensors(value)

    def __repr__(self) -> str:
        return f"mutable({self.value!r})"


def _mutable_tensors(value) -> list[Tensor]:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.number):
        return [Tensor(np.array(value, dtype=_MUTABLE_DTYPES[type(value)]))]
    if isinstance(value, (tuple, list)) and value:
        return [t for item in value for t in _mutable_tensors(item)]
    raise ArgumentError(f"mutable: got a {type(value).__name__}; accepted: a bool, int, float, Tensor, or a "
                        "non-empty tuple or list of them")


def mutable(input_data, dynamic_len: bool = False):
    """MindSpore's `mutable`: pass `input_data` to a compiled Cell as a run-time value, not a constant."""
    if dynamic_len:
        raise ArgumentError("mutable(dynamic_len=True): sequences of a run-time length are not supported; "
                            "pass a tuple of a fixed length")
    return input_data if isinstance(input_data, Mutable) else Mutable(input_data)


def is_constant(x) -> bool:
    if isinstance(x, (tuple, list)):
        return all(is_constant(item) for item in x)
    return isinstance(x, _SCALARS)


def check(cls: str, i: int, a) -> None:
    """Raise naming argument `i` of Cell `cls` unless `a` is something a call can take."""
    if isinstance(a, (Tensor, Mutable)) or is_constant(a):
        return
    hint = " (wrap it: Tensor(array))" if hasattr(a, "__array__") else ""
    raise ArgumentError(f"{cls}: argument {i} is a {type(a).__name__}, not a Tensor{hint}, a Python constant "
                        "(bool, int, float, str, None, or a tuple/list of them) or a mutable")


def _constant_key(x):
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(_constant_key(item) for item in x))
    return (type(x).__name__, x)   # the type too: 1, 1.0 and True are three constants


def signature(args) -> tuple | None:
    """The compile-key part of a call's arguments, or None when one cannot take part in a key."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append((a.shape, a._dtype))
        elif isinstance(a, Mutable):
            out.append(("mutable", _mutable_shape(a.value), tuple((t.shape, t._dtype) for t in a.tensors)))
        elif is_constant(a):
            out.append(("constant", _constant_key(a)))
        else:
            return None
    return tuple(out)


def _mutable_shape(value):
    if isinstance(value, (tuple, list)):
        return type(value), tuple(_mutable_shape(item) for item in value)
    return None


def graph_inputs(args) -> list[Tensor]:
    """The Tensors the compiled graph takes for `args`: Tensors and mutables' values, constants left out."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a)
        elif isinstance(a, Mutable):
            out.extend(a.tensors)
    return out


def trace_arguments(args, make_input) -> list:
    """What construct receives while traced: `make_input(tensor, i)` for each graph input (`i` the
    argument it comes from), a mutable's structure rebuilt around its inputs, a constant as it is."""

    def rebuild(value, it):
        if isinstance(value, (tuple, list)):
            return type(value)(rebuild(item, it) for item in value)
        return next(it)

    out = []
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            out.append(make_input(a, i))
        elif isinstance(a, Mutable):
            out.append(rebuild(a.value, iter([make_input(t, i) for t in a.tensors])))
        else:
            out.append(a)
    return out


def eager_arguments(args) -> list:
    """What construct receives in PYNATIVE_MODE: a mutable's Tensors in its structure."""
    return [rebuild_mutable(a) if isinstance(a, Mutable) else a for a in args]


def rebuild_mutable(m: Mutable):
    it = iter(m.tensors)

    def rebuild(value):
        if isinstance(value, (tuple, list)):
            return type(value)(rebuild(item) for item in value)
        return next(it)
    return rebuild(m.value)
