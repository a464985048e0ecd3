"""Tensor (a numpy array with a dtype the IR knows) and Parameter (a named, mutable Tensor of a Cell).

Operators on Tensors (`x + y`, `x * 2.0`, `-x`, `x ** 3`, `x / y`, `x > y`, `x == y`, `x != y`) call the
same primitives as `P.Add` and friends, so they work eagerly and inside a traced `construct` alike;
comparisons give bool tensors. So do MindSpore's Tensor methods (`x.sum(axis=1)`, `x.reshape(2, 3)`,
`x.astype(mstype.float16)`, `x.T`: the op rows' `api.method`) and basic indexing (`x[:, 0]`, `x[..., 1:3]`,
`x[::2]`, `x[None]`: a StridedSlice).
"""
from __future__ import annotations

import difflib
import math

import numpy as np

from ir.dtypes import DType, as_dtype
from ir.errors import GraphKernelError, ShapeError
from ir.limits import ResourceLimitError, check_shape, format_bytes, tensor_bytes
from ir.ops import OPS
from ir.ops.registry import Form
from ir.symbolic import Dim
from graphkernel.context import max_device_memory
from graphkernel.settings.limits import process_memory_limit


# --- making arrays: shapes and memory checked first ----------------------------------------------

def checked_shape(shape, what: str) -> tuple[int, ...]:
    """`shape` (an int, or a sequence of ints) as a tuple of ints >= 0; a ShapeError naming `what`."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        raise ShapeError(f"{what} must be an int or a tuple of ints, got {shape!r}") from None
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise ShapeError(f"{what} must be a tuple of ints, got {shape!r} (holding a {type(d).__name__})")
        if d < 0:
            raise ShapeError(f"{what} {list(map(int, dims))} has a negative dimension ({int(d)}); every "
                             "dimension must be >= 0")
    return tuple(int(d) for d in dims)


def check_new(shape, dtype, what: str) -> None:
    """A ResourceLimitError, before anything is allocated, when a tensor of `shape` and `dtype` would need
    more than max_device_memory (the context key, GRAPHKERNEL_MAX_DEVICE_MEMORY or the machine's memory)
    or more than the process may allocate (its RLIMIT_AS / RLIMIT_DATA)."""
    check_shape(shape, dtype, max_device_memory(), what)
    limit = process_memory_limit()
    if limit is not None and tensor_bytes(shape, dtype) > limit:
        nbytes = tensor_bytes(shape, dtype)
        raise ResourceLimitError(
            f"{what}: {as_dtype(dtype).short}[{','.join(map(str, shape))}] needs {nbytes} bytes "
            f"({format_bytes(nbytes)}), more than this process may allocate: {limit} bytes "
            f"({format_bytes(limit)}, its address-space or data limit: ulimit -v / ulimit -d)")


def out_of_memory(what: str, shape, dtype, error: MemoryError) -> ResourceLimitError:
    """numpy's MemoryError, said as ours: the tensor, its bytes, and that the machine had not got them."""
    nbytes = tensor_bytes(shape, dtype)
    return ResourceLimitError(f"{what}: {as_dtype(dtype).short}[{','.join(map(str, shape))}] needs {nbytes} "
                              f"bytes ({format_bytes(nbytes)}), which this process could not allocate now "
                              f"({error})")


def new_array(shape, dtype, what: str, fill=None) -> np.ndarray:
    """An array of `shape` and `dtype` (empty, or every element `fill`), its shape and size checked
    first (`checked_shape`, `check_new`). Zeros come from the system's zeroed pages (np.zeros), not
    written one by one: an optimizer's moments of a BERT-large are 2.7 GB."""
    shape = checked_shape(shape, f"{what}: shape")
    dtype = as_dtype(dtype).np
    check_new(shape, dtype, what)
    try:
        if fill is None:
            return np.empty(shape, dtype)
        return np.zeros(shape, dtype) if fill == 0 else np.full(shape, fill, dtype)
    except MemoryError as e:
        raise out_of_memory(what, shape, dtype, e) from None


def _to_array(data, dtype) -> np.ndarray:
    if isinstance(data, Tensor):
        data = data.asnumpy()
    if dtype is not None:
        return np.asarray(data, dtype=as_dtype(dtype).np)
    if isinstance(data, (np.ndarray, np.generic)):
        return np.asarray(data)
    if isinstance(data, bool):
        return np.asarray(data, dtype=np.bool_)
    if isinstance(data, int):
        return np.asarray(data, dtype=np.int64)
    if isinstance(data, float):
        return np.asarray(data, dtype=np.float32)
    arr = np.asarray(data)
    if arr.dtype == np.float64 and isinstance(data, (list, tuple)):
        arr = arr.astype(np.float32)  # Python float lists default to float32, as in MindSpore
    return arr


# The primitives behind the operators: graphkernel.ops.operations (P), a layer above the tensors it
# computes on, hands itself over when it is imported (as `import graphkernel` always does).
_operations: list = []


def use_operations(module) -> None:
    """Called once by graphkernel.ops.operations with itself."""
    _operations[:] = [module]


def operations():
    """The module graphkernel.ops.operations (P): the primitives that Tensor operators and methods call."""
    return _operations[0]


class TensorOps:
    """The operator protocol shared by Tensor and the symbolic values of a trace."""

    __array_priority__ = 100  # numpy scalars on the left defer to us

    def _binary(self, op, other, reverse=False):
        P = operations()
        if isinstance(other, np.ndarray):   # an array operand is a constant Tensor (as in MindSpore)
            other = Tensor(other)
        prim = getattr(P, op)()
        return prim(other, self) if reverse else prim(self, other)

    def __add__(self, o): return self._binary("Add", o)
    def __radd__(self, o): return self._binary("Add", o, True)
    def __sub__(self, o): return self._binary("Sub", o)
    def __rsub__(self, o): return self._binary("Sub", o, True)
    def __mul__(self, o): return self._binary("Mul", o)
    def __rmul__(self, o): return self._binary("Mul", o, True)
    def __truediv__(self, o): return self._binary("RealDiv", o)
    def __rtruediv__(self, o): return self._binary("RealDiv", o, True)
    def __pow__(self, o): return self._binary("Pow", o)
    def __rpow__(self, o): return self._binary("Pow", o, True)
    def __gt__(self, o): return self._binary("Greater", o)
    def __lt__(self, o): return self._binary("Less", o)
    def __matmul__(self, o): return self._binary("MatMul", o)

    def __neg__(self):
        P = operations()
        return P.Neg()(self)

    def __abs__(self):
        P = operations()
        return P.Abs()(self)

    # == and != compare element by element, as in MindSpore: a bool tensor (so `if x == 0:` on a traced
    # value is the graph-mode error it must be, not a silent False). Hashing stays by identity.
    def __eq__(self, o):
        return self._binary("Equal", o) if _operand(o) else NotImplemented

    def __ne__(self, o):
        if not _operand(o):
            return NotImplemented
        return self._binary("NotEqual", o)

    __hash__ = object.__hash__

    # x.exp(), x.sum(axis=1), x.reshape(2, 3), x.astype(dtype): the methods named by the `api.method`
    # of each op row (ir/ops), with the parameters its `api.method_args` gives
    def __getattr__(self, name: str):
        op = _METHODS.get(name)
        if op is not None and not name.startswith("_"):
            return _method(self, name, OPS[op])
        if name in _FORMS:
            return _form_method(self, *_FORMS[name])
        known = sorted(set(_METHODS) | set(_FORMS))
        near = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}{hint}; its methods from the "
                             f"op table: {', '.join(known)}")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_METHODS) | set(_FORMS))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def data(self):
        """MindSpore's `Tensor.data`: the tensor's value (this tensor; a Parameter's: its value now)."""
        return self

    def copy(self):
        """MindSpore's `Tensor.copy()`: a tensor of the same values that owns its data (inside a traced
        construct values are immutable: the value itself)."""
        return self

    def transpose(self, *axes):
        """The axes permuted as `axes` (given apart or as one tuple); none: reversed."""
        return _method(self, "transpose", OPS["Transpose"])(*(axes or tuple(reversed(range(len(self.shape))))))

    @property
    def T(self):
        return self.transpose()

    def __getitem__(self, key):
        """Basic indexing, x[1], x[:, 0], x[..., 1:3], x[::2], x[None]: one StridedSlice (a Reshape
        when it only drops or inserts size-1 axes, ir/ops/strided_slice.py)."""
        begin, end, strides, masks = strided_slice_args(key)
        return operations().StridedSlice(**masks)(self, begin, end, strides)


