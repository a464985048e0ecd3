"""What a Cell call may pass, as MindSpore 2.10's GRAPH_MODE treats it (checked against it on the CPU):

    Tensor, Parameter       a run-time input of the compiled graph
    tuple, list, dict       nested as deep as wanted; each Tensor in them a run-time input, the rest
                            constants; construct receives the same structure (a dict keeps its keys)
    bool, int, float, str,  a constant of the compiled graph, part of its compile key (`net(x, 1)` and
    None, complex, bytes,   `net(x, 2)` compile once each; 1, 1.0 and True are three constants, and so
    a dtype, slice, ...,    are 0.0 and -0.0); a numpy scalar is its Python number (np.float32(1.5) is
    range, set              1.5), as MindSpore converts it
    numpy array             a constant: construct receives the array (keyed by its bytes)
    any other object        passed as it is (a Cell or a function construct calls, an object whose
                            attributes it reads), keyed by its identity
    ms.mutable(v)           a run-time value instead: a 0-d Tensor input (int64, float32 or bool, as
                            MindSpore makes a mutable scalar), one compile for every value

Refused with MindSpore's reason: an int outside int64 (MindSpore: "Unable to cast Python instance of type
<class 'int'> to C++ type 'long'"); a function or Cell returned from construct ("Function in output is
not supported", graphkernel/cell.py).

`signature(args)` is the hashable key part of a call's arguments, `graph_inputs(args)` the Tensors the
compiled graph takes (in the order the arguments hold them), `trace_arguments(args, make_input)` what
construct receives while it is traced (constants as they are, Tensors as symbolic inputs).
"""
from __future__ import annotations

import hashlib

import numpy as np

from ir.errors import GraphKernelError
from graphkernel.tensor import Tensor


class ArgumentError(GraphKernelError, TypeError):
    """A Cell argument MindSpore refuses too, or a bad `mutable`."""


_MUTABLE_DTYPES = {bool: np.bool_, int: np.int64, float: np.float32}
_INT64 = (-(1 << 63), (1 << 63) - 1)
_CONSTANTS = (bool, int, float, complex, str, bytes, type(None), slice, range, type(Ellipsis))


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


class _Identity:
    """An object in a compile key by its identity (it is held, so its id is never reused meanwhile)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.obj is self.obj


def python_value(x):
    """A numpy scalar as the Python number MindSpore makes of it; anything else as it is."""
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.complexfloating):
        return complex(x)
    return x


def is_constant(x) -> bool:
    """A Python value with no Tensor in it (a constant of the compiled graph)."""
    x = python_value(x)
    if isinstance(x, (tuple, list)):
        return all(is_constant(item) for item in x)
    if isinstance(x, dict):
        return all(is_constant(v) for v in x.values())
    return not isinstance(x, (Tensor, Mutable))


def check(cls: str, i: int, a) -> None:
    """Raise naming argument `i` of Cell `cls` where MindSpore 2.10 refuses it."""
    a = python_value(a)
    if isinstance(a, Tensor) and a.is_declaration:
        raise ArgumentError(f"{cls}: argument {i} is a Tensor declaring the shape {list(a.shape)}, which holds no "
                            "data: declare shapes with set_inputs, call with Tensors of data")
    if isinstance(a, int) and not isinstance(a, bool) and not _INT64[0] <= a <= _INT64[1]:
        raise ArgumentError(f"{cls}: argument {i} is the int {a}, outside int64: MindSpore cannot take it either "
                            "(\"Unable to cast Python instance of type <class 'int'> to C++ type 'long'\"); "
                            "pass a float or a Tensor")
    if isinstance(a, (tuple, list)):
        for item in a:
            check(cls, i, item)
    elif isinstance(a, dict):
        for item in a.values():
            check(cls, i, item)


def _key(x):
    """The compile-key part of one argument."""
    x = python_value(x)
    if isinstance(x, Tensor):
        return ("tensor", x.shape, x._dtype)
    if isinstance(x, Mutable):
        return ("mutable", _mutable_shape(x.value), tuple((t.shape, t._dtype) for t in x.tensors))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(_key(item) for item in x))
    if isinstance(x, dict):
        return ("dict", tuple((_key(k), _key(v)) for k, v in x.items()))
    if isinstance(x, float):
        return ("float", x.hex())   # 0.0 and -0.0 are two constants; a NaN equals itself here
    if isinstance(x, complex):
        return ("complex", x.real.hex(), x.imag.hex())
    if isinstance(x, slice):
        return ("slice", _key(x.start), _key(x.stop), _key(x.step))
    if isinstance(x, _CONSTANTS):
        return (type(x).__name__, x)   # the type too: 1, 1.0 and True are three constants
    if isinstance(x, (set, frozenset)):
        return (type(x).__name__, frozenset(_key(item) for item in x))
    if isinstance(x, np.ndarray):
        return ("ndarray", x.shape, x.dtype.str, hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest())
    try:
        hash(x)
    except TypeError:
        return ("object", _Identity(x))
    # a dtype, a type: by value; a Cell, a function, an object: by identity (their default hash)
    return ("object", x) if type(x).__hash__ is not object.__hash__ else ("object", _Identity(x))


def signature(args) -> tuple:
    """The compile-key part of a call's arguments."""
    return tuple(_key(a) for a in args)


def _mutable_shape(value):
    if isinstance(value, (tuple, list)):
        return type(value), tuple(_mutable_shape(item) for item in value)
    return None


def _walk(x, on_tensor, on_mutable):
    """`x` rebuilt with each Tensor replaced by on_tensor(t), each mutable by on_mutable(m), numpy
    scalars by Python numbers; other values kept."""
    x = python_value(x)
    if isinstance(x, Tensor):
        return on_tensor(x)
    if isinstance(x, Mutable):
        return on_mutable(x)
    if isinstance(x, (tuple, list)):
        return type(x)(_walk(item, on_tensor, on_mutable) for item in x)
    if isinstance(x, dict):
        return {k: _walk(v, on_tensor, on_mutable) for k, v in x.items()}
    return x


def graph_inputs(args) -> list[Tensor]:
    """The Tensors the compiled graph takes for `args`, in order: Tensors wherever they are nested and
    mutables' values; constants left out."""
    out: list[Tensor] = []

    def tensor(t):
        out.append(t)

    def mut(m):
        out.extend(m.tensors)
    for a in args:
        _walk(a, tensor, mut)
    return out


def trace_arguments(args, make_input) -> list:
    """What construct receives while traced: `make_input(tensor, i)` for each graph input (`i` the
    argument it comes from), tuples, lists, dicts and a mutable's structure rebuilt around them, a
    constant as it is."""
    out = []
    for i, a in enumerate(args):
        def mut(m, i=i):
            return _rebuild(m.value, iter([make_input(t, i) for t in m.tensors]))
        out.append(_walk(a, lambda t, i=i: make_input(t, i), mut))
    return out


def _rebuild(value, it):
    if isinstance(value, (tuple, list)):
        return type(value)(_rebuild(item, it) for item in value)
    return next(it)


def eager_arguments(args) -> list:
    """What construct receives in PYNATIVE_MODE: a mutable's Tensors in its structure, numpy scalars as
    Python numbers."""
    return [_walk(a, lambda t: t, rebuild_mutable) for a in args]


def rebuild_mutable(m: Mutable):
    return _rebuild(m.value, iter(m.tensors))
