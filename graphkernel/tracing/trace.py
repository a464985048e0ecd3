"""Tracing: GRAPH_MODE runs `construct` once on symbolic values and records the IR.

    with Trace() as t:                      # the active trace (a context-local stack)
        x = t.input(TensorType(...), "x")   # a SymbolicTensor standing for a graph input
        y = cell.construct(x)               # primitives called on symbolic values add nodes to t
    graph = t.finish(outputs)

A SymbolicTensor refuses to become a Python float/int or a numpy array, and `bool()` of one is a
decision: under `run_paths` (a Cell's compile) construct is traced once per path through its tensor
conditions and the paths become If nodes (graphkernel/tracing/branching.py); elsewhere it is an error saying
that graph mode needs static control flow. Scope names follow MindSpore: `Default/<cell path>/<Op>-op<N>`.
Every input, constant and node is checked against the memory limit as it is added (ir/limits.py,
graphkernel/settings/limits.py), so a shape too large fails here, naming the op, before anything is allocated.
"""
from __future__ import annotations

import contextvars

import numpy as np

from ir.dtypes import DType
from ir.errors import GraphKernelError
from ir.graph import Graph, Literal, Node, TensorType, Value, input_node
from ir.limits import check_node
from ir.ops import make_node
from ir.ops.host import to_host_call
from graphkernel.settings.user_frame import user_frame
from graphkernel.tracing.branching import (MAX_PATHS, BranchError, Leaf, Segment, build_graph, describe_frame,
                                   loop_statement, same_step)
from graphkernel.context import max_device_memory
from graphkernel import tensor as _tensor
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
        trace = active_trace()
        if trace is None or not trace.branching:
            self._no_data("bool()")
        return trace.decide(self.value)

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

    def __repr__(self):
        return f"SymbolicTensor({self.value.type})"


