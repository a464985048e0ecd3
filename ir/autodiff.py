"""Reverse-mode automatic differentiation on the IR: `differentiate(graph)` replaces every Gradient node.

A traced program asks for a gradient with a node (ir/ops/gradient.py):

    %loss = ...forward...                            the forward computation, already in the graph
    %gx, %gw = Gradient(%loss, %x, %w) {seeds=1}      d loss / d x, d loss / d w

`differentiate` replaces it by backward nodes placed where it stood, so the graph computes the forward
results and the gradients together and every later pass sees both:

    1. the active region: nodes before the Gradient node that depend on a wrt value and that a seed
       depends on (nothing else can carry a cotangent)
    2. cotangents start at the seeds (1, or the sens inputs) and flow back through the region in reverse
       order: each node's gradient rule (its op row's `grad`, written with primitives through an
       ir.GraphBuilder) turns the cotangents of its results into cotangents of its inputs
    3. a value read by several nodes sums its cotangents; a wrt value no seed depends on gets zeros

Cotangents flow through float values only; StopGradient passes none. A float result with a cotangent whose
op has no rule is an error naming the op and its node. Backward nodes are named after the forward node
they differentiate, `Gradients/<forward scope name>/<Op>-<k>`, as MindSpore names them. Gradient nodes are
replaced in order, so a gradient of a gradient works when the rules it meets have rules themselves.
Afterwards StopGradient nodes are replaced by their inputs, and Bprop nodes (a Cell's results whose
gradient its own `bprop` gives: their rule inlines it) by the results they stand for.
"""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.errors import IRError
from ir.graph import Graph, Node, Value
from ir.ops import get
from ir.ops.gradient import split_gradient_inputs

GRADIENT = "Gradient"
STOP_GRADIENT = "StopGradient"
BPROP = "Bprop"       # a Cell's results, differentiated by the Cell's own bprop


class GradientError(IRError):
    """A gradient that cannot be taken: an op without a rule, a rule that returned the wrong type."""


def phase_of(node: Node, updates_only: frozenset = frozenset()) -> str:
    """The training phase a launch of `node` belongs to: "backward" when any op it computes is a
    backward node (named `Gradients/...`); "optimizer" when it is in `updates_only` (`update_nodes`);
    else "forward"."""
    members = [n for n in node.subgraph.nodes if n.op != "Const"] if node.subgraph is not None else [node]
    if any(n.name.startswith("Gradients/") for n in members):
        return "backward"
    return "optimizer" if node in updates_only else "forward"


def after_gradients(graph: Graph, tainted_inputs=()) -> frozenset:
    """The nodes that use gradients without being backward nodes: a loss-scale's unscaling and overflow
    check, gradient clipping, an optimizer (mixed precision keeps them float32). `tainted_inputs`: the
    inputs of `graph` that carry gradients from outside it (the captures of an If's branch)."""
    return gradient_taint(graph, tainted_inputs)[0]


def gradient_taint(graph: Graph, tainted_inputs=()) -> tuple[frozenset, frozenset]:
    """(after_gradients, every node carrying gradients: backward nodes, those after them, and the Input
    nodes of `tainted_inputs`)."""
    out: set = set()
    tainted: set = {v.node for v in tainted_inputs}
    for node in graph.nodes:
        backward = node.name.startswith("Gradients/")
        if not backward and any(v.node in tainted for v in node.inputs):
            out.add(node)
        if backward or node in out:
            tainted.add(node)
    return frozenset(out), frozenset(tainted)


def update_nodes(graph: Graph) -> frozenset:
    """The nodes that compute only Parameter updates: Assigns, and nodes every result of which is read
    only by such nodes (an optimizer's arithmetic, its step counter, a learning-rate schedule)."""
    users = graph.users()
    outputs = {v for v in graph.outputs if v.node.op != "Assign"}
    only: set = set()
    for node in reversed(graph.nodes):
        if node.op == "Assign" or (
                node.op != "Const" and not any(v in outputs for v in node.outputs)
                and any(users.get(v) for v in node.outputs)
                and all(u in only for v in node.outputs for u in users.get(v, ()))):
            only.add(node)
    return frozenset(only)


def needs_autodiff(graph: Graph) -> bool:
    return any(n.op in (GRADIENT, STOP_GRADIENT, BPROP) for n in graph.nodes)


def differentiate(graph: Graph) -> Graph:
    """`graph` with every Gradient node replaced by the nodes computing its gradients, and every
    StopGradient node by its input."""
    while True:
        position = next((i for i, n in enumerate(graph.nodes) if n.op == GRADIENT), None)
        if position is None:
            break
        graph = _replace_gradient(graph, position)
    return graph.rewrite(lambda node, inputs, emit: inputs if node.op == STOP_GRADIENT else
                         _bprop_results(node, inputs) if node.op == BPROP else None)