class TensorIndexError(GraphKernelError, IndexError):
    """An index that is not basic indexing (ints, slices, None, ...)."""


def strided_slice_args(key) -> tuple[tuple, tuple, tuple, dict]:
    """(begin, end, strides, masks) of the StridedSlice that `x[key]` is."""
    key = key if isinstance(key, tuple) else (key,)
    begin, end, strides = [], [], []
    masks = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0}
    for i, k in enumerate(key):
        bit = 1 << i
        if k is Ellipsis or k is None:
            masks["ellipsis_mask" if k is Ellipsis else "new_axis_mask"] |= bit
            b, e, s = 0, 1, 1
        elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            masks["shrink_axis_mask"] |= bit
            b, e, s = _index(k), _index(k) + 1, 1
        elif isinstance(k, slice):
            if not all(v is None or (isinstance(v, (int, np.integer)) and not isinstance(v, bool))
                       for v in (k.start, k.stop, k.step)):
                raise TensorIndexError(f"index {i} of the tensor, {k}: slice bounds must be Python ints or None")
            s = 1 if k.step is None else int(k.step)
            if s == 0:
                raise TensorIndexError(f"index {i} of the tensor, {k}: the step cannot be 0")
            masks["begin_mask"] |= bit if k.start is None else 0
            masks["end_mask"] |= bit if k.stop is None else 0
            b, e = _index(k.start or 0), _index(k.stop or 0)
        else:
            raise TensorIndexError(f"index {i} of the tensor is a {type(k).__name__}: tensors take basic "
                                   "indexing (ints, slices, None, ...); gather by a tensor of indices with "
                                   "P.Gather")
        begin.append(b)
        end.append(e)
        strides.append(s)
    if sum(k is Ellipsis for k in key) > 1:
        raise TensorIndexError("an index can only have a single ellipsis ('...')")
    return tuple(begin), tuple(end), tuple(strides), masks


