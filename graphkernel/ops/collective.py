"""MindSpore's collective primitives in a one-device run (graphkernel/communication/parallel_context.py):
`P.AllReduce(op="sum", group=...)(x)` reduces over a group of one device, so it is x itself."""
from __future__ import annotations

from ir.errors import GraphKernelError

_OPS = ("sum", "max", "min", "prod")


class CollectiveError(GraphKernelError, ValueError):
    """A collective primitive built with an unknown reduction."""


class AllReduce:
    """MindSpore's P.AllReduce(op="sum", group=None)(x): over one device, x."""

    def __init__(self, op="sum", group=None):
        if op not in _OPS:
            raise CollectiveError(f"P.AllReduce: op {op!r}; accepted: {', '.join(_OPS)}")
        self.op, self.group = op, group

    def __call__(self, x):
        return x

    def __repr__(self) -> str:
        return f"P.AllReduce(op={self.op!r})"
