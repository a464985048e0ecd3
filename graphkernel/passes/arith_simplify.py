"""Arithmetic simplification: local rewrites, each exact, applied in order until nothing changes.

Each rule looks at one node (its inputs already simplified) and returns a replacement or None. A rule that
removes an op fires only where the result type equals the operand it keeps: a constant that broadcasts
changes the shape, and then the op stays.

    identity           x*1, 1*x, x+0, 0+x, x-0, x/1 -> x. Exact, except that x+0 turns -0 into +0 (and
                       x-(-0) likewise): equal values, a different sign of zero.
    div_to_mul         x/c -> x*(1/c) when every c is a finite power of two whose reciprocal is one too:
                       x/c and x*(1/c) are then the same real number, rounded once, so the same bits.
    pow_by_constant    pow(x,1) -> x (exact); pow(x,2) -> x*x and pow(x,0.5) -> sqrt(x): the same real
                       value, where x*x and sqrt are correctly rounded and libm's pow within an ulp; sqrt
                       differs from pow only at -0 (-0 vs +0) and -inf (nan vs inf).
    neg_neg            neg(neg(x)) -> x. Exact (negation flips the sign bit).
    cast_same          cast(x, x.dtype) -> x. Exact.
    cast_chain         cast(cast(x, A), B) -> cast(x, B) when A holds every value of x's dtype (LOSSLESS):
                       the inner cast is then the identity on values.
    reshape_noop       reshape(x, x.shape) -> x; reshape_chain: reshape(reshape(x, s), t) -> reshape(x, t).
                       Exact: a reshape moves no element (row-major order throughout).
    reduce_keepdims    ReduceX(x, keep_dims=False) -> Reshape(ReduceX(x, keep_dims=True)). Exact (same
                       elements). The canonical form: a reduction feeding other ops inside one kernel must keep
                       its dims (kernels/fusible.py), and a Reshape is a view, no kernel.
    sink_reshape       op(reshape(y), reshape(z), s...) -> reshape(op(y, z, s...)) for an elementwise op whose
                       operands are reshapes that only drop or insert size-1 dims, all from y's shape to the
                       result's, and single elements (of rank <= y's). Exact: the same element pairs meet.
                       With reduce_keepdims this makes `ReduceSum(x) * c` (and `mean(x) + sum(x)`) one
                       kernel: the ops move up next to the reductions and the reshape (a view) goes last.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ir.dtypes import DType
from ir.graph import Graph, Literal, Node, Value, live_nodes
from ir.ops import Pattern, get, make_node
from graphkernel.settings.options import CompileOptions

Rule = Callable[[Node, tuple[Value, ...], Callable[[Node], Node]], Node | tuple[Value, ...] | None]

MAX_ROUNDS = 16

# source dtype -> the dtypes that represent each of its values exactly
_OVER_INT4 = {DType.int8, DType.int16, DType.int32, DType.int64, DType.float16, DType.bfloat16, DType.float32,
              DType.float64}
LOSSLESS = {
    DType.bool: {DType.int8, DType.int16, DType.int32, DType.int64, DType.uint8, DType.uint16, DType.uint32,
                 DType.uint64, DType.float16, DType.bfloat16, DType.float32, DType.float64, DType.int4, DType.uint4,
                 DType.int2, DType.uint2, DType.float4_e2m1fn},
    DType.int2: {DType.int4, DType.float4_e2m1fn} | _OVER_INT4,
    DType.uint2: {DType.int4, DType.uint4, DType.uint8, DType.uint16, DType.uint32, DType.uint64,
                  DType.float4_e2m1fn} | _OVER_INT4,
    DType.float4_e2m1fn: {DType.float16, DType.bfloat16, DType.float32, DType.float64},
    DType.int4: _OVER_INT4,
    DType.uint4: {DType.uint8, DType.uint16, DType.uint32, DType.uint64} | _OVER_INT4,
    DType.int8: {DType.int16, DType.int32, DType.int64, DType.float16, DType.bfloat16, DType.float32, DType.float64},
    DType.uint8: {DType.int16, DType.int32, DType.int64, DType.uint16, DType.uint32, DType.uint64, DType.float16,
                  DType.bfloat16, DType.float32, DType.float64},
    DType.int16: {DType.int32, DType.int64, DType.float32, DType.float64},
    DType.uint16: {DType.int32, DType.int64, DType.uint32, DType.uint64, DType.float32, DType.float64},
    DType.int32: {DType.int64, DType.float64},
    DType.uint32: {DType.int64, DType.uint64, DType.float64},
    DType.float16: {DType.float32, DType.float64},
    DType.bfloat16: {DType.float32, DType.float64},
    DType.float32: {DType.float64},
}

# op -> (position of the constant operand, its neutral value)
IDENTITIES = {"Mul": ((1, 1), (0, 1)), "Add": ((1, 0), (0, 0)), "Sub": ((1, 0),), "RealDiv": ((1, 1),)}


def const_array(v: Value) -> np.ndarray | None:
    return v.node.attr("value").array if v.node.op == "Const" else None


def const_all(v: Value, value: float) -> bool:
    arr = const_array(v)
    return arr is not None and arr.size > 0 and bool(np.all(arr == value))


def _op(op: str, inputs, attrs=None, *, like: Node, suffix: str = "") -> Node:
    """A node replacing `like` (its name), or made on the side for it (its name + suffix)."""
    return make_node(op, inputs, attrs, name=f"{like.name or like.op}{suffix}" if suffix else like.name)


def identity(node, inputs, emit):
    for pos, neutral in IDENTITIES.get(node.op, ()):
        kept = inputs[1 - pos]
        if const_all(inputs[pos], neutral) and kept.type == node.out.type:
            return (kept,)
    return None


def _is_power_of_two(arr: np.ndarray) -> bool:
    finite = np.isfinite(arr) & (arr != 0)
    return bool(np.all(finite) and np.all(np.abs(np.frexp(arr)[0]) == 0.5))


def div_to_mul(node, inputs, emit):
    if node.op != "RealDiv" or (c := const_array(inputs[1])) is None or not _is_power_of_two(c):
        return None
    with np.errstate(all="ignore"):
        reciprocal = (np.ones((), c.dtype) / c).astype(c.dtype)
    if not _is_power_of_two(reciprocal):
        return None
    r = emit(_op("Const", (), {"value": Literal(reciprocal)}, like=node, suffix="/reciprocal"))
    return _op("Mul", (inputs[0], r.out), like=node)


def pow_by_constant(node, inputs, emit):
    if node.op != "Pow" or (e := const_array(inputs[1])) is None or e.size == 0:
        return None
    x = inputs[0]
    if x.type != node.out.type or not np.all(e == e.flat[0]):
        return None
    power = float(e.flat[0])
    if power == 1:
        return (x,)
    if power == 2:
        return _op("Mul", (x, x), like=node)
    if power == 0.5:
        return _op("Sqrt", (x,), like=node)
    return None


def neg_neg(node, inputs, emit):
    if node.op == "Neg" and inputs[0].node.op == "Neg":
        return (inputs[0].node.inputs[0],)
    return None


def cast_same(node, inputs, emit):
    if node.op == "Cast" and node.attr("dtype") == inputs[0].dtype:
        return (inputs[0],)
    return None


def cast_chain(node, inputs, emit):
    if node.op != "Cast" or inputs[0].node.op != "Cast":
        return None
    source = inputs[0].node.inputs[0]
    if inputs[0].dtype not in LOSSLESS.get(source.dtype, ()):
        return None
    if node.attr("dtype") == source.dtype:
        return (source,)
    return _op("Cast", (source,), {"dtype": node.attr("dtype")}, like=node)


def reshape_noop(node, inputs, emit):
    if node.op == "Reshape" and inputs[0].shape == node.out.shape:
        return (inputs[0],)
    return None


def reshape_chain(node, inputs, emit):
    if node.op == "Reshape" and inputs[0].node.op == "Reshape":
        return _op("Reshape", inputs[0].node.inputs, {"shape": node.out.shape}, like=node)
    return None


def reduce_keepdims(node, inputs, emit):
    if node.subgraph is not None or get(node.op).pattern != Pattern.REDUCE or node.attr("keep_dims"):
        return None
    kept = emit(_op(node.op, inputs, {**node.attr_dict, "keep_dims": True}, like=node))
    return _op("Reshape", (kept.out,), {"shape": node.out.shape}, like=node, suffix="/Reshape")


def only_unit_dims_change(reshape: Node) -> bool:
    before, after = reshape.inputs[0].shape, reshape.out.shape
    return [d for d in before if d != 1] == [d for d in after if d != 1]


def _unit_reshape_to(v: Value, shape: tuple[int, ...]) -> bool:
    return v.node.op == "Reshape" and v.shape == shape and only_unit_dims_change(v.node)


def sink_reshape(node, inputs, emit):
    if node.op == "Const" or node.subgraph is not None or len(node.outputs) != 1:
        return None
    if get(node.op).pattern not in (Pattern.ELEMWISE, Pattern.BROADCAST):
        return None
    reshaped = [v for v in inputs if _unit_reshape_to(v, node.out.shape)]
    if not reshaped:
        return None
    sources = [v.node.inputs[0] for v in reshaped]
    source_shape = max(sources, key=lambda s: s.type.size).shape  # the reshape that carries the data
    rank = len(source_shape)
    moved_inputs = []
    for v in inputs:
        if v in reshaped and v.node.inputs[0].shape == source_shape:
            moved_inputs.append(v.node.inputs[0])
        elif v.type.size == 1 and v.type.rank <= rank:
            moved_inputs.append(v)
        else:
            return None
    moved = emit(_op(node.op, tuple(moved_inputs), node.attr_dict, like=node))
    return _op("Reshape", (moved.out,), {"shape": node.out.shape}, like=node, suffix="/Reshape")


RULES: tuple[Rule, ...] = (identity, div_to_mul, pow_by_constant, neg_neg, cast_same, cast_chain,
                           reshape_noop, reshape_chain, reduce_keepdims, sink_reshape)


def apply_rules(graph: Graph, rules: tuple[Rule, ...] = RULES) -> Graph:
    """One walk: each node gets the first rule that fires on it."""
    def visit(node: Node, inputs: tuple[Value, ...], emit):
        if node.subgraph is not None:
            return None
        for rule in rules:
            result = rule(node, inputs, emit)
            if result is not None:
                return result
        return None
    return graph.rewrite(visit)


def arith_simplify(graph: Graph, opts: CompileOptions, rules: tuple[Rule, ...] = RULES) -> Graph:
    """Apply the rules until the graph stops changing (at most MAX_ROUNDS walks); drop what they orphan."""
    graph = live_nodes(graph)
    for _ in range(MAX_ROUNDS):
        simpler = live_nodes(apply_rules(graph, rules))
        if simpler == graph:
            break
        graph = simpler
    return graph
