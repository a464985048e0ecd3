"""Gradients with MindSpore's API: `grad`, `value_and_grad`, `GradOperation` (`jit`, which compiles a
function, is in graphkernel/common/api.py, MindSpore's mindspore.common.api).

    grad_fn = graphkernel.value_and_grad(forward_fn, None, weights, has_aux=True)
    (loss, logits), grads = grad_fn(data, label)

    grad_all = GradOperation(get_all=True)(net)              # r0.7 style: C.GradOperation
    dx, dy = grad_all(x, y)

How: the function is traced (inline, when a trace is already running: inside `construct`, a `jit`
function, or the graph a top-level GRAPH_MODE call compiles), then one Gradient node asks for the
gradient of its outputs with respect to the chosen inputs and Parameters (ir/ops/gradient.py). The
pipeline's autodiff stage (ir/autodiff.py) replaces it by backward nodes, so forward and backward are one
graph that fuses together. In PYNATIVE_MODE the ops run one by one and are recorded on a tape as they
run (Python control flow may branch on tensor values); the recorded program is then differentiated
and run the same way.

Semantics as MindSpore's:
  grad(fn, grad_position=0, weights=None, has_aux=False)
      grad_position: an int (one gradient), a tuple of ints (a tuple), or None (weights only); weights: a
      Parameter, or a list/tuple of them (a tuple of gradients). Both given: (input grads, weight grads).
      has_aux: fn returns a tuple whose first item is differentiated; the rest come back as aux, a tuple:
      grad returns (gradients, aux), value_and_grad ((output, *aux), gradients).
  GradOperation(get_all=False, get_by_list=False, sens_param=False)(fn[, weights])
      the first input's gradient; get_all: a tuple over every input; get_by_list: a tuple over weights;
      both: (inputs', weights'); sens_param: the call's last argument weights the outputs (a tensor, or a
      tuple of them for a tuple output).
Without sens, each differentiated output must hold one element (a loss); a tuple output sums the
gradients of its items. (MindSpore weights a non-scalar output with ones; here that is an error naming
the output, since an implicit sum over a non-scalar output is more often a mistake than a wish.)
"""
from __future__ import annotations

import functools

import numpy as np

from ir.errors import GraphKernelError
from ir.graph import TensorType, Value
from ir.ops import make_node
from graphkernel import context
from graphkernel.cell import Cell
from graphkernel.common.api import jit
from graphkernel.compiler import run_eager
from graphkernel.tracing.tape import Tape, active_tape, recording
from graphkernel.tensor import Parameter, Tensor
from graphkernel.tracing.trace import SymbolicTensor, Trace, active_trace


class GradError(GraphKernelError, ValueError):
    """A gradient asked for in a way that cannot be taken; the message names the argument."""


def _fn_name(fn) -> str:
    return type(fn).__name__ if isinstance(fn, Cell) else getattr(fn, "__qualname__", repr(fn))


def _weights(fn, weights) -> tuple[Parameter, ...] | None:
    if weights is None:
        return None
    single = isinstance(weights, Parameter)
    items = (weights,) if single else tuple(weights)
    owned = {id(p) for p in fn.get_parameters()} if isinstance(fn, Cell) else None
    for i, w in enumerate(items):
        if not isinstance(w, Parameter):
            raise GradError(f"grad of {_fn_name(fn)}: weights[{i}] is a {type(w).__name__}, not a Parameter")
        if owned is not None and id(w) not in owned:
            raise GradError(f"grad of {_fn_name(fn)}: weight {w.name!r} is not a Parameter of {_fn_name(fn)}")
    return items


