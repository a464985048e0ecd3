"""Tensor conditions in GRAPH_MODE: construct is traced once per path, and the paths become If nodes.

Design: tracing with recorded conditions (path enumeration). `bool()` of a traced one-element tensor
(an `if`, `elif`, `while`, `and`, `or`, `not` on it) is a decision: the first run of construct takes
every new decision as True; the driver (Trace.run_paths) then re-runs construct once for each decision
left unexplored, replaying the choices before it. A replayed run adds the same nodes in the same
order, so the tracer hands back the nodes it recorded the first time (same Values) up to the decision,
and what follows goes into the other branch. The runs make a tree:

    Segment(nodes=[...prefix...], cond=%c)          the nodes before the decision, its condition
       then: Segment(nodes=[...], leaf=Leaf(...))   what the run that took it True did after it,
       else: Segment(nodes=[...], cond=%d)          through to construct's return (a Leaf)
                then: ...  else: ...

`build_graph` turns the tree into IR: a segment's nodes, then one If (ir/ops/control.py) whose branches
are its two subtrees, closed over the values they read from before the decision (the If's inputs).
The rest of construct after an `if` statement runs in both branches (tail duplication: Python gives the
tracer no join point), so an early `return` inside a branch needs nothing special, and fusion sees
each branch as a graph of its own. Each branch returns construct's results and the final value of
every Parameter any path assigns (the value it had at the decision on a path that does not assign it);
the enclosing graph assigns them, so an update happens only on the path that makes it.

A Gradient node asked for inside a branch is differentiated here, along its path (the nodes before the
decision and the branch's own): the gradient of the branch taken. Gradient nodes before any decision
are left for the pipeline's autodiff stage.

The number of paths is capped (`MAX_PATHS`): an `if` on a tensor inside a Python loop doubles them
per iteration.
"""
from __future__ import annotations

import ast
import functools
import linecache
import os
from dataclasses import dataclass, field

from ir.autodiff import GRADIENT, backward
from ir.errors import GraphKernelError
from ir.graph import Branch, Graph, Node, Value, input_node
from ir.ops import make_node

MAX_PATHS = 64


class BranchError(GraphKernelError, TypeError):
    """A tensor condition that cannot be compiled: not one element, a `while`, branches whose results
    differ in type, construct doing something else when it is traced again."""


@dataclass
class Leaf:
    """Where a run ended: construct's results, the values assigned to Parameters (id -> Value), and
    the tree that rebuilds the results' nesting."""
    outputs: list
    assigned: dict
    tree: object


@dataclass
class Segment:
    nodes: list = field(default_factory=list)
    cond: Value | None = None       # the decision ending the segment, a bool scalar
    where: str = ""                 # file:line of the statement that decided
    name: str = ""                  # the If node's scope name
    then: Segment | None = None
    else_: Segment | None = None
    leaf: Leaf | None = None

    def child(self, choice: bool) -> Segment:
        return self.then if choice else self.else_


def same_step(recorded: Node, node: Node) -> bool:
    """Whether a node added on a replay is the one the first run added at that point (the same op on
    the same values, under the same scope name: attrs holding functions may be new objects)."""
    return (recorded.op == node.op and recorded.inputs == node.inputs and recorded.types == node.types
            and recorded.name == node.name)


# --- where a decision is taken ------------------------------------------------------------------
_TREES: dict[str, ast.AST | None] = {}


def _tree(filename: str):
    if filename not in _TREES:
        try:
            _TREES[filename] = ast.parse("".join(linecache.getlines(filename)))
        except (SyntaxError, ValueError):
            _TREES[filename] = None
    return _TREES[filename]


def loop_statement(frame) -> str | None:
    """"while" when the statement deciding at `frame`'s line is a `while` whose condition is on that
    line, else None."""
    if frame is None:
        return None
    return _loop_at(frame.f_code.co_filename, frame.f_lineno)


@functools.lru_cache(maxsize=4096)
def _loop_at(filename: str, line: int) -> str | None:
    tree = _tree(filename)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.While) and node.test.lineno <= line <= (node.test.end_lineno or line):
            return "while"
    return None


def describe_frame(frame) -> str:
    if frame is None:
        return "construct"
    return f"{frame.f_code.co_name} at {os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


# --- the tree as IR -----------------------------------------------------------------------------
def build_graph(root: Segment, inputs: list[Value], leaf_values, describe_result) -> tuple[list[Node], list]:
    """(nodes, result values) of the traced tree: the root's nodes and, if it decides, an If node.
    `leaf_values(leaf)` gives the values a path returns; `describe_result(k)` names result k."""
    return _build(root, [], {}, 0, leaf_values, describe_result)


def _build(seg: Segment, path: list, subst: dict, depth: int, leaf_values, describe_result):
    nodes: list[Node] = []
    for node in seg.nodes:
        inputs = tuple(subst.get(v, v) for v in node.inputs)
        if node.op == GRADIENT and depth > 0:   # a gradient inside a branch: along this path
            results = backward(path + nodes, node.replace(inputs=inputs), nodes.append)
            subst.update(zip(node.outputs, results))
            continue
        new = node if inputs == node.inputs else node.replace(inputs=inputs)
        nodes.append(new)
        if new is not node:
            subst.update(zip(node.outputs, new.outputs))
    if seg.leaf is not None:
        return nodes, [subst.get(v, v) for v in leaf_values(seg.leaf)]
    outer = path + nodes
    then_nodes, then_results = _build(seg.then, outer, dict(subst), depth + 1, leaf_values, describe_result)
    else_nodes, else_results = _build(seg.else_, outer, dict(subst), depth + 1, leaf_values, describe_result)
    for k, (a, b) in enumerate(zip(then_results, else_results)):
        if a.type != b.type:
            raise BranchError(f"{describe_result(k)} is {a.type} when the condition of {seg.where} holds and "
                              f"{b.type} when it does not: both branches must give it one type")
    captures = _free_values([(then_nodes, then_results), (else_nodes, else_results)])
    then = _close(then_nodes, then_results, captures)
    else_ = _close(else_nodes, else_results, captures)
    cond = subst.get(seg.cond, seg.cond)
    node = make_node("If", (cond, *captures), {"then": Branch(then), "else": Branch(else_)}, name=seg.name)
    nodes.append(node)
    return nodes, list(node.outputs)


def _free_values(parts) -> list[Value]:
    """The values the parts read that they do not compute, in order of first use."""
    free: dict[Value, None] = {}
    for nodes, results in parts:
        defined = set()
        for node in nodes:
            for v in node.inputs:
                if v not in defined:
                    free.setdefault(v)
            defined.update(node.outputs)
        for v in results:
            if v not in defined:
                free.setdefault(v)
    return list(free)


def _close(nodes: list[Node], results: list[Value], captures: list[Value]) -> Graph:
    """A graph of `nodes` taking `captures` as its inputs."""
    mapping: dict[Value, Value] = {}
    inputs = []
    for i, v in enumerate(captures):
        name = v.node.name if v.node.op == "Input" else ""
        mapping[v] = input_node(i, v.type, name).out
        inputs.append(mapping[v])
    body = []
    for node in nodes:
        new_inputs = tuple(mapping.get(v, v) for v in node.inputs)
        new = node if new_inputs == node.inputs else node.replace(inputs=new_inputs)
        body.append(new)
        mapping.update(zip(node.outputs, new.outputs))
    return Graph(inputs, body, [mapping.get(v, v) for v in results])
