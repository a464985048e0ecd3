"""The functional forms, `ops.exp(x)`, `ops.add(x, y)`, `ops.cast(x, dtype)`: one per op row whose
`api.functional` names one (ir/ops), each calling the op's primitive with its default attributes.

    from graphkernel import ops
    y = ops.tanh(ops.add(x, 1.0))
"""
from __future__ import annotations

from ir.ops import OPS, OpDef
from graphkernel.ops import operations


def _functional(d: OpDef):
    prim = getattr(operations, d.name)()

    def fn(*args, **kwargs):
        return prim(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = d.api.functional
    fn.__module__ = __name__
    fn.__doc__ = f"ops.{d.api.functional}: P.{d.name}() called on the arguments. {prim.__doc__}"
    return fn


FUNCTIONS = {d.api.functional: _functional(d) for d in OPS.values() if d.api.functional}
globals().update(FUNCTIONS)
__all__ = sorted(FUNCTIONS)