class Trace:
    def __init__(self):
        self.inputs: list[Value] = []
        self.branching = False              # bool() of a traced tensor decides (under run_paths)
        self.root = Segment()               # what the runs of construct recorded (graphkernel/tracing/branching.py)
        self._segment = self.root           # where this run adds nodes, and how many it has replayed there
        self._cursor = 0
        self._plan: list[bool] = []         # the choices this run replays
        self._taken: list[bool] = []        # the choices this run took
        self._new: list[int] = []           # depths of the decisions this run met first
        self.parameters: list = []          # Parameters read by construct, in input order
        self._param_values: dict[int, Value] = {}
        self.checks: list = []              # host callables run before each call (graphkernel/compiler.py)
        self.entered: dict = {}             # id -> every Cell whose construct the trace ran (nested calls)
        self._token = None
        self._reset_run()

    def _reset_run(self) -> None:
        """The state of one run of construct."""
        self.scope: list[str] = ["Default"]
        self.cells: list = []               # the Cells whose construct is running, outermost first
        self.op_count = 0
        self._assigned: dict[int, Value] = {}     # id(Parameter) -> its new value (read by later reads)
        self.update_conditions: list[Value] = []  # bool scalars: an update inside happens only if all hold
        self.random_calls: list[int] = [0]  # per scope level: random ops drawn so far in that construct
        self._random = None                 # the generator offset Parameter, once a random op reads it
        self.host_depth = 0                 # > 0 inside graphkernel.host_scope(): nodes run on the host
        self.memory_limit = max_device_memory()   # bytes one tensor may take (None: no limit)

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
        seg = self._segment
        if self._cursor < len(seg.nodes):   # a replay: the node the first run added here
            recorded = seg.nodes[self._cursor]
            if not same_step(recorded, node):
                self._diverged(f"it added {node.op} ({node.name}) where it first added {recorded.op} "
                               f"({recorded.name})")
            node = recorded
        elif seg.cond is not None:
            self._diverged(f"it added {node.op} ({node.name}) where it first decided on a tensor condition")
        else:
            seg.nodes.append(node)
        self._cursor += 1
        return node

    @property
    def nodes(self) -> list[Node]:
        """The nodes of this run so far, along its path."""
        out, seg = [], self.root
        for choice in self._taken:
            out += seg.nodes
            seg = seg.child(choice)
        return out + seg.nodes[:self._cursor]

    def _diverged(self, what: str):
        raise BranchError(f"construct did something else when traced again for another branch of a tensor "
                          f"condition: {what}. Under tensor conditions construct is traced once per path; it "
                          "must do the same thing each time up to the condition (no Python state that "
                          "changes from one trace to the next).")

    # -- tensor conditions ------------------------------------------------------------------------
    def decide(self, value: Value) -> bool:
        """bool() of a traced tensor: the branch this run takes (graphkernel/tracing/branching.py)."""
        frame = user_frame()
        where = describe_frame(frame)
        if value.shape not in ((), (1,)):
            raise BranchError(f"a tensor condition must have shape () or (1,) (MindSpore's rule), the condition "
                              f"of {where} is {value.type}: reduce it to one element (P.ReduceMax, P.ReduceSum) "
                              "or reshape it")
        if loop_statement(frame) == "while":
            raise BranchError(f"`while` on a tensor condition ({where}) is not supported in GRAPH_MODE: its trip "
                              "count depends on data. Loop a fixed number of times with an `if` inside, use "
                              "P.Select, or run in PYNATIVE_MODE")
        cond = value
        if cond.shape != ():
            cond = self.add(make_node("Reshape", (cond,), {"shape": ()}, name=self.scope_name("Reshape"))).out
        if cond.dtype is not DType.bool:
            zero = self.constant(np.zeros((), cond.dtype.np))
            cond = self.add(make_node("Equal", (cond, zero), name=self.scope_name("Equal"))).out
            cond = self.add(make_node("LogicalNot", (cond,), name=self.scope_name("LogicalNot"))).out   # != 0
        name = self.scope_name("If")
        seg = self._segment
        if self._cursor < len(seg.nodes):
            self._diverged(f"it decided on a tensor condition at {where} where it first added "
                           f"{seg.nodes[self._cursor].op}")
        if seg.cond is None:   # met first: the True branch now, the driver queues the False one
            if len(self._taken) < len(self._plan):
                self._diverged(f"it met a new tensor condition at {where}")
            seg.cond, seg.where, seg.name = cond, where, name
            seg.then, seg.else_ = Segment(), Segment()
            self._new.append(len(self._taken))
            choice = True
        else:
            if seg.cond is not cond:
                self._diverged(f"the condition at {where} is another value than the first time")
            choice = self._plan[len(self._taken)] if len(self._taken) < len(self._plan) else True
        self._taken.append(choice)
        self._segment, self._cursor = seg.child(choice), 0
        return choice

    def run_paths(self, run):
        """Run `run()` (tracing construct; it returns (result values, result tree)) once per path through
        the tensor conditions it meets. The graph is then `graph()`."""
        self.branching = True
        pending: list[list[bool]] = [[]]
        paths = 0
        while pending:
            plan = pending.pop()
            paths += 1
            if paths > MAX_PATHS:
                raise BranchError(f"construct has more than {MAX_PATHS} paths through its tensor conditions (an "
                                  "`if` on a tensor inside a Python loop doubles them per iteration): use P.Select")
            self._start_run(plan)
            outputs, tree = run()
            self.end_run(outputs, tree)
            pending += [self._taken[:depth] + [False] for depth in reversed(self._new)]

    def _start_run(self, plan: list[bool]) -> None:
        self._reset_run()
        self._segment, self._cursor = self.root, 0
        self._plan, self._taken, self._new = plan, [], []

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

    def end_run(self, outputs: list[Value], tree=None) -> None:
        """The end of a run of construct: its results (and their nesting), and the Parameters it assigned.
        A run that draws random numbers advances the generator's offset by one."""
        if self._random is not None and id(self._random) not in self._assigned:
            ref = self._param_values[id(self._random)]
            one = self.constant(np.ones((1,), np.int32))
            self.assign(self._random, self.add(make_node("Add", (ref, one), name=self.scope_name("Add"))).out)
        seg = self._segment
        if self._cursor < len(seg.nodes) or seg.cond is not None:
            self._diverged("it returned before the point it reached the first time")
        seg.leaf = Leaf(list(outputs), dict(self._assigned), tree)

    def graph(self) -> Graph:
        """The traced graph: the results, then one Assign per Parameter a path assigns (ir/ops/state.py).
        Paths through tensor conditions are If nodes; each returns the results and the new values."""
        leaves = _leaves(self.root)
        trees = {repr(leaf.tree) for leaf in leaves}
        if len(trees) > 1:
            raise BranchError("construct returns differently nested results on different paths through its "
                              f"tensor conditions: {' vs '.join(sorted(trees))}")
        assigned = [p for p in self.parameters if any(id(p) in leaf.assigned for leaf in leaves)]
        count = len(leaves[0].outputs)
        if any(len(leaf.outputs) != count for leaf in leaves):
            raise BranchError("construct returns a different number of results on different paths through its "
                              "tensor conditions")

        def leaf_values(leaf: Leaf) -> list[Value]:
            return list(leaf.outputs) + [leaf.assigned.get(id(p), self._param_values[id(p)]) for p in assigned]

        def describe_result(k: int) -> str:
            return f"result {k} of construct" if k < count else f"Parameter {assigned[k - count].name}"

        nodes, values = build_graph(self.root, self.inputs, leaf_values, describe_result)
        outputs = values[:count]
        for param, value in zip(assigned, values[count:]):
            ref = self._param_values[id(param)]
            node = make_node("Assign", (ref, value), name=self.scope_name("Assign"))
            check_node(node, self.memory_limit)
            nodes.append(node)
            outputs.append(node.out)
        return Graph(self.inputs, nodes, outputs)

    def finish(self, outputs: list[Value]) -> Graph:
        """The graph of a trace run once (a recording, a one-op call, a bprop): `end_run`, then `graph`."""
        self.end_run(outputs)
        return self.graph()

    @property
    def tree(self):
        """The nesting of construct's results (the same on every path: `graph` checks)."""
        return _leaves(self.root)[0].tree


def _leaves(seg: Segment) -> list[Leaf]:
    if seg.leaf is not None:
        return [seg.leaf]
    return _leaves(seg.then) + _leaves(seg.else_)


def active_trace() -> Trace | None:
    return _active.get()


def _parameter_condition(param) -> bool | None:
    """bool() of a Parameter in a trace that decides: the branch its current value selects."""
    trace = _active.get()
    if trace is None or not trace.branching:
        return None
    return trace.decide(trace.parameter(param))


def _parameter_value(param):
    """Parameter.value() in a trace: the value it holds at this point of construct."""
    trace = _active.get()
    return None if trace is None else SymbolicTensor(trace.parameter(param))


_tensor.TRACED_CONDITION[0] = _parameter_condition
_tensor.TRACED_VALUE[0] = _parameter_value