class _Request:
    """What to differentiate and how to return it (one per grad function)."""

    def __init__(self, fn, positions, weights, *, has_aux=False, sens_param=False, with_value=False,
                 single_position=False, single_weight=False, zeros_for_ints=False):
        self.fn, self.positions, self.weights = fn, positions, weights
        self.has_aux, self.sens_param, self.with_value = has_aux, sens_param, with_value
        self.single_position, self.single_weight = single_position, single_weight
        self.zeros_for_ints = zeros_for_ints
        self._jit = None

    def __call__(self, *args):
        trace = active_trace()
        if trace is not None:
            return self.emit(trace, args)
        if context.get_context("mode") == context.PYNATIVE_MODE:
            return run_taped(self, args)
        if self._jit is None:
            self._jit = jit(self.emit_in_active_trace)
        return self._jit(*args)

    def emit_in_active_trace(self, *args):
        return self.emit(active_trace(), args)

    # -- tracing ---------------------------------------------------------------------------------------
    def emit(self, trace: Trace, args):
        """Trace fn on `args` into the running trace and ask for its gradients there."""
        args, sens = self.split_sens(args)
        return self.request(trace, args, sens, self.fn(*args), lambda x: _value(trace, x))

    def split_sens(self, args) -> tuple[list, object]:
        args = list(args)
        if not self.sens_param:
            return args, None
        if not args:
            raise GradError(f"grad of {_fn_name(self.fn)}: sens_param=True needs the sens as the last argument")
        return args, args.pop()

    def request(self, trace: Trace, args, sens, result, value_of):
        """Add the Gradient node for fn's `result` on `args` (their values by `value_of`) to `trace`; the
        result packaged as the API returns it, gradients as SymbolicTensors."""
        positions = self._positions(len(args))
        values = {}
        for p in positions:
            if not isinstance(args[p], (Tensor, SymbolicTensor)):
                raise GradError(f"grad of {_fn_name(self.fn)}: argument {p} is a {type(args[p]).__name__}; "
                                "grad_position must name Tensor arguments")
            values[p] = value_of(args[p])
            if not values[p].dtype.is_float and not self.zeros_for_ints:
                raise GradError(f"grad of {_fn_name(self.fn)}: argument {p} is {values[p].type}; only a float "
                                "input has a gradient")
        outputs, aux = self._split(result)
        seeds = [value_of(x) for x in _leaves(outputs)]
        for i, s in enumerate(seeds):
            if not s.dtype.is_float:
                raise GradError(f"grad of {_fn_name(self.fn)}: output {i} is {s.type}, not a float tensor: "
                                "it has no gradient")
            if not self.sens_param and s.type.size != 1:
                raise GradError(f"grad of {_fn_name(self.fn)}: output {i} is {s.type}, not a scalar; reduce it "
                                "to a loss, or pass its weights as sens (GradOperation(sens_param=True))")
        sens_values = self._sens(trace, sens, seeds, value_of) if self.sens_param else []
        wrt = [values[p] for p in positions if values[p].dtype.is_float]
        # a Parameter with requires_grad=False is frozen: its gradient is zeros (no backward for it)
        frozen = [not w.requires_grad for w in self.weights or ()]
        weights = [trace.parameter(w) for w in self.weights or ()]
        live = [w for w, f in zip(weights, frozen) if not f]
        grads = iter(())
        if wrt or live:
            node = make_node("Gradient", seeds + wrt + live + sens_values,
                             {"seeds": len(seeds), "sens": bool(sens_values)}, name=trace.scope_name("Gradient"))
            grads = iter([SymbolicTensor(v) for v in trace.add(node).outputs])
        input_grads = tuple(next(grads) if values[p].dtype.is_float else _zeros(trace, values[p])
                            for p in positions)
        weight_grads = tuple(_zeros(trace, w) if f else next(grads) for w, f in zip(weights, frozen))
        return self._package(result, aux, input_grads, weight_grads)

    def _positions(self, count: int) -> tuple[int, ...]:
        for p in self.positions:
            if not -count <= p < count:
                raise GradError(f"grad of {_fn_name(self.fn)}: grad_position {p} is out of range for "
                                f"{count} argument(s)")
        return tuple(p % count for p in self.positions)

    def _split(self, result):
        if not self.has_aux:
            return result, ()
        if not isinstance(result, (tuple, list)) or not result:
            raise GradError(f"grad of {_fn_name(self.fn)}: has_aux=True needs fn to return a tuple "
                            f"(output, aux...), got a {type(result).__name__}")
        return result[0], tuple(result[1:])

    def _sens(self, trace: Trace, sens, seeds, value_of) -> list[Value]:
        """The sens values, one per output; a sens of the output's dtype and element count but another
        shape (a () scale for a (1,) loss, as MindSpore's loss-scale cells pass it) is reshaped to it."""
        items = _leaves(sens)
        if len(items) != len(seeds):
            raise GradError(f"grad of {_fn_name(self.fn)}: sens has {len(items)} tensor(s), the output "
                            f"{len(seeds)}")
        values = [value_of(s) for s in items]
        for i, (s, seed) in enumerate(zip(values, seeds)):
            if s.type != seed.type and s.dtype == seed.dtype and s.type.size == seed.type.size:
                values[i] = trace.add(make_node("Reshape", (s,), {"shape": seed.shape},
                                                name=trace.scope_name("Reshape"))).out
            elif s.type != seed.type:
                raise GradError(f"grad of {_fn_name(self.fn)}: sens {i} is {s.type}, the output it weights "
                                f"is {seed.type}")
        return values

    def _package(self, result, aux, input_grads, weight_grads):
        inputs = input_grads[0] if self.single_position and input_grads else input_grads
        weights = weight_grads[0] if self.single_weight else weight_grads
        if self.weights is None:
            grads = inputs
        elif not self.positions:
            grads = weights
        else:
            grads = (inputs, weights)
        if self.with_value:
            return result, grads
        return (grads, aux) if self.has_aux else grads


def _value(trace: Trace, x) -> Value:
    if isinstance(x, SymbolicTensor):
        return x.value
    if isinstance(x, Parameter):
        return trace.parameter(x)
    if isinstance(x, Tensor):
        return trace.constant(x.asnumpy())
    raise GradError(f"expected a Tensor, got a {type(x).__name__}")


def _leaves(x) -> list:
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in _leaves(item)]
    if isinstance(x, (Tensor, SymbolicTensor)):
        return [x]
    raise GradError(f"a differentiated function must return Tensors or tuples of them, got a {type(x).__name__}")


