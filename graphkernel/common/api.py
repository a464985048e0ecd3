"""MindSpore's `mindspore.common.api`: `jit`, a Python function compiled as one graph per input signature
(`graphkernel.jit`, `ms.jit`; 2.x scripts import it from here too).

    @jit                                  # or @jit(jit_level="O1")
    def train_step(x, y):
        loss, grads = grad_fn(x, y)       # grad functions and Cells called inside are traced inline
        optimizer(grads)
        return loss

`@enable_dynamic(x=Tensor(shape=[None, 3], dtype=...))` declares dynamic dims of its arguments ahead,
`jit(dynamic=1)` makes the dims that change dynamic (graphkernel/tracing/dynamic_jit.py, docs/shapes.md).

The function becomes a Cell of its own (one per nesting of its arguments: tuples and lists of Tensors
are passed flat and rebuilt), so it compiles and caches as a Cell's construct does.
"""
from __future__ import annotations

import functools

from graphkernel.cell import Cell
from graphkernel.settings.jit_config import jit_decorator_level
from graphkernel.tracing.arguments import graph_inputs
from graphkernel.tracing.dynamic_jit import DYNAMIC_ATTR, declared_for, enable_dynamic, generalize
from graphkernel.tracing.tape import active_tape
from graphkernel.tracing.trace import active_trace

__all__ = ["jit", "enable_dynamic"]


class _FunctionCell(Cell):
    """A Python function compiled as a Cell for one nesting of its arguments: tuples and lists of
    Tensors among them are passed flat and rebuilt (`tree`) for the function."""

    def __init__(self, fn, tree):
        super().__init__()
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "tree", tree)
        object.__setattr__(self, "first_call", None)   # jit(dynamic=1): the first call's (shape, dtype)s

    def set_declaration(self, decl) -> None:
        object.__setattr__(self, "_declared", decl)

    def construct(self, *flat):
        return self.fn(*_rebuild(self.tree, list(flat)))


def _structure(x, flat: list):
    """Append the leaves of nested tuples/lists `x` to `flat`; the (hashable) tree that rebuilds `x`."""
    if isinstance(x, (tuple, list)):
        return type(x), tuple(_structure(item, flat) for item in x)
    flat.append(x)
    return None


def _rebuild(tree, flat: list):
    if tree is None:
        return flat.pop(0)
    kind, items = tree
    return kind(_rebuild(item, flat) for item in items)


def jit(function=None, *, capture_mode="ast", jit_level=None, dynamic=0, fullgraph=False, backend="",
        **options):
    """`@jit` (MindSpore's `ms.jit`): the function runs as one compiled graph, traced once per input
    signature, in GRAPH_MODE and PYNATIVE_MODE alike; inside it, `grad`/`value_and_grad` functions and
    Cells are traced inline. `f.compile(*args)` returns the CompiledGraph a call uses.

    MindSpore 2.10's arguments, checked as it checks them (graphkernel/settings/jit_config.py): `jit_level` "O0"
    (fusion off) or "O1" (on) decides for this function's graphs; left out, the session's switches
    decide. `dynamic=1` compiles for dynamic shapes when they change: the first call compiles for its
    shapes, a call whose Tensors' dims differ from the first's compiles once with those dims dynamic
    (a rank that differs: any rank), and every later call that fits reuses it (MindSpore 2.10 keeps two
    static compiles before it generalizes whole tensors). `@enable_dynamic(y=Tensor(shape=[None, 3],
    ...))` on top declares the shapes ahead. capture_mode, fullgraph, backend and the known options
    change nothing here (the function is traced in every capture mode); the deprecated
    `jit_config=JitConfig(...)` warns and, unlike in 2.10, still sets the level."""
    graph_level = jit_decorator_level(capture_mode, "O0" if jit_level is None else jit_level, dynamic,
                                      fullgraph, backend, options, jit_level is not None)

    def decorate(fn):
        cells: dict = {}

        def compiled(args):
            flat: list = []
            tree = _structure(tuple(args), flat)
            cell = cells.get(tree)
            if cell is None:
                cell = cells[tree] = _FunctionCell(fn, tree)
                object.__setattr__(cell, "_jit_level", graph_level)
                declared = getattr(fn, DYNAMIC_ATTR, None)   # @enable_dynamic (graphkernel/tracing/dynamic_jit.py)
                if declared is not None:
                    cell.set_declaration(declared_for(fn, declared, args, tree))
            if dynamic == 1:   # generalize the dims that changed since the first call
                generalize(cell, flat)
            return cell.compile(*flat), flat

        @functools.wraps(fn)
        def run(*args):
            if active_trace() is not None or active_tape() is not None:
                return fn(*args)   # inline: inside a trace, or recorded op by op on a PYNATIVE tape
            graph, flat = compiled(args)
            return graph.call_unchecked(graph_inputs(flat))
        run.compile = lambda *args: compiled(args)[0]
        return run
    return decorate if function is None else decorate(function)
