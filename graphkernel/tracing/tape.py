"""PYNATIVE_MODE gradients: a tape records the ops as they run, then the recording is differentiated.

    run_taped(request, args)              graphkernel/gradients.py; this module holds the Tape it records on
        1. every Tensor argument becomes an input of a recording (a Trace that is never the active one)
        2. fn runs eagerly, op by op, so Python control flow may branch on tensor values; each primitive
           that runs also adds its node to the recording, reading the values of recorded Tensors, the
           Parameters it meets as inputs, and any other Tensor as a constant; a compiled graph that runs
           (an ONNX model, a jit function's graph) adds its traced nodes the same way
        3. the Gradient node goes into the recording, which is compiled and run like a one-op eager
           graph (the pipeline's autodiff stage differentiates it, fusion as the context says)

The forward ops run twice (once eagerly, once in the differentiated program): PYNATIVE trades speed for
Python's freedom, and GRAPH_MODE or `jit` is the fast path.
"""
from __future__ import annotations

import contextlib
import contextvars

from ir.graph import Value
from graphkernel.tensor import Parameter, Tensor
from graphkernel.tracing.trace import SymbolicTensor, Trace

_active: contextvars.ContextVar = contextvars.ContextVar("graphkernel_tape", default=None)


class Tape:
    """A recording of eager ops: the values of the Tensors they made, in a Trace of its own."""

    def __init__(self):
        self.trace = Trace()
        self.arrays: list = []    # the data of the recording's inputs (its Parameters': captured_arrays)
        self._values: dict[int, tuple[Tensor, Value]] = {}   # id -> (the Tensor, kept alive; its value)

    def bind(self, tensor: Tensor, value: Value) -> None:
        self._values[id(tensor)] = (tensor, value)

    def value_of(self, x) -> Value:
        """The recorded value of a Tensor; a Parameter's input; any other Tensor as a constant."""
        if isinstance(x, SymbolicTensor):
            return x.value
        recorded = self._values.get(id(x))
        if recorded is not None and recorded[0] is x:
            return recorded[1]
        if isinstance(x, Parameter):
            return self.trace.parameter(x)
        return self.trace.constant(x.asnumpy())

    def record(self, prim, operands, attrs, outputs) -> None:
        """A primitive ran on `operands` and made `outputs`: add its node."""
        symbolic = [SymbolicTensor(self.value_of(x)) if isinstance(x, Tensor) else x for x in operands]
        result = prim._emit(self.trace, symbolic, attrs)
        results = result if isinstance(result, tuple) else (result,)
        for tensor, value in zip(outputs, results):
            self.bind(tensor, value.value)


    def record_graph(self, graph, tensors, parameters, outputs) -> None:
        """A compiled graph ran on `tensors` (then the `parameters`' values) and made `outputs` (an ONNX
        model, or a Cell that always runs compiled): add its nodes, so the gradient passes through it."""
        values = dict(zip(graph.inputs, [self.value_of(t) for t in tensors] +
                          [self.trace.parameter(p) for p in parameters]))
        for node in graph.nodes:
            added = self.trace.add(node.replace(inputs=tuple(values[v] for v in node.inputs)))
            values.update(zip(node.outputs, added.outputs))
        for tensor, value in zip(outputs, graph.outputs):
            self.bind(tensor, values[value])


def active_tape() -> Tape | None:
    return _active.get()


@contextlib.contextmanager
def recording(tape: Tape):
    """`tape` records the primitives that run eagerly inside the block."""
    token = _active.set(tape)
    try:
        yield tape
    finally:
        _active.reset(token)