def _index(k) -> int:
    """An index as an int; a symbolic size (x[:, :F.shape(y)[1]], ir/symbolic.py) stays one."""
    return k if isinstance(k, Dim) else int(k)


def _method(x, name: str, d):
    """x.<name> bound: the row's primitive called on x, the method's arguments bound to its attributes."""
    P = operations()
    if not d.api.method_args:
        prim = getattr(P, d.name)()

        def method(*args, **kwargs):
            return prim(x, *args, **kwargs)
    else:
        form = Form("Tensor", name, d.api.method_args)   # every parameter an attribute: Form.bind's rules
        attributes = {param.lstrip("*").partition("=")[2] or param.lstrip("*") for param in form.params}

        def method(*args, **kwargs):
            _, attrs = form.bind(attributes, args, kwargs)
            made = {k: v for k, v in attrs.items() if k not in d.api.call_attrs}
            call = {k: v for k, v in attrs.items() if k in d.api.call_attrs}
            return getattr(P, d.name)(**made)(x, **call)
    method.__name__ = name
    return method


def _form_method(x, d, form):
    """x.<form.name> bound: a row's "Tensor" form (ir/ops Form: x.multiply(y), x.view(2, 3), x.float())."""
    P = operations()
    names = {a.name for a in d.attrs}

    def method(*args, **kwargs):
        tensors, attrs = form.bind(names, args, kwargs, first=(x,))
        made = {k: v for k, v in attrs.items() if k not in d.api.call_attrs}
        call = {k: v for k, v in attrs.items() if k in d.api.call_attrs}
        return getattr(P, d.name)(**made)(*tensors, **call)
    method.__name__ = form.name
    return method


_METHODS = {d.api.method: name for name, d in OPS.items() if d.api.method}
# MindSpore's other Tensor methods of the op rows (x.multiply, x.view, x.float(), ...): name -> (row, form)
_FORMS = {f.name: (d, f) for d in OPS.values() for f in d.api.forms if f.where == "Tensor" and f.name not in _METHODS}


