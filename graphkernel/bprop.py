"""A Cell's own gradient: `def bprop(self, *inputs, out, dout)` returns one cotangent per input.

When a Cell that defines bprop is called inside a trace, its construct is traced inline as usual, and its
bprop is traced once into a graph of its own, on symbolic (inputs, out, dout). A Bprop node then stands
for the Cell's results (ir/ops/gradient.py): a gradient reaching it goes through that graph, and never
through the ops of construct, which may hold a host function (PyFunc) that has no gradient rule. With no
gradient asked, the autodiff stage replaces the node by the results it stands for.
"""
from __future__ import annotations

from ir.errors import GraphKernelError
from ir.graph import Graph
from ir.ops import make_node
from ir.ops.gradient import BpropGraph
from graphkernel.tensor import Tensor
from graphkernel.tracing.trace import SymbolicTensor, Trace


class BpropError(GraphKernelError, TypeError):
    """A Cell's bprop that does not fit its construct."""


def has_bprop(cell) -> bool:
    return callable(getattr(type(cell), "bprop", None))


def call_with_bprop(cell, trace: Trace, args, construct):
    """`construct(*args)` traced into `trace`, its results standing behind a Bprop node."""
    result = construct(*args)
    return _behind_bprop(cell, trace, args, result, lambda x: x.value)


def record_with_bprop(cell, tape, args, result):
    """PYNATIVE: construct ran eagerly on a tape (graphkernel/tracing/tape.py), recording its ops; its results
    now stand behind a Bprop node of the recording."""
    symbolic = [SymbolicTensor(tape.value_of(a)) if isinstance(a, Tensor) else a for a in args]
    single = not isinstance(result, tuple)
    outs = (result,) if single else result
    if not all(isinstance(o, Tensor) for o in outs):
        raise BpropError(f"{type(cell).__name__}.bprop: construct must return a Tensor or a tuple of Tensors")
    behind = _behind_bprop(cell, tape.trace, symbolic, tuple(SymbolicTensor(tape.value_of(o)) for o in outs),
                           lambda x: x.value)
    # a result that is one of the inputs gets a Tensor of its own: the input keeps its recorded value
    inputs = {id(a) for a in args}
    outs = tuple(Tensor._wrap(o.asnumpy()) if id(o) in inputs else o for o in outs)
    for tensor, value in zip(outs, behind if isinstance(behind, tuple) else (behind,)):
        tape.bind(tensor, value.value)
    return outs[0] if single else outs


def _behind_bprop(cell, trace: Trace, args, result, value_of):
    name = type(cell).__name__
    single = not isinstance(result, tuple)
    outs = (result,) if single else result
    if not all(isinstance(o, SymbolicTensor) for o in outs):
        raise BpropError(f"{name}.bprop: construct must return a Tensor or a tuple of Tensors")
    tensors = [a for a in args if isinstance(a, SymbolicTensor)]
    graph, parameters = _trace_bprop(cell, trace, args, outs)
    node = make_node("Bprop", [value_of(t) for t in tensors] + [value_of(o) for o in outs] +
                     [trace.parameter(p) for p in parameters],
                     {"inputs": len(tensors), "outputs": len(outs), "bprop": BpropGraph(graph, name)},
                     name=trace.scope_name("Bprop"))
    wrapped = tuple(SymbolicTensor(v) for v in trace.add(node).outputs)
    return wrapped[0] if single else wrapped


def _trace_bprop(cell, outer: Trace, args, outs) -> tuple[Graph, list]:
    name = type(cell).__name__
    with Trace() as sub:
        sub.scope = ["Gradients", *outer.scope]
        inputs = [SymbolicTensor(sub.input(a.value.type, f"input{i}").value) if isinstance(a, SymbolicTensor)
                  else a for i, a in enumerate(args)]
        out = tuple(sub.input(o.value.type, f"out{i}") for i, o in enumerate(outs))
        dout = tuple(sub.input(o.value.type, f"dout{i}") for i, o in enumerate(outs))
        single = len(outs) == 1
        grads = cell.bprop(*inputs, out[0] if single else out, dout[0] if single else dout)
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) != len(args):
        raise BpropError(f"{name}.bprop returned {len(grads)} gradient(s) for {len(args)} input(s)")
    results = []
    for i, (a, g) in enumerate(zip(args, grads)):
        if not isinstance(a, SymbolicTensor):
            continue
        if not isinstance(g, SymbolicTensor) or g.value.type != a.value.type:
            got = g.value.type if isinstance(g, SymbolicTensor) else type(g).__name__
            raise BpropError(f"{name}.bprop: the gradient of input {i} is {got}, the input is {a.value.type}")
        results.append(g.value)
    return sub.finish(results), list(sub.parameters)


__all__ = ["BpropError", "call_with_bprop", "has_bprop", "record_with_bprop"]
