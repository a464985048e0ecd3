"""Launches and observed runs of compiled graphs: the per-launch view shared by the Profiler, the data
dump and the overflow check.

    CompiledGraph.run_arrays
        nothing observes           the plain path (Program.run / ir.interpret); nothing here runs
        a Profiler is active, or the graph was compiled with a data dump or an overflow check
            run_observed(compiled, arrays, profiler)
                sink.begin_step(graph, step)                       once per call (a step)
                sink.kernel(graph, step, launch, inputs, outputs, seconds)
                                                                   once per kernel launch, in order
                sink.end_step(graph, step, seconds, launches)      once per call

A Launch is what one kernel launch is to a user: its position in the graph, the name of the node it
computes (a scope name `Default/.../Mul-op0`, or a composite's `Fused_<ops>_<n>`: the name the dumps
and the fusion log give it), its op type (a primitive's op, a composite's name), the compiled kernel
it runs (shared by every composite of one structure), its op types, block_dim, input and output types,
and the names of the primitives a composite holds. On the Ascend
target the launches are the Program's steps (kernels.Program.run with an observer); on the CPU
target every top-level node that computes is one launch, run by the numpy reference
(ir.interpret with an observer: it shows each node it runs). The arrays a
sink receives have their tensor's shape; on the Ascend target they are the executor's buffers,
reused by the next call, so a sink reads or copies them while it is called.

Steps are numbered per compiled graph from 0. Observed runs of one graph are serialized (a lock).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ir.graph import Graph, Node, TensorType
from ir.interpret import interpret
from ir.ops import branches, placement
from ir.symbolic import SIZE_VALUE

# Ops that are no kernel launch on the reference target: constants are buffers (a SizeValue is the
# constant of a call's size), a Reshape is a view.
NOT_LAUNCHED = ("Const", "Reshape", SIZE_VALUE)


@dataclass(frozen=True)
class Launch:
    index: int                      # position among the graph's launches
    kernel: str                     # the compiled kernel (Ascend: generated, Fused_Mul_Add_<hash>), or ""
    name: str                       # the node's name: a scope name or a composite's Fused_<ops>_<n>
    op_types: tuple[str, ...]
    block_dim: int | None           # None on the CPU target
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]
    variant: str = ""               # elementwise | rows | split | numpy | reference (Ascend)
    members: tuple[str, ...] = ()   # names of the primitives inside a composite
    composite: bool = False         # it computes a composite
    target: str = "device"          # device | host | copy (a host<->device copy)
    standin: bool = False           # this call ran the launch's stand-in: its kernel was building

    @property
    def op_type(self) -> str:
        """A composite's name, or the primitive's op (the profiler's op_type)."""
        return self.name if self.composite else self.op_types[0]


@dataclass
class GraphObservation:
    """Per compiled graph: its launches (on the CPU target `at` maps each launched node to its Launch),
    its step count, and the sinks compiled with it (data dump, overflow check)."""
    launches: list[Launch]
    at: dict[Node, Launch] = field(default_factory=dict)
    sinks: list = field(default_factory=list)
    steps: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrivals_seen: int = 0          # of the program's kernel arrivals, those handed to the sinks


def _members(node: Node) -> tuple[str, ...]:
    if node.subgraph is None:
        return ()
    return tuple(n.name for n in node.subgraph.nodes if n.op != "Const" and n.name)


def _device_launches(program) -> list[Launch]:
    out = []
    for k, step in enumerate(program.launch_list):   # an If's branches' launches where it stands
        info = step.info
        node = step.values_out[0].node if step.values_out else None
        if info.op_types == ("Copy",):   # an output copy: its value's node is the one that computed it
            node = None
        out.append(Launch(k, info.kernel, info.name, info.op_types, info.block_dim, info.inputs, info.outputs,
                          info.variant, () if node is None else _members(node),
                          node is not None and node.subgraph is not None, info.target))
    return out


def _reference_launches(graph: Graph, skipped: tuple[str, ...], out: dict | None = None) -> dict[Node, Launch]:
    """{node: its Launch} of every top-level node that computes; an If is no launch, the nodes of its
    branches are (then's before else's), numbered where it stands."""
    out = {} if out is None else out
    for node in graph.nodes:
        if node.op in skipped:
            continue
        if branches(node):
            for g in branches(node):
                _reference_launches(g, skipped, out)
            continue
        ops = tuple(n.op for n in node.subgraph.nodes if n.op != "Const") if node.subgraph else (node.op,)
        out[node] = Launch(len(out), "", node.name or node.op, ops, None, tuple(v.type for v in node.inputs),
                           node.types, "", _members(node), node.subgraph is not None, placement(node))
    return out


def observe_graph(program, graph: Graph) -> GraphObservation:
    """The observation state of a compiled graph (its program on the Ascend target, else None), no sinks yet."""
    if program is not None:
        return GraphObservation(_device_launches(program))
    at = _reference_launches(graph, NOT_LAUNCHED)
    return GraphObservation(list(at.values()), at)


def observation(compiled) -> GraphObservation:
    """The compiled graph's observation state, made on first use."""
    obs = compiled.observation
    if obs is None:
        obs = compiled.observation = observe_graph(compiled.program, compiled.graph)
    return obs


def launches(compiled) -> list[Launch]:
    """The launches of a compiled graph: its program's steps on the device, else its computing nodes."""
    return observe_graph(compiled.program, compiled.graph).launches


def run_observed(compiled, arrays, profiler=None, done: list | None = None) -> list[np.ndarray]:
    """Run `compiled` on arrays, showing every launch to `profiler` (the active Profiler, if any) and to
    the sinks the graph was compiled with.

    A step that updates Parameters in place (the device's program) must not stop once it has started
    writing them (`compiled.commit.launch`): a sink's exception from that launch on is held, no sink
    sees the launches after it, and it is raised once the step is done; `done` (a list) gets True
    appended when the program's launches have all run."""
    obs = observation(compiled)
    with obs.lock:
        sinks = obs.sinks if profiler is None else [profiler, *obs.sinks]
        step = obs.steps
        obs.steps += 1
        for s in sinks:
            s.begin_step(compiled, step)
        relay = _Relay(compiled, step, obs, sinks)
        start = time.perf_counter()
        if compiled.program is not None:
            results = compiled.program.run(arrays, relay)
            if done is not None:
                done.append(True)
        else:
            graph = compiled.graph_at(arrays)
            if graph is not compiled.graph:   # symbolic sizes: the graph at this call's, its nodes in order
                relay.at = _reference_launches(graph, NOT_LAUNCHED)
            results = interpret(graph, arrays, relay)
        seconds = time.perf_counter() - start
        for s in sinks:
            s.end_step(compiled, step, seconds, relay.count)
        _deliver_arrivals(compiled, obs, sinks)
    if relay.held is not None:
        raise relay.held
    return results


def _deliver_arrivals(compiled, obs: GraphObservation, sinks: list) -> None:
    """The kernels that arrived from the background build since the last observed call
    (kernels.executor.Arrival), to the sinks that take them (`kernel_arrived(compiled, arrival)`)."""
    arrivals = [] if compiled.program is None else compiled.program.arrivals
    for arrival in arrivals[obs.arrivals_seen:]:
        for s in sinks:
            if hasattr(s, "kernel_arrived"):
                s.kernel_arrived(compiled, arrival)
    obs.arrivals_seen = len(arrivals)


class _Relay:
    """The run's observer: passes each launch on to the sinks. The executor shows it kernels by their
    index, with flat buffers (shaped here); the reference interpreter shows it nodes (those that are
    no launch, constants and Reshapes, are passed over). A graph of symbolic sizes (docs/shapes.md)
    shows its sinks each launch with its types at the call's sizes."""

    def __init__(self, compiled, step: int, obs: GraphObservation, sinks: list):
        self.compiled, self.step, self.obs, self.sinks = compiled, step, obs, sinks
        self.at = obs.at    # node -> Launch on the CPU target (of the graph at the call's sizes)
        self.dynamic = getattr(compiled, "dynamic", False)
        self.count = 0
        commit = getattr(compiled, "commit", None)
        self.commit = None if commit is None else commit.launch   # from here on the step must finish
        self.held = None    # a sink's exception raised at or after the commit launch

    def kernel(self, index, info, inputs, outputs, seconds):
        launch = self.obs.launches[index]
        if self.dynamic:   # the plan's launch at the call's sizes (kernels/plan.py)
            launch = replace(launch, inputs=info.inputs, outputs=info.outputs, block_dim=info.block_dim,
                             variant=info.variant, kernel=info.kernel)
        if getattr(info, "standin", False):
            launch = replace(launch, standin=True)
        self.deliver(launch, [a.reshape(t.shape) for a, t in zip(inputs, launch.inputs)],
                     [a.reshape(t.shape) for a, t in zip(outputs, launch.outputs)], seconds)

    def node(self, node, inputs, outputs, seconds):
        launch = self.at.get(node)
        if launch is not None:
            self.deliver(launch, inputs, outputs, seconds)

    def deliver(self, launch: Launch, inputs, outputs, seconds: float) -> None:
        self.count += 1
        if self.held is not None:
            return
        try:
            for s in self.sinks:
                s.kernel(self.compiled, self.step, launch, inputs, outputs, seconds)
        except BaseException as e:
            if self.commit is None or launch.index < self.commit:
                raise   # no Parameter written yet: the step stops here, as if it never ran
            self.held = e
