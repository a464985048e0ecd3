"""Expanders: composite ops (OpDef.expandable) rewritten into primitives, one module per op, as
MindSpore's Python expanders are.

    expand(graph, opts): every node whose op is expandable and `opts.expand_enabled(op)` is replaced by
    EXPANDERS[op](node, inputs, b) -> the values standing for the node's results
    (repeated until no such node is left: an expansion may itself hold expandable ops)

An expander registers itself where it is written, `@expands("Square")` above its function
(registry.py); this package imports every module of the folder, so a new module needs no other line.

`b` is an `ir.GraphBuilder` emitting into the rewritten graph, its nodes named after the node replaced
(`<node name>/<Op>-<k>`, k counting within one expansion: MindSpore scope names, metadata only).

Every expansion is checked: its result types must equal the types the op inferred, else an IRError names
the expander. Disabled ops (`--disable_expand_ops=Softmax`) stay as opaque single-op kernels, and so do the ops whose row
says `expand_by_default=False` unless `--enable_expand_ops` names them.
"""
from __future__ import annotations

import importlib
import pkgutil

from ir.builder import GraphBuilder
from ir.errors import IRError
from ir.graph import Graph, Node, Value
from ir.ops import OPS
from graphkernel.expanders.registry import EXPANDERS, Expander, expands
from graphkernel.settings.options import CompileOptions

__all__ = ["EXPANDERS", "Expander", "expands", "expand", "expand_node"]

# Every module of the folder registers its expanders (`@expands(op)`) when it is imported.
for _module in pkgutil.iter_modules(__path__):
    if _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")

MAX_ROUNDS = 8  # expansions nest at most this deep


def _wanted(node: Node, opts: CompileOptions) -> bool:
    d = OPS.get(node.op)
    return (node.subgraph is None and d is not None and d.expandable
            and opts.expand_enabled(node.op, d.expand_by_default))


def expand_node(node: Node, inputs: tuple[Value, ...], emit) -> tuple[Value, ...]:
    """The expansion of one node, its result types checked against the node's."""
    expander = EXPANDERS.get(node.op)
    if expander is None:
        raise IRError(f"op {node.op} is marked expandable but graphkernel.expanders has no expander for it")
    results = tuple(expander(node, inputs, GraphBuilder(scope=node.name or node.op, emit=emit)))
    got = tuple(v.type for v in results)
    if got != node.types:
        where = f"{expander.__module__}.{expander.__name__}"
        raise IRError(f"expander {where} gave {', '.join(map(str, got)) or 'nothing'} for {node.op}"
                      f"{' (' + node.name + ')' if node.name else ''}, which infers "
                      f"{', '.join(map(str, node.types))}")
    return results


def expand(graph: Graph, opts: CompileOptions) -> Graph:
    """The graph with every enabled composite op replaced by primitives."""
    for _ in range(MAX_ROUNDS):
        if not any(_wanted(n, opts) for n in graph.nodes):
            return graph
        graph = graph.rewrite(lambda node, inputs, emit:
                              expand_node(node, inputs, emit) if _wanted(node, opts) else None)
    raise IRError(f"expansion did not finish after {MAX_ROUNDS} rounds: "
                  f"{sorted({n.op for n in graph.nodes if _wanted(n, opts)})} still expandable")
