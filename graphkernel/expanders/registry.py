"""The expanders' table: `@expands("Square")` above an expander registers it for the op it rewrites.

    EXPANDERS[op](node, inputs, b) -> the values standing for the node's results

Each expander module registers its own functions; graphkernel/expanders/__init__.py imports every module
of the folder, so the decorator is the one place that says which op an expander is for.
"""
from __future__ import annotations

from typing import Callable

from ir.builder import GraphBuilder
from ir.graph import Node, Value

Expander = Callable[[Node, tuple[Value, ...], GraphBuilder], tuple[Value, ...]]

EXPANDERS: dict[str, Expander] = {}


def expands(*ops: str) -> Callable[[Expander], Expander]:
    """Register the decorated function as the expander of each of `ops` (an op has one expander)."""
    def register(fn: Expander) -> Expander:
        for op in ops:
            if op in EXPANDERS:
                raise ValueError(f"two expanders for {op}: {EXPANDERS[op].__module__}.{EXPANDERS[op].__name__} "
                                 f"and {fn.__module__}.{fn.__name__}")
            EXPANDERS[op] = fn
        return fn
    return register
