"""Control flow: a conditional that runs one of two subgraphs.

    If(cond, x_0..x_n-1) {then=Branch(G_then), else=Branch(G_else)}
        cond: a one-element bool tensor (shape () or (1,)); x_i: the values the branches read (their
        captures). Both branches take (x_0..x_n-1), in that order and of those types, and return
        results of the same types: the If's results. Only the branch `cond` selects runs: the other
        launches nothing, and a host op in it is never called.

A branch is a closed graph (it reads nothing but its inputs) and may hold If nodes itself (nested
conditionals); it holds no Assign: the Parameters a branch updates leave it as results, and the
enclosing graph assigns them (ir/ops/state.py), so an update inside a branch not taken writes the
Parameter its own old value. The reference interpreter (ir/interpret.py), the pipeline (each pass runs
inside each branch, graphkernel/passes/pipeline.py) and the lowering (kernels/lower.py: one Program per branch)
know the op; the numpy reference of the row itself refuses, since it has no interpreter to run a graph.

    branches(node)  -> (then graph, else graph) of an If node, () of any other node
"""
from __future__ import annotations

from ir.dtypes import DType
from ir.errors import IRError, ShapeError
from ir.graph import Branch, Graph, Node
from ir.ops.registry import Api, Attr, OpDef, Pattern, Precision, register

IF = "If"


def _check_branch(value):
    if not isinstance(value, Branch):
        raise IRError(f"a branch must be a Branch (a graph), got {type(value).__name__}")
    return value


def _types(values) -> str:
    return "(" + ", ".join(str(v.type) for v in values) + ")"


def _if_infer(types, attrs):
    cond, captures = types[0], types[1:]
    if cond.dtype is not DType.bool or cond.size != 1:
        raise ShapeError(f"the condition must be a one-element bool tensor, got {cond}")
    then, else_ = attrs["then"].graph, attrs["else"].graph
    for label, g in (("then", then), ("else", else_)):
        got = tuple(v.type for v in g.inputs)
        if got != tuple(captures):
            raise ShapeError(f"the {label} branch takes {_types(g.inputs)}, the If passes "
                             f"({', '.join(map(str, captures))})")
    if tuple(v.type for v in then.outputs) != tuple(v.type for v in else_.outputs):
        raise ShapeError(f"the branches return different types: then {_types(then.outputs)}, else "
                         f"{_types(else_.outputs)}")
    return tuple(v.type for v in then.outputs)


def _no_reference(arrays, attrs):
    raise IRError("an If node runs through the interpreter (ir.interpret), which runs the branch taken")


register(OpDef(IF, Pattern.OPAQUE, None, _if_infer, _no_reference,
               (Attr("then", check=_check_branch), Attr("else", check=_check_branch)),
               doc="runs its then branch if the condition holds, else its else branch (a conditional)",
               domain="any",
               precision=Precision("black", True, "its branches are graphs of their own, for the types they take"),
               api=Api(primitive=False)))   # no rule: a branch is differentiated as it is traced


def branches(node: Node) -> tuple[Graph, ...]:
    """The (then, else) graphs of an If node; () for any other node."""
    if node.op != IF:
        return ()
    return node.attr("then").graph, node.attr("else").graph


def with_branches(node: Node, then: Graph, else_: Graph) -> Node:
    """The If node with new branches (same captures; a pass rewrote the branches inside)."""
    return node.replace(attrs={**node.attr_dict, "then": Branch(then), "else": Branch(else_)})


def map_branches(graph: Graph, fn) -> Graph:
    """`graph` with `fn(branch graph) -> graph` applied to every branch of its If nodes (at any depth:
    `fn` sees nested branches through its own call of map_branches, or here, innermost first)."""
    if not any(n.op == IF for n in graph.nodes):
        return graph

    def visit(node, inputs, emit):
        if node.op != IF:
            return None
        then, else_ = (fn(map_branches(g, fn)) for g in branches(node))
        new = with_branches(node, then, else_)
        return new.replace(inputs=inputs) if inputs != node.inputs else new
    return graph.rewrite(visit)
