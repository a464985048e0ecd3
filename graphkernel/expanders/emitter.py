"""The Emitter every expander writes with: named primitive nodes, scalar constants, keepdims reductions.

    b = Emitter(node, emit)                 # node: the composite op being replaced
    y = b.op("Mul", x, b.scalar(0.5, x))    # emits Const then Mul, named f"{node.name}/Const-0", ".../Mul-1"
    s = b.reduce("ReduceSum", y, axes)      # keep_dims=True: the kernel contract (kernels/fusible.py)
                                            # lets only keepdims reductions feed other ops of a kernel
    m = b.mean(x, axes)                     # ReduceMean in primitives (float16 accumulates in float32)

Names are MindSpore-style scope names derived from the replaced node (`k` counts within one expansion);
they are metadata and take no part in structural equality.
"""
from __future__ import annotations

from math import prod
from typing import Callable

import numpy as np

from ir.dtypes import DType
from ir.graph import Literal, Node, Value
from ir.ops import make_node


class Emitter:
    def __init__(self, node: Node, emit: Callable[[Node], Node]):
        self.node = node
        self._emit = emit
        self._count = 0

    def _name(self, op: str) -> str:
        name = f"{self.node.name or self.node.op}/{op}-{self._count}"
        self._count += 1
        return name

    def op(self, op: str, *inputs: Value, **attrs) -> Value:
        """Emit one single-result primitive and return its result."""
        return self._emit(make_node(op, inputs, attrs, name=self._name(op))).out

    def scalar(self, value: float, like: Value) -> Value:
        """A shape-() Const of `like`'s dtype."""
        return self.op("Const", value=Literal(np.asarray(value, dtype=like.dtype.np)))

    def reduce(self, op: str, x: Value, axes: tuple[int, ...]) -> Value:
        return self.op(op, x, axis=tuple(axes), keep_dims=True)

    def mean(self, x: Value, axes: tuple[int, ...]) -> Value:
        """The mean over `axes`, keep_dims=True, rounded as the registry's ReduceMean: a float16 input
        is summed and divided in float32 and rounded to float16 once (as numpy's mean does)."""
        count = prod(x.shape[a] for a in axes)
        acc = self.op("Cast", x, dtype=DType.float32) if x.dtype == DType.float16 else x
        total = self.reduce("ReduceSum", acc, axes)
        mean = self.op("RealDiv", total, self.scalar(count, total))
        return mean if mean.dtype == x.dtype else self.op("Cast", mean, dtype=x.dtype)
