"""Constant folding: a node whose inputs are all Consts becomes Consts holding its results.

    Mul(Const 2, Const 3)  ->  Const 6          results computed by the op's numpy reference (ir.ops.evaluate)

Exact: the reference is what the node computes (the oracle every backend is tested against), in the node's
own dtypes. Folding must not blow up memory: a result larger than the node's largest input or than
MAX_FOLDED_ELEMENTS elements stays computed (a BroadcastTo of a scalar would otherwise become a buffer as
large as the tensor it fills). Host ops (Pattern.HOST), composites and nodes whose attributes or results
have symbolic sizes (a slice of a constant up to a dynamic length) are not folded.
"""
from __future__ import annotations

from ir.graph import Graph, Literal, Node, Value
from ir.ops import Pattern, branches, evaluate, get, make_node
from ir.symbolic import has_dims
from graphkernel.settings.options import CompileOptions

MAX_FOLDED_ELEMENTS = 4096


def foldable(node: Node, inputs: tuple[Value, ...]) -> bool:
    if node.op == "Const" or node.subgraph is not None or branches(node) or not inputs:
        return False
    if any(v.node.op != "Const" for v in inputs) or get(node.op).pattern == Pattern.HOST:
        return False
    if any(has_dims(t.shape) for t in node.types) or any(has_dims(v) for _, v in node.attrs):
        return False   # its result depends on a symbolic size (ir/symbolic.py): computed at each call
    limit = min(MAX_FOLDED_ELEMENTS, max(v.type.size for v in inputs))
    return all(t.size <= limit for t in node.types)


def constant_fold(graph: Graph, opts: CompileOptions) -> Graph:
    """The graph with every foldable node replaced by Consts (chains fold in one walk)."""
    def visit(node: Node, inputs: tuple[Value, ...], emit):
        if not foldable(node, inputs):
            return None
        results = evaluate(node, [v.node.attr("value").array for v in inputs])
        names = [node.name] if len(results) == 1 else [f"{node.name}/{i}" for i in range(len(results))]
        return tuple(emit(make_node("Const", (), {"value": Literal(r)}, name=name)).out
                     for r, name in zip(results, names))

    return graph.rewrite(visit)