def _bprop_results(node: Node, inputs: tuple[Value, ...]) -> tuple[Value, ...]:
    n = node.attr("inputs")
    return inputs[n:n + node.attr("outputs")]


def _replace_gradient(graph: Graph, position: int) -> Graph:
    target = graph.nodes[position]

    def replace(node, inputs, emit):
        if node is not target:
            return None
        return backward(graph.nodes[:position], target, emit)
    return graph.rewrite(replace)


def _active(nodes, wrt: tuple[Value, ...], seeds: tuple[Value, ...]) -> list[Node]:
    """The nodes a cotangent can pass through: reading a float value that depends on `wrt`, and read
    (through any path) by a seed. The wrt values are the differentiated function's inputs, independent
    of each other: nodes they themselves depend on (one wrt value computed from another before the
    function ran) are outside it."""
    upstream: set[Node] = set()
    stack = [v.node for v in wrt]
    while stack:
        node = stack.pop()
        if node not in upstream:
            upstream.add(node)
            stack.extend(v.node for v in node.inputs)
    reached = {v for v in wrt if v.dtype.is_float}
    forward = []
    for node in nodes:
        if node.op != STOP_GRADIENT and node not in upstream and any(v in reached for v in node.inputs):
            forward.append(node)
            reached.update(v for v in node.outputs if v.dtype.is_float)
    needed = {v.node for v in seeds}
    active = []
    for node in reversed(forward):
        if node in needed:
            active.append(node)
            needed.update(v.node for v in node.inputs)
    active.reverse()
    return active


def backward(nodes, gradient: Node, emit) -> tuple[Value, ...]:
    """Emit the backward nodes of one Gradient node (whose forward nodes are `nodes`); its results."""
    seeds, wrt, sens = split_gradient_inputs(gradient.inputs, gradient.attr_dict)
    cotangents: dict[Value, list[Value]] = {}
    own = GraphBuilder(scope=_grad_scope(gradient.name or "Default"), emit=emit)   # seeds and zeros
    for i, seed in enumerate(seeds):
        start = sens[i] if sens else own.fill(1.0, seed.type)
        cotangents.setdefault(seed, []).append(start)

    for node in reversed(_active(nodes, wrt, seeds)):
        douts = tuple(_total(cotangents.pop(v, None), v, emit) for v in node.outputs)
        if all(d is None for d in douts):
            continue
        for value, d in zip(node.inputs, _apply_rule(node, douts, emit)):
            if d is not None and value.dtype.is_float:
                cotangents.setdefault(value, []).append(d)

    return tuple(_total(cotangents.get(v), v, emit) or own.fill(0.0, v.type) for v in wrt)


def _grad_scope(name: str) -> str:
    return f"Gradients/{name}"


def _total(parts: list[Value] | None, value: Value, emit) -> Value | None:
    """The sum of a value's cotangents (None for none), named after the node that made the value."""
    if not parts:
        return None
    total = parts[0]
    if len(parts) > 1:
        b = GraphBuilder(scope=_grad_scope(value.node.name or value.node.op), emit=emit)
        for part in parts[1:]:
            total = b.op("Add", total, part)
    return total


def _where(node: Node) -> str:
    return f"{node.op} ({node.name})" if node.name else node.op


def _apply_rule(node: Node, douts: tuple[Value | None, ...], emit) -> tuple[Value | None, ...]:
    """The cotangents of `node`'s inputs from its op row's rule, checked."""
    if node.subgraph is not None:
        raise GradientError(f"cannot differentiate {_where(node)}: a composite is differentiated before "
                            "fusion, through the ops it holds")
    rule = get(node.op).grad
    if rule is None:
        hint = (" (a host function: define bprop(self, *inputs, out, dout) on the Cell that calls it)"
                if node.op in ("PyFunc", "HostCall") else "")
        raise GradientError(f"{_where(node)} has no gradient rule{hint}")
    b = GraphBuilder(scope=_grad_scope(node.name or node.op), emit=emit)
    dins = tuple(rule(b, node, douts))
    if len(dins) != len(node.inputs):
        raise GradientError(f"the gradient rule of {node.op} returned {len(dins)} cotangent(s) for "
                            f"{len(node.inputs)} input(s) ({_where(node)})")
    for i, (value, d) in enumerate(zip(node.inputs, dins)):
        if d is not None and d.type != value.type:
            raise GradientError(f"the gradient rule of {node.op} gave input {i} a cotangent of {d.type}, "
                                f"the input is {value.type} ({_where(node)})")
    return dins