def is_python_scalar(x) -> bool:
    """A Python or numpy scalar: an operand that becomes a constant of the other operand's dtype."""
    return isinstance(x, (bool, int, float, np.number, np.bool_))


def _operand(o) -> bool:
    """Whether `o` can be the other side of an operator: a tensor, an array or a Python number."""
    return isinstance(o, (TensorOps, np.ndarray, np.generic, bool, int, float))


class TensorShapeError(GraphKernelError, ValueError):
    """A Tensor made with a bad `shape`, or a declaration-only Tensor used as data."""


class Tensor(TensorOps):
    """A concrete tensor: `Tensor(np.array(...))`, `Tensor([1.0, 2.0])`, `Tensor(x, mstype.float16)`.

    Without data, MindSpore's `Tensor(shape=..., dtype=...)`: a static shape is a Tensor of zeros; a
    shape with None (or -1) dims, or None (or [-2]) for any rank, declares a dynamic shape for
    `Cell.set_inputs` and `enable_dynamic` and holds no data (its `shape` spells those dims -1, an any
    rank (-2,), as MindSpore does)."""

    init = None   # the Initializer that filled it (graphkernel.common.initializer), as MindSpore's Tensor.init
    _declared = None    # a declaration-only Tensor: its shape, None dims dynamic, or ANY_RANK

    def __init__(self, data=None, dtype=None, shape=None, init=None):
        if init is not None:
            raise TensorShapeError("Tensor(init=...): initializers are not taken here; make the data with "
                                   "graphkernel.common.initializer.initializer(init, shape, dtype)")
        if data is None and (shape is not None or dtype is not None):
            declared = _declared_shape(shape)
            if declared != _ANY_RANK and None not in declared:   # static: MindSpore's zeros
                dtype = dtype if dtype is not None else "float32"
                check_new(declared, dtype, "Tensor(shape=..., dtype=...)")
                data = np.zeros(declared, as_dtype(dtype).np)
            else:
                if dtype is None:
                    raise TensorShapeError("a Tensor declaring a dynamic shape needs its dtype (MindSpore: dtype "
                                           "must not be None): Tensor(shape=[None, 128], dtype=ms.float32)")
                self._dtype = as_dtype(dtype)
                self._array = None
                self._declared = declared
                return
        elif shape is not None:
            raise TensorShapeError(f"Tensor(data, shape={shape!r}): a Tensor made from data takes its data's shape; "
                                   "give shape without data to declare one")
        if data is None:
            raise TensorShapeError("Tensor() needs data, or shape and dtype")
        if dtype is not None and isinstance(data, (Tensor, np.ndarray)) and np.dtype(data.dtype) != as_dtype(dtype).np:
            check_new(data.shape, dtype, "Tensor(data, dtype)")   # the conversion makes a copy
        try:
            arr = _to_array(data, dtype)
        except MemoryError as e:
            raise ResourceLimitError(f"Tensor: the data could not be converted to an array ({e})") from None
        self._dtype = as_dtype(arr.dtype)  # rejects dtypes the IR does not have
        self._array = arr

    @property
    def declared_shape(self):
        """The shape this Tensor declares: None per dynamic dim, None for any rank; its data's shape
        when it has data."""
        if self._declared is None:
            return self._array.shape
        return None if self._declared == _ANY_RANK else self._declared

    @property
    def is_declaration(self) -> bool:
        """A Tensor of a dynamic shape, without data (set_inputs' kind)."""
        return self._declared is not None

    def _no_data(self):
        raise TensorShapeError(f"a Tensor declaring the dynamic shape {list(self.shape)} holds no data: give it to "
                               "Cell.set_inputs or enable_dynamic, and call with Tensors of data")

    @classmethod
    def _wrap(cls, array: np.ndarray) -> Tensor:
        """A Tensor around an array we produced (no copy, no checks)."""
        t = cls.__new__(cls)
        t._array, t._dtype = array, as_dtype(array.dtype)
        return t

    def asnumpy(self) -> np.ndarray:
        if self._array is None:
            self._no_data()
        return self._array

    def copy(self) -> Tensor:
        if self._array is None:
            self._no_data()
        return Tensor._wrap(self._array.copy())

    @property
    def has_init(self) -> bool:
        """False: an initializer fills its Tensor at once here (MindSpore fills it at init_data)."""
        return False

    def init_data(self, slice_index=None, shape=None, opt_shard_group=None) -> Tensor:
        """MindSpore's `Tensor.init_data()` of a Tensor an initializer made: the Tensor (filled already).
        Like MindSpore, a TypeError for a Tensor no initializer made."""
        if self.init is None:
            raise TypeError("init_data must be set Tensor.init, init can't be None (only a Tensor made by "
                            "initializer() has one)")
        return self

    @property
    def shape(self) -> tuple[int, ...]:
        if self._declared is not None:
            return (-2,) if self._declared == _ANY_RANK else tuple(-1 if d is None else d for d in self._declared)
        return self._array.shape

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self.shape) if self._declared is not None else self._array.ndim

    @property
    def size(self) -> int:
        return 0 if self._declared is not None else self._array.size

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)

    def __len__(self):
        return len(self._array)

    def __bool__(self):
        return bool(self._array)

    def __float__(self):
        return float(self._array)

    def __int__(self):
        return int(self._array)

    def __repr__(self):
        if self._declared is not None:
            return f"Tensor(shape={list(self.shape)}, dtype={self.dtype.value}, value=\n)"
        return f"Tensor(shape={list(self.shape)}, dtype={self.dtype.value}, value=\n{self._array})"

    __str__ = __repr__


