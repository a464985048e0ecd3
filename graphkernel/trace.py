"""Tracing: GRAPH_MODE runs `construct` once on symbolic values and records the IR.

    with Trace() as t:                      # the active trace (a context-local stack)
        x = t.input(TensorType(...), "x")   # a SymbolicTensor standing for a graph input
        y = cell.construct(x)               # primitives called on symbolic values add nodes to t
    graph = t.finish(outputs)

A SymbolicTensor refuses to become a Python bool/float/int or a numpy array: graph mode needs static
control flow, and the message says so. Scope names follow MindSpore: `Default/<cell path>/<Op>-op<N>`.
Every input, constant and node is checked against the memory limit as it is added (ir/limits.py,
graphkernel/limits.py), so a shape too large fails here, naming the op, before anything is allocated.
"""
from __future__ import annotations

import contextvars

import numpy as np

from ir.errors import GraphKernelError
from ir.graph import Graph, Literal, Node, TensorType, Value, input_node
from ir.limits import check_node
from ir.ops import make_node
from ir.ops.host import to_host_call
from graphkernel.context import max_device_memory
from graphkernel.tensor import TensorOps

_active: contextvars.ContextVar = contextvars.ContextVar("graphkernel_trace", default=None)


class GraphModeError(GraphKernelError, TypeError):
    """Something construct did that a traced graph cannot express."""


class SymbolicTensor(TensorOps):
    """A value of the graph being traced: has a shape and a dtype, but no data."""

    __slots__ = ("value",)

    def __init__(self, value: Value):
        self.value = value

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def ndim(self) -> int:
        return len(self.value.shape)

    def __len__(self):
        if not self.shape:
            raise GraphModeError("len() of a 0-d tensor")
        return self.shape[0]

    def _no_data(self, what: str):
        raise GraphModeError(
            f"{what} of a traced tensor ({self.value.type}): in GRAPH_MODE, construct runs once on "
            "symbolic values, so Python control flow may depend only on shapes, dtypes and constants, "
            "not on tensor data. Use P.Select for data-dependent choices, or PYNATIVE_MODE.")

    def __bool__(self):
        self._no_data("bool()")

    def __float__(self):
        self._no_data("float()")

    def __int__(self):
        self._no_data("int()")

    def __index__(self):
        self._no_data("using as an index")

    def __array__(self, *args, **kwargs):
        self._no_data("converting to a numpy array")

    def asnumpy(self):
        self._no_data("asnumpy()")

    def __iter__(self):
        self._no_data("iterating over")

    def __getitem__(self, index):
        raise GraphModeError(
            f"indexing a traced tensor ({self.value.type}) is not supported in GRAPH_MODE: use "
            "P.Reshape, P.Transpose or P.Select, or PYNATIVE_MODE")

    def __repr__(self):
        return f"SymbolicTensor({self.value.type})"


class Trace:
    def __init__(self):
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.scope: list[str] = ["Default"]
        self.cells: list = []               # the Cells whose construct is running, outermost first
        self.op_count = 0
        self.parameters: list = []          # Parameters read by construct, in input order
        self._param_values: dict[int, Value] = {}
        self._assigned: dict[int, Value] = {}     # id(Parameter) -> its new value (read by later reads)
        self.update_conditions: list[Value] = []  # bool scalars: an update inside happens only if all hold
        self.checks: list = []              # host callables run before each call (graphkernel/compiler.py)
        self.random_calls: list[int] = [0]  # per scope level: random ops drawn so far in that construct
        self._random = None                 # the generator offset Parameter, once a random op reads it
        self.host_depth = 0                 # > 0 inside graphkernel.host_scope(): nodes run on the host
        self.memory_limit = max_device_memory()   # bytes one tensor may take (None: no limit)
        self._token = None

    def __enter__(self) -> Trace:
        self._token = _active.set(self)
        return self

    def __exit__(self, *exc):
        _active.reset(self._token)

    def input(self, type_: TensorType, name: str) -> SymbolicTensor:
        node = input_node(len(self.inputs), type_, name)
        check_node(node, self.memory_limit)
        value = node.out
        self.inputs.append(value)
        return SymbolicTensor(value)

    def parameter(self, param) -> Value:
        """The value of a Parameter at this point of construct: the graph input standing for it (added on
        first use, after the call's inputs), or the value last assigned to it."""
        key = id(param)
        if key in self._assigned:
            return self._assigned[key]
        return self.parameter_input(param)

    def parameter_input(self, param) -> Value:
        key = id(param)
        if key not in self._param_values:
            name = param.name or f"Parameter{len(self.parameters)}"
            self._param_values[key] = self.input(TensorType(param.shape, param.dtype), name).value
            self.parameters.append(param)
        return self._param_values[key]

    def assign(self, param, value: Value) -> None:
        """`param` holds `value` from here on: later reads see it, and the call writes it into the
        Parameter (one Assign at the end of the graph). Under update conditions, the Parameter keeps its
        value unless they all hold."""
        old = self.parameter(param)
        if value.type != old.type:
            raise GraphModeError(f"assigning {value.type} to Parameter {param.name} of type {old.type}")
        if self.update_conditions:
            cond = self.update_conditions[0]
            for c in self.update_conditions[1:]:
                cond = self.add(make_node("LogicalAnd", (cond, c), name=self.scope_name("LogicalAnd"))).out
            value = self.add(make_node("Select", (cond, value, old), name=self.scope_name("Select"))).out
        self.parameter_input(param)
        self._assigned[id(param)] = value

    def captured_arrays(self) -> list:
        return [p.asnumpy() for p in self.parameters]

    def constant(self, array) -> Value:
        return self.add(make_node("Const", (), {"value": Literal(array)})).out

    def scope_name(self, op: str) -> str:
        name = f"{'/'.join(self.scope)}/{op}-op{self.op_count}"
        self.op_count += 1
        return name

    def add(self, node: Node) -> Node:
        check_node(node, self.memory_limit)
        if self.host_depth:
            node = to_host_call(node)
        self.nodes.append(node)
        return node

    def random_offset(self, param) -> Value:
        """The generator offset every random op of this call reads (its value at the call's start);
        the call advances it by one."""
        self._random = param
        return self.parameter_input(param)

    def random_site(self) -> str:
        """Where the next random op sits: the cell path and its rank among this construct's draws."""
        k = self.random_calls[-1]
        self.random_calls[-1] += 1
        return f"{'/'.join(self.scope)}#{k}"

    def finish(self, outputs: list[Value]) -> Graph:
        """The graph: `outputs`, then one Assign per Parameter construct assigned (ir/ops/state.py)."""
        if self._random is not None and id(self._random) not in self._assigned:
            ref = self._param_values[id(self._random)]
            one = self.constant(np.ones((1,), np.int32))
            self.assign(self._random, self.add(make_node("Add", (ref, one), name=self.scope_name("Add"))).out)
        updates = []
        for param in self.parameters:
            value = self._assigned.get(id(param))
            if value is not None:
                ref = self._param_values[id(param)]
                updates.append(self.add(make_node("Assign", (ref, value),
                                                  name=self.scope_name("Assign"))).out)
        return Graph(self.inputs, self.nodes, list(outputs) + updates)


def active_trace() -> Trace | None:
    return _active.get()