def _zeros(trace: Trace, like: Value) -> SymbolicTensor:
    """Zeros of `like`'s type: the gradient GradOperation(get_all=True) gives an integer input."""
    zero = trace.constant(np.zeros((), like.dtype.np))
    return SymbolicTensor(trace.add(make_node("BroadcastTo", (zero,), {"shape": like.shape},
                                              name=trace.scope_name("BroadcastTo"))).out)


def _normalize_position(fn, grad_position, weights):
    if grad_position is None:
        if weights is None:
            raise GradError(f"grad of {_fn_name(fn)}: grad_position=None needs weights")
        return (), False
    if isinstance(grad_position, bool) or not isinstance(grad_position, (int, tuple)):
        raise GradError(f"grad of {_fn_name(fn)}: grad_position must be an int, a tuple of ints or None, got "
                        f"{grad_position!r}")
    if isinstance(grad_position, int):
        return (grad_position,), True
    if not grad_position or not all(isinstance(p, int) and not isinstance(p, bool) for p in grad_position):
        raise GradError(f"grad of {_fn_name(fn)}: grad_position must be a non-empty tuple of ints, got "
                        f"{grad_position!r}")
    return grad_position, False


def grad(fn, grad_position=0, weights=None, has_aux=False):
    """The function computing fn's gradients (MindSpore's `mindspore.grad`)."""
    positions, single = _normalize_position(fn, grad_position, weights)
    params = _weights(fn, weights)
    return _wrap(fn, _Request(fn, positions, params, has_aux=has_aux, single_position=single,
                              single_weight=isinstance(weights, Parameter)))


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False):
    """The function computing (fn's output, its gradients) (MindSpore's `mindspore.value_and_grad`)."""
    positions, single = _normalize_position(fn, grad_position, weights)
    params = _weights(fn, weights)
    return _wrap(fn, _Request(fn, positions, params, has_aux=has_aux, with_value=True, single_position=single,
                              single_weight=isinstance(weights, Parameter)))


class GradOperation:
    """MindSpore's GradOperation: `GradOperation(get_all, get_by_list, sens_param)(fn[, weights])`."""

    def __init__(self, get_all=False, get_by_list=False, sens_param=False):
        for name, v in (("get_all", get_all), ("get_by_list", get_by_list), ("sens_param", sens_param)):
            if not isinstance(v, bool):
                raise GradError(f"GradOperation: {name} must be True or False, got {v!r}")
        self.get_all, self.get_by_list, self.sens_param = get_all, get_by_list, sens_param

    def __call__(self, fn, weights=None):
        if self.get_by_list and weights is None:
            raise GradError(f"GradOperation(get_by_list=True) of {_fn_name(fn)} needs weights")
        params = _weights(fn, weights) if self.get_by_list else None
        request = _AllInputsRequest if self.get_all else _Request
        positions = () if self.get_by_list and not self.get_all else (0,)
        return _wrap(fn, request(fn, positions, params, sens_param=self.sens_param,
                                 single_position=not self.get_all, zeros_for_ints=self.get_all))


class _AllInputsRequest(_Request):
    def _positions(self, count: int) -> tuple[int, ...]:
        return tuple(range(count))


def _wrap(fn, request: _Request):
    @functools.wraps(fn if not isinstance(fn, Cell) else fn.construct)
    def grad_fn(*args):
        return request(*args)
    grad_fn.request = request
    return grad_fn


# --- PYNATIVE_MODE: the taped gradient (graphkernel/tracing/tape.py records, this runs it) ---------------------
def run_taped(request, args):
    """Run `request.fn` eagerly on a tape and return what the grad function returns. Inside another
    taped gradient (a gradient of a gradient), the outer tape records this one too: its Gradient node
    and the Tensors it returns, so the outer gradient differentiates through it."""
    outer = active_tape()
    tape = outer or Tape()
    if outer is None:
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                tape.bind(a, tape.trace.input(TensorType(a.shape, a.dtype), f"input{i}").value)
                tape.arrays.append(a.asnumpy())
    fn_args, sens = request.split_sens(args)
    before = {id(a): tape.value_of(a) for a in fn_args if isinstance(a, Tensor)}   # fn's inputs, as called
    with recording(tape):
        result = request.fn(*fn_args)
    packaged = request.request(tape.trace, fn_args, sens, result,
                               lambda x: before.get(id(x)) or tape.value_of(x))
    wanted: list[SymbolicTensor] = []
    _collect(packaged, wanted)
    graph = tape.trace.finish([s.value for s in wanted])
    results = run_eager(graph, tape.arrays + tape.trace.captured_arrays())
    computed = {}
    for symbolic, array in zip(wanted, results):
        computed[id(symbolic)] = tensor = Tensor._wrap(array)
        tape.bind(tensor, symbolic.value)
    return _replace(packaged, computed)


def _collect(x, out: list) -> None:
    if isinstance(x, (tuple, list)):
        for item in x:
            _collect(item, out)
    elif isinstance(x, SymbolicTensor):
        out.append(x)


def _replace(x, computed: dict):
    if isinstance(x, (tuple, list)):
        return type(x)(_replace(item, computed) for item in x)
    if isinstance(x, SymbolicTensor):
        return computed[id(x)]
    return x