_ANY_RANK = "any rank"


def _declared_shape(shape):
    """A Tensor(shape=...)'s shape: a tuple of ints (None for a dynamic dim), or _ANY_RANK."""
    if shape is None or (isinstance(shape, (tuple, list)) and list(shape) == [-2]):
        return _ANY_RANK
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TensorShapeError(f"Tensor(shape={shape!r}): a shape is a tuple or list of ints (None or -1: a dynamic "
                               "dim), or None (any rank)")
    out = []
    for d in shape:
        if d is None or (isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d == -1):
            out.append(None)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
            out.append(int(d))
        else:
            raise TensorShapeError(f"Tensor(shape={list(shape)!r}): dim {d!r} is not a size, None or -1 (-2 alone, "
                                   "or shape=None, declares any rank)")
    return tuple(out)


# Bumped when any Parameter's requires_grad changes: part of every Cell's compile key
PARAMETER_FLAGS_VERSION = [0]


# bool() of a Parameter while a construct is traced: its value at that point is a tensor condition
# (graphkernel/tracing/trace.py sets the function; None outside a trace means the stored value decides).
TRACED_CONDITION: list = [None]
# Parameter.value() while a construct is traced: the symbolic value there (graphkernel/tracing/trace.py sets it)
TRACED_VALUE: list = [None]


