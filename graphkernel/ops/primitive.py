"""Primitive: the callable behind every `P.<Op>()`.

Attributes are given at construction, tensors (and call-time attributes such as `axis`) at the call,
as in MindSpore. A call inside a trace adds a node to the traced graph; a call on concrete Tensors
runs at once (PYNATIVE_MODE, or plain Python) through a one-op graph compiled like any other.
Python scalars become constants of the other operands' dtype. The two tensors of a binary broadcasting
op (Add, Mul, Equal, ...) of different dtypes are promoted as MindSpore promotes them (bool < int <
float, then the wider: int32 with int64 is int64, float16 with float32 is float32, float16 with bfloat16
is float32, an int with a float the float) by a Cast before the op.
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.errors import AttrError, DTypeError, GraphKernelError
from ir.graph import Literal, TensorType, Value
from ir.ops import get, make_node
from ir.ops.float_status import overflowed
from ir.ops.registry import REQUIRED, Pattern
from graphkernel.assign import AssignError, assign
from graphkernel.compiler import run_eager
from ir.symbolic import SIZE_VALUE, Dim
from graphkernel.tensor import Parameter, Tensor, TensorOps, is_python_scalar
from graphkernel.tracing.tape import active_tape
from graphkernel.tracing.trace import SymbolicTensor, Trace, active_trace


class PrimitiveCallError(GraphKernelError, TypeError):
    """A primitive called with the wrong number or kind of arguments."""


class UnknownPrimitiveError(GraphKernelError, AttributeError):
    """`P.<Name>` for a primitive graphkernel does not have."""


def _scalar_const(value, dtype: DType, op: str) -> np.ndarray:
    """A Python scalar as a constant of the tensor operands' dtype. A float rounds to the tensor's
    precision, as in MindSpore; a value the dtype cannot hold (2.5 as int32, 1e6 as float16, 1 as bool)
    is an error."""
    is_bool = isinstance(value, (bool, np.bool_))
    if is_bool != (dtype == DType.bool):
        raise DTypeError(f"{op}: a {'bool' if is_bool else 'numeric'} scalar {value!r} cannot be an operand "
                         f"of a {dtype} tensor")
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.asarray(value).astype(dtype.np)
    if dtype.is_float:
        if np.isinf(arr) and not np.isinf(value):
            raise DTypeError(f"{op}: scalar {value!r} overflows {dtype}")
    elif arr.item() != value:
        raise DTypeError(f"{op}: scalar {value!r} cannot be represented as {dtype}")
    return arr


class Primitive:
    op: str = ""
    num_tensors: int = 1
    call_attrs: tuple[str, ...] = ()     # attributes passed after the tensors, in order
    call_defaults: dict = {}
    packed: bool = False                 # the tensors come as one tuple or list (P.AddN()((x, y)))
    order: tuple[str, ...] = ()          # the call's arguments in MindSpore's order (tensor names and
                                         # call_attrs), when the tensors do not all come first
    updates: tuple = ()                  # (result k, input i): result k is written into input i, a Parameter
    inputs: tuple[str, ...] = ()         # the tensor inputs' names, for errors
    casts: tuple = ()                    # MindSpore's conversion of mixed float widths (ir/ops Api.casts)
    returned: int | None = None          # results the call returns (the rest only update Parameters)
    result_casts: tuple = ()

    def __init__(self, *args, **attrs):
        opdef = get(self.op)
        order = [a.name for a in opdef.attrs if a.name not in self.call_attrs]
        allowed = set(order)
        if len(args) > len(order):
            raise PrimitiveCallError(f"P.{type(self).__name__}() takes at most {len(order)} positional "
                                     f"argument(s) ({', '.join(order) or 'none'}), got {len(args)}")
        for name, value in zip(order, args):
            if name in attrs:
                raise PrimitiveCallError(f"P.{type(self).__name__}(): {name} given twice")
            attrs[name] = value
        unknown = sorted(set(attrs) - allowed)
        if unknown:
            raise PrimitiveCallError(f"P.{type(self).__name__}(): unknown argument(s) {', '.join(unknown)}; "
                                     f"accepted: {', '.join(sorted(allowed)) or 'none'}")
        for a in opdef.attrs:  # check construction-time attributes now, as MindSpore does
            if a.name in self.call_attrs:
                continue
            if a.name in attrs:
                try:
                    a.check(attrs[a.name])
                except (TypeError, ValueError) as e:
                    raise AttrError(f"P.{type(self).__name__}(): {a.name}={attrs[a.name]!r}: {e}") from None
            elif a.default is REQUIRED:
                raise AttrError(f"P.{type(self).__name__}(): missing argument {a.name}")
        self.attrs = attrs

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.attrs.items())
        return f"P.{type(self).__name__}({args})"

    def _bind(self, args, kwargs):
        name = type(self).__name__
        if self.packed:
            if not args or not isinstance(args[0], (tuple, list)):
                raise PrimitiveCallError(f"P.{name} takes its tensors as one tuple or list, got "
                                         f"{type(args[0]).__name__ if args else 'nothing'}")
            n = len(args[0])
            args = (*args[0], *args[1:])
        elif self.order:
            args = self._in_order(args, kwargs)
            kwargs = {}
            n = self.num_tensors
        else:
            n = self.num_tensors
        unexpected = [k for k in kwargs if k not in self.call_attrs]
        if unexpected:
            accepted = f"; keywords: {', '.join(self.call_attrs)}" if self.call_attrs else ""
            raise PrimitiveCallError(f"P.{name}: unexpected keyword argument {unexpected[0]!r} (tensors are "
                                     f"positional{accepted})")
        if len(args) < n:
            raise PrimitiveCallError(f"P.{name} takes {n} tensor argument(s), got {len(args)}")
        extra = args[n:]
        if len(extra) > len(self.call_attrs):
            raise PrimitiveCallError(f"P.{name} takes {n} tensor(s)"
                                     f"{' and ' + ', '.join(self.call_attrs) if self.call_attrs else ''}"
                                     f", got {len(args)} positional arguments")
        call = dict(self.call_defaults)
        call.update(zip(self.call_attrs, extra))
        call.update(kwargs)
        missing = [k for k in self.call_attrs if k not in call]
        if missing:
            raise PrimitiveCallError(f"P.{name}: missing argument(s) {', '.join(missing)}")
        return list(args[:n]), {**self.attrs, **call}

    def _in_order(self, args, kwargs) -> tuple:
        """The arguments of a call in `order` as tensors first, then call attributes."""
        name = type(self).__name__
        if len(args) > len(self.order):
            raise PrimitiveCallError(f"P.{name} takes {len(self.order)} arguments ({', '.join(self.order)}), "
                                     f"got {len(args)}")
        given = dict(zip(self.order, args))
        for key, value in kwargs.items():
            if key not in self.order or key in given:
                raise PrimitiveCallError(f"P.{name}: unexpected or repeated argument {key!r}; it takes "
                                         f"{', '.join(self.order)}")
            given[key] = value
        given = {**self.call_defaults, **given}
        missing = [k for k in self.order if k not in given]
        if missing:
            raise PrimitiveCallError(f"P.{name}: missing argument(s) {', '.join(missing)}")
        tensors = [k for k in self.order if k not in self.call_attrs]
        return tuple(given[k] for k in tensors) + tuple(given[k] for k in self.call_attrs)

    def __call__(self, *args, **kwargs):
        operands, attrs = self._bind(args, kwargs)
        for _, i in self.updates:
            if not isinstance(operands[i], Parameter):
                what = self.inputs[i] if i < len(self.inputs) else f"input {i}"
                raise AssignError(f"P.{type(self).__name__}: {what} must be a Parameter (it is updated in place), "
                                  f"got {type(operands[i]).__name__}")
        trace = active_trace()
        if trace is not None:
            result = self._emit(trace, operands, attrs)
        elif any(isinstance(x, SymbolicTensor) for x in operands):
            raise PrimitiveCallError(f"P.{type(self).__name__}: called on a traced value outside its trace")
        else:
            result = _run_eager(self, operands, attrs)
        results = result if isinstance(result, tuple) else (result,)
        for k, i in self.updates:   # in program order: later reads in construct see the new values
            assign(operands[i], results[k])
        if self.returned is not None:
            return results[0] if self.returned == 1 else results[:self.returned]
        return result

    def _emit(self, trace: Trace, operands, attrs):
        """Add this op to `trace`; returns SymbolicTensor(s)."""
        values = _operand_values(trace, operands, self.op)
        d = get(self.op)
        if d.pattern == Pattern.BROADCAST and d.arity == 2 and values[0].dtype != values[1].dtype:
            values = _promoted(trace, values)
        given = [v.dtype for v in values]
        if self.casts:   # a float input to the dtype of the input named (MindSpore's gradient primitives)
            values = [_cast(trace, v, given[src]) if src is not None and v.dtype.is_float and given[src].is_float
                      else v for v, src in zip(values, self.casts)]
        node = trace.add(make_node(self.op, values, attrs, name=trace.scope_name(self.op)))
        results = [v if src is None or not v.dtype.is_float or not given[src].is_float else _cast(trace, v, given[src])
                   for v, src in zip(node.outputs, self.result_casts + (None,) * len(node.outputs))]
        outs = tuple(SymbolicTensor(v) for v in results)
        return outs[0] if len(outs) == 1 else outs


def _operand_values(trace: Trace, operands, op: str) -> list[Value]:
    tensors = [x for x in operands if isinstance(x, TensorOps)]
    if operands and not tensors:
        arrays = any(isinstance(x, np.ndarray) for x in operands)
        raise PrimitiveCallError(f"P.{op} needs at least one tensor operand, got only "
                                 f"{'numpy arrays and ' if arrays else ''}Python scalars"
                                 f"{' (wrap an array: Tensor(array))' if arrays else ''}")
    # scalars take the dtype of the data they meet: the first non-bool tensor (Select's condition is bool)
    like = next((x for x in tensors if x.dtype != DType.bool), tensors[0] if tensors else None)
    values = []
    for x in operands:
        if isinstance(x, SymbolicTensor):
            values.append(x.value)
        elif isinstance(x, Parameter):
            values.append(_in_cell_dtype(trace, trace.parameter(x)))
        elif isinstance(x, Tensor):
            values.append(trace.constant(x.asnumpy()))
        elif isinstance(x, Dim):   # a symbolic size (F.shape(x)[1]): its value at each call
            dtype = like.dtype if like.dtype.is_float or like.dtype.is_int else DType.int64
            values.append(trace.add(make_node(SIZE_VALUE, (), {"size": x, "dtype": dtype},
                                              name=trace.scope_name(SIZE_VALUE))).out)
        elif is_python_scalar(x):
            values.append(trace.constant(_scalar_const(x, like.dtype, op)))
        else:
            hint = " (wrap it: Tensor(array))" if isinstance(x, np.ndarray) else ""
            raise PrimitiveCallError(f"P.{op}: operand of type {type(x).__name__} is neither a Tensor "
                                     f"nor a Python scalar{hint}")
    return values


def _in_cell_dtype(trace: Trace, value: Value) -> Value:
    """A float Parameter read inside a Cell set `to_float(dtype)`, cast to that dtype (MindSpore casts
    the Parameters a mixed-precision cell reads, as it casts its inputs)."""
    dtype = getattr(trace.cells[-1], "_float_dtype", None) if trace.cells else None
    if dtype is None or not value.dtype.is_float or value.dtype == dtype:
        return value
    return trace.add(make_node("Cast", (value,), {"dtype": dtype}, name=trace.scope_name("Cast"))).out


def _cast(trace: Trace, value: Value, dtype: DType) -> Value:
    if value.dtype == dtype:
        return value
    return trace.add(make_node("Cast", (value,), {"dtype": dtype}, name=trace.scope_name("Cast"))).out


def _promotion_rank(dtype: DType) -> tuple[int, int]:
    return (0 if dtype == DType.bool else 2 if dtype.is_float else 1, dtype.itemsize)


def _promoted(trace: Trace, values: list[Value]) -> list[Value]:
    """Both operands in the wider of their dtypes (MindSpore's implicit type promotion); float16 with
    bfloat16 is float32 (neither holds the other)."""
    dtypes = [v.dtype for v in values]
    target = DType.float32 if set(dtypes) == {DType.float16, DType.bfloat16} else max(dtypes, key=_promotion_rank)
    return [v if v.dtype == target else
            trace.add(make_node("Cast", (v,), {"dtype": target}, name=trace.scope_name("Cast"))).out
            for v in values]


class EagerFloatStatus:
    """The sticky overflow status of ops run one by one (PYNATIVE_MODE, or outside a trace): armed by
    an NPUClearFloatStatus, it checks the results of every op after it until the next Clear; unarmed
    (no status cleared yet) it checks nothing. A traced graph keeps its status in the graph instead
    (ir/ops/float_status.py)."""

    def __init__(self):
        self.armed = False
        self.overflow = False

    def clear(self) -> None:
        self.armed, self.overflow = True, False


EAGER_STATUS = EagerFloatStatus()


def _run_eager(prim: Primitive, operands, attrs):
    """Run one primitive on concrete Tensors through a cached one-op graph."""
    tensors = [x for x in operands if isinstance(x, Tensor)]
    with Trace() as trace:
        symbolic = []
        for x in operands:
            if isinstance(x, Tensor):
                symbolic.append(trace.input(TensorType(x.shape, x.dtype), ""))
            else:
                symbolic.append(x)
        result = prim._emit(trace, symbolic, attrs)
    results = result if isinstance(result, tuple) else (result,)
    graph = trace.finish([r.value for r in results])
    arrays = run_eager(graph, [t.asnumpy() for t in tensors] + trace.captured_arrays())
    outs = tuple(Tensor._wrap(a) for a in arrays)
    if EAGER_STATUS.armed and not EAGER_STATUS.overflow:
        EAGER_STATUS.overflow = overflowed(arrays)
    tape = active_tape()
    if tape is not None:   # a PYNATIVE gradient is recording (graphkernel/tracing/tape.py)
        tape.record(prim, operands, attrs, outs)
    return outs[0] if len(outs) == 1 else outs


def as_literal(array) -> Literal:
    return Literal(np.asarray(array))
