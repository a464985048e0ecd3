"""Flat clusters: elementwise kernels over one shape, summarized by sums, so fusion can judge a merge
of two without building the kernel it would make.

A cluster is flat when every primitive it computes is ELEMWISE or BROADCAST with results of one shape
S, and it reads only values of shape S, scalar constants, or size-1 values of rank at most rank(S)
(no reduction, nothing spread over a larger shape). Its kernel is then one loop over S, and what the
cost model and the legality checks ask of that kernel are sums:

    op_costs     sum of op_cost over its primitives     (the operations per element)
    inner_bytes  sum of the itemsizes of their results   (with the inputs and constants: the bytes a
                                                          tile keeps per element)
    consts       the scalar Consts it reads              (copied into the kernel, once each)
    reads        the other values it reads from outside  (the kernel's inputs)
    escaping     its values read from outside            (the kernel's outputs)

Two flat clusters over one shape merge into a flat cluster whose figures come from theirs and from
the values crossing between them:

    reads    = reads(a) | reads(b), less the values a or b produce
    escaping = the values of escaping(a) | escaping(b) still read from outside

and `estimate` feeds them to `cost_model.elementwise_estimate`, the formula the cost model uses for
any kernel without reduce axes, so both paths give the same Estimate (tests compare them). On a long
elementwise chain this makes a candidate cost the nodes it adds, not the size of the cluster.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ir.graph import Node, Value
from ir.ops import Pattern, pattern_of
from graphkernel.passes.cost_model import Estimate, elementwise_estimate, op_cost
from graphkernel.passes.fusion_utils import is_scalar_const, primitives

_FLAT_PATTERNS = (Pattern.ELEMWISE, Pattern.BROADCAST)


@dataclass(frozen=True)
class Flat:
    shape: tuple[int, ...]
    op_costs: float
    inner_bytes: int
    consts: frozenset[Value]
    reads: frozenset[Value]
    escaping: frozenset[Value]

    def estimate(self, core_num: int) -> Estimate:
        """The cost model's estimate of the kernel this cluster makes."""
        value_bytes = self.inner_bytes + sum(v.dtype.itemsize for v in self.consts | self.reads)
        io_bytes = sum(v.type.nbytes for v in self.reads) + sum(v.type.nbytes for v in self.escaping)
        return elementwise_estimate(math.prod(self.shape), self.op_costs, value_bytes, io_bytes, core_num)


def _fits(shape: tuple[int, ...], v: Value) -> bool:
    """A value read by a flat kernel over `shape`: of that shape, or of size 1 and no higher rank."""
    return v.shape == shape or (v.type.size == 1 and len(v.shape) <= len(shape))


def flat_of(node: Node, escaping: set[Value]) -> Flat | None:
    """The summary of a cluster of one top-level node, or None when it is not flat."""
    if not node.types:
        return None
    shape = node.types[0].shape
    if any(t.shape != shape for t in node.types):
        return None
    op_costs, inner_bytes = 0.0, 0
    for p in primitives(node):
        inner_bytes += sum(t.dtype.itemsize for t in p.types)
        if p.op == "Const":
            if p.out.type.size != 1 or len(p.out.shape) > len(shape):
                return None
            continue
        if pattern_of(p) not in _FLAT_PATTERNS or any(t.shape != shape for t in p.types):
            return None
        op_costs += op_cost(p)
    if not all(_fits(shape, v) for v in node.inputs):
        return None
    consts = frozenset(v for v in node.inputs if is_scalar_const(v.node))
    return Flat(shape, op_costs, inner_bytes, consts, frozenset(node.inputs) - consts, frozenset(escaping))


def merge_flat(a: Flat, b: Flat, produced: Callable[[Value], bool],
               escapes: Callable[[Value], bool]) -> Flat | None:
    """The summary of the two merged (None unless both run over one shape). `produced(v)`: v is a
    result of the merged cluster; `escapes(v)`: something outside the merged cluster reads v."""
    if a.shape != b.shape:
        return None
    reads = frozenset(v for v in a.reads | b.reads if not produced(v))
    escaping = frozenset(v for v in a.escaping | b.escaping if escapes(v))
    return Flat(a.shape, a.op_costs + b.op_costs, a.inner_bytes + b.inner_bytes, a.consts | b.consts,
                reads, escaping)