class Parameter(Tensor):
    """A named, mutable Tensor owned by a Cell; a graph input that the Cell feeds at each call.

    It owns its storage: a C-contiguous, writable copy of the data it was given (never the caller's
    array). A training step and `set_data` write into that storage in place, so its address does not
    change (only a `set_data` of another shape gives it new storage); `asnumpy()` returns a snapshot (a
    copy) that later steps do not change (MindSpore's shares the storage)."""

    def __init__(self, data, name: str | None = None, requires_grad: bool = True):
        super().__init__(data)
        what = f"Parameter {name}" if name else "Parameter"
        check_new(self._array.shape, self._array.dtype, what)
        try:
            self._array = np.array(self._array, order="C", copy=True)
        except MemoryError as e:
            raise out_of_memory(what, self._array.shape, self._array.dtype, e) from None
        self.name = name
        self._requires_grad = _bool_flag(requires_grad)

    @property
    def name(self) -> str | None:
        """Its name (a Cell names an unnamed Parameter by its attribute path); a string or None, as in
        MindSpore (which raises a ValueError for anything else)."""
        return self._name

    @name.setter
    def name(self, value) -> None:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"The type of the Parameter's name should be 'string' or 'None', but got "
                             f"{type(value)}.")
        self._name = value

    @classmethod
    def _adopt(cls, array: np.ndarray, name: str | None = None, requires_grad: bool = True) -> Parameter:
        """A Parameter owning `array`, a C-contiguous, writable array nobody else holds (no copy)."""
        p = cls.__new__(cls)
        p._array, p._dtype = array, as_dtype(array.dtype)
        p.name, p._requires_grad = name, bool(requires_grad)
        return p

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        """A change recompiles the graphs that read it (a frozen Parameter's gradient is zeros)."""
        value = _bool_flag(value)
        if value != self._requires_grad:
            self._requires_grad = value
            PARAMETER_FLAGS_VERSION[0] += 1

    def asnumpy(self) -> np.ndarray:
        return self._array.copy()

    @property
    def data(self) -> Tensor:
        """MindSpore's `Parameter.data`: its value now, as a Tensor (in a traced construct, after the
        assigns before it)."""
        return self.value()

    def copy(self) -> Parameter:
        """A new Parameter of the same name, values and requires_grad, with storage of its own."""
        return Parameter(self._array, name=self.name, requires_grad=self.requires_grad)

    def init_data(self, layout=None, set_sliced=False) -> Parameter:
        """MindSpore's `Parameter.init_data()`: the Parameter itself (its data is there already)."""
        return self

    def set_data(self, data, slice_shape: bool = False) -> Parameter:
        """MindSpore's `Parameter.set_data`: `data` (a Tensor, a Python number, or a numpy array) becomes
        the Parameter's value, cast to its dtype as MindSpore casts it (a float Tensor into an int
        Parameter truncates; a Python float into an int or bool Parameter is a TypeError, as there). Of
        its shape, it is written into the Parameter's own storage; of another shape (MindSpore allows it)
        the Parameter gets new storage, and the Cells that read it compile anew."""
        if isinstance(data, float) and not self.dtype.is_float:
            raise TypeError(f"Parameter {self.name}: incoming Parameter dtype can not be converted to current "
                            f"dtype implicitly. Current dtype is {self.dtype.value}, and incoming is a float")
        arr = _to_array(data, None)
        if as_dtype(arr.dtype) != self.dtype:
            with np.errstate(over="ignore", invalid="ignore"):
                arr = arr.astype(self.dtype.np)
        if arr.shape != self.shape:
            self._array = np.array(arr, order="C", copy=True)
            PARAMETER_FLAGS_VERSION[0] += 1
        else:
            np.copyto(self._array, arr)
        return self

    def value(self):
        """MindSpore's Parameter.value(): its value at this point (in a traced construct, after the
        assigns before it), as a Tensor."""
        decide = TRACED_VALUE[0]
        traced = decide(self) if decide is not None else None
        return Tensor._wrap(self._array.copy()) if traced is None else traced

    def data_ptr(self) -> int:
        """The address of this Parameter's storage (unchanged unless set_data changes its shape)."""
        return self._array.ctypes.data

    def __bool__(self):
        decide = TRACED_CONDITION[0]
        result = decide(self) if decide is not None else None
        return bool(self._array) if result is None else result

    def __repr__(self):
        return f"Parameter(name={self.name}, shape={list(self.shape)}, dtype={self.dtype.value})"


def _bool_flag(value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"The argument `requires_grad` must be bool type, got {value!r}")
    return bool(value)


class ParameterTuple(tuple):
    """A tuple of Parameters (MindSpore's): a Cell attribute holding one registers each Parameter under
    its own name. `clone(prefix, init)` makes new Parameters of the same shapes and dtypes named
    `<prefix>.<name>` (an optimizer's moments: `moment1.fc.weight`), filled with zeros or ones."""

    def __new__(cls, iterable=()):
        items = tuple(iterable)
        for p in items:
            if not isinstance(p, Parameter):
                raise TypeError(f"ParameterTuple holds Parameters, got a {type(p).__name__}")
        return super().__new__(cls, items)

    def clone(self, prefix: str, init="zeros") -> ParameterTuple:
        fills = {"zeros": 0, "ones": 1}
        if init not in fills:
            raise ValueError(f"ParameterTuple.clone: init must be 'zeros' or 'ones', got {init!r}")
        return ParameterTuple(Parameter._adopt(new_array(p.shape, p.dtype, f"{prefix}.{p.name}", fills[init]),
                                               name=f"{prefix}.{p.name}", requires_grad=p.requires_grad)
                              for p in self)
