"""Ops and their sample inputs, generated from the op table (ir/ops), as PyTorch's OpInfo does: a test
iterates these instead of keeping its own list, so a new op row is tested by existing.

    kernel_ops(arity=2)            elementwise/broadcast primitives a kernel computes, with 2 inputs
    sample(op, shape, "float32")   an input array from the row's `domain`
    dtypes(op)                     the dtypes the op takes that the generated tests run
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.errors import IRError
from ir.graph import TensorType
from ir.ops import OPS, Pattern
from ir.ops.registry import REQUIRED


def _needs_no_attrs(d) -> bool:
    return all(a.default is not REQUIRED for a in d.attrs)


def kernel_ops(arity: int | None = None) -> list[str]:
    """ELEMWISE and BROADCAST primitives (not Const, not composite ops) taking no required attribute."""
    return sorted(name for name, d in OPS.items()
                  if d.pattern in (Pattern.ELEMWISE, Pattern.BROADCAST) and not d.expandable and name != "Const"
                  and _needs_no_attrs(d) and (arity is None or d.arity == arity))


def float_ops(arity: int) -> list[str]:
    """Ops of `arity` float inputs, no attributes, whose result is float (primitives and composite
    ops): the arithmetic of random graphs."""
    out = []
    for name, d in OPS.items():
        if d.arity != arity or name == "Const" or not (d.pattern <= Pattern.BROADCAST or d.expandable):
            continue
        if d.domain not in ("real", "positive") or d.attrs:
            continue
        try:
            (t,) = d.infer(tuple(TensorType((2, 3), DType.float32) for _ in range(arity)), {})
        except (IRError, ValueError):
            continue
        if t.dtype == DType.float32:
            out.append(name)
    return sorted(out)


def comparisons() -> list[str]:
    """Two float inputs, a bool result."""
    out = []
    for name in kernel_ops(2):
        d = OPS[name]
        try:
            (t,) = d.infer((TensorType((2,), DType.float32),) * 2, {})
        except IRError:
            continue
        if t.dtype == DType.bool:
            out.append(name)
    return out


def dtypes(op: str) -> list[str]:
    d = OPS[op]
    return ["bool"] if d.domain == "bool" else ["float32", "float16"]


def sample(op: str, shape, dtype: str, seed: int = 0) -> np.ndarray:
    """Values from the row's domain: real [-2, 2), positive [0.1, 2), unit (-1, 1), bool; float inputs
    also hold the values where ops differ most (0, -0, 1, -1, +-0.5, +-2.5 for rounding) when there is room."""
    rng = np.random.default_rng(seed)
    domain = OPS[op].domain
    if domain == "bool" or dtype == "bool":
        return rng.random(shape) < 0.5
    low, high = {"positive": (0.1, 2.0), "unit": (-0.99, 0.99)}.get(domain, (-2.0, 2.0))
    arr = rng.uniform(low, high, size=shape).astype(dtype)
    if domain in ("real", "any") and arr.size >= 10:
        flat = arr.reshape(-1)
        flat[:10] = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1.5, -1.5]
    return arr
