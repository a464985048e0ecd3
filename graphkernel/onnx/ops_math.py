"""ONNX arithmetic, comparisons, Cast, MatMul and Gemm as graphkernel primitives.

An ONNX op that is exactly one of ours (Add, Exp, Relu, ...) is converted by the `onnx` names of that
op's row in the op table. ONNX broadcasting is numpy's, as ours is. Where ONNX and our primitives differ:
    Div on integers    truncates toward zero: computed as Cast(float64) -> RealDiv -> Cast back (exact for
                       |values| < 2**53, so for every int32)
    Pow                 exponent of another type: cast to the base's type; an integer base is raised in
                       float64 and cast back, as the ONNX reference does
    Max / Min           variadic: a chain of Maximum / Minimum
    Clip                min and max inputs (version 11 on), or attributes (version 6)
    MatMul              numpy semantics: 2-D MatMul; N-D x 2-D as one 2-D MatMul on the flattened rows;
                       otherwise BatchMatMul with broadcast batch dims; 1-D operands via Reshape

Versions (registry.py): the ops exactly one of ours from their oldest attribute-free version (Add 7,
Relu 6, Not 1); Div, Pow, Gemm 7 (numpy broadcasting); Max, Min, Sum, Mean 8 (broadcasting: 6 had none);
Cast 6 (`to` an int), MatMul 1; the others differ from one version to the next only in types.
"""
from __future__ import annotations

import math

import onnx.defs

from ir.dtypes import DType
from ir.ops import OPS
from ir.ops.checks import broadcast
from graphkernel.onnx.builder import Builder, NodeInfo, dtype_of, shape_of
from graphkernel.onnx.registry import converter
from graphkernel.onnx.types import to_dtype


def _exactly(op: str, arity: int):
    return lambda b, n: [b.op(op, n.inputs[:arity])]


def _history(onnx_op: str) -> list:
    if not _HISTORY:
        for schema in onnx.defs.get_all_schemas_with_history():
            if schema.domain == "":
                _HISTORY.setdefault(schema.name, []).append(schema)
    return _HISTORY[onnx_op]


_HISTORY: dict[str, list] = {}


def _oldest_attribute_free_version(onnx_op: str) -> int:
    """The oldest version of the op from which no version takes an attribute. An op that is exactly one of
    ours takes none; its attribute-free versions differ only in the types they allow (Add 7, 13 and 14;
    Relu 6, 13 and 14), while the versions before took `consumed_inputs`, or `broadcast` and `axis` (no
    numpy broadcasting before opset 7)."""
    oldest = None
    for schema in sorted(_history(onnx_op), key=lambda s: -s.since_version):
        if schema.attributes:
            break
        oldest = schema.since_version
    if oldest is None:
        raise RuntimeError(f"ONNX {onnx_op} takes attributes: it is not exactly one of our ops")
    return oldest


for _d in OPS.values():   # ONNX ops that are exactly one of ours: the `onnx` names of its op row
    for _onnx in _d.onnx:
        converter(_onnx, min_version=_oldest_attribute_free_version(_onnx))(_exactly(_d.name, _d.arity))


@converter("Div", min_version=7)
def div(b: Builder, n: NodeInfo):
    x, y = n.inputs[:2]
    dtype = dtype_of(x)
    if dtype.is_float:
        return [b.op("RealDiv", [x, y])]
    if dtype.is_int:
        q = b.op("RealDiv", [b.cast(x, DType.float64), b.cast(y, DType.float64)])
        return [b.cast(q, dtype)]  # float -> int casts truncate toward zero, as ONNX's Div does
    raise n.error(f"Div of {dtype} tensors is not defined")


@converter("Pow", min_version=7)
def pow_(b: Builder, n: NodeInfo):
    x, y = n.inputs[:2]
    dtype = dtype_of(x)
    if dtype.is_float:
        return [b.op("Pow", [x, b.cast(y, dtype)])]
    if dtype.is_int:
        p = b.op("Pow", [b.cast(x, DType.float64), b.cast(y, DType.float64)])
        return [b.cast(p, dtype)]
    raise n.error(f"Pow of a {dtype} base is not defined")


def _variadic(ir_name: str):
    def convert(b: Builder, n: NodeInfo):
        args = [x for x in n.inputs if x is not None]
        if not args:
            raise n.error("needs at least one input")
        out = args[0]
        for x in args[1:]:
            out = b.op(ir_name, [out, x])
        shape = broadcast(*(shape_of(x) for x in args))
        if shape_of(out) != shape:  # a single input still broadcasts nothing; keep numpy's result shape
            out = b.op("BroadcastTo", [out], shape=shape)
        return [out]
    return convert


converter("Max", min_version=8)(_variadic("Maximum"))   # 8: numpy broadcasting (6: none)
converter("Min", min_version=8)(_variadic("Minimum"))


@converter("Where", min_version=9)
def where(b: Builder, n: NodeInfo):
    return [b.op("Select", n.inputs[:3])]


@converter("Cast", min_version=6)
def cast(b: Builder, n: NodeInfo):
    to = n.attr("to")
    if to is None:
        raise n.error("missing attribute 'to'")
    return [b.cast(n.inputs[0], to_dtype(to, f"{n.where()}: attribute 'to'"))]


def matmul(b: Builder, a, c):
    """numpy.matmul semantics on our MatMul/BatchMatMul."""
    sa, sc = shape_of(a), shape_of(c)
    if not sa or not sc:
        raise b.node.error(f"MatMul operands must have rank >= 1, got {list(sa)} and {list(sc)}")
    a2 = b.reshape(a, (1,) + sa) if len(sa) == 1 else a
    c2 = b.reshape(c, sc + (1,)) if len(sc) == 1 else c
    sa2, sc2 = shape_of(a2), shape_of(c2)
    m, n = sa2[-2], sc2[-1]
    batch = broadcast(sa2[:-2], sc2[:-2])
    if len(sa2) == 2 and len(sc2) == 2:
        out = b.op("MatMul", [a2, c2])
    elif len(sc2) == 2:  # rows of a stacked into one 2-D product (a weight matrix, as in BERT)
        rows = b.reshape(a2, (math.prod(sa2[:-1]), sa2[-1]))   # a symbolic size stays one
        out = b.reshape(b.op("MatMul", [rows, c2]), sa2[:-1] + (n,))
    else:
        rank = max(len(sa2), len(sc2))
        a3 = b.reshape(a2, (1,) * (rank - len(sa2)) + sa2)
        c3 = b.reshape(c2, (1,) * (rank - len(sc2)) + sc2)
        out = b.op("BatchMatMul", [a3, c3])
    final = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sc) > 1 else ())
    return b.reshape(out, final)


@converter("MatMul", min_version=1)
def matmul_node(b: Builder, n: NodeInfo):
    return [matmul(b, *n.inputs[:2])]


@converter("Gemm", min_version=7)
def gemm(b: Builder, n: NodeInfo):
    a, w = n.inputs[:2]
    c = n.input(2)
    alpha, beta = n.attr("alpha", 1.0), n.attr("beta", 1.0)
    y = b.op("MatMul", [a, w], transpose_a=bool(n.attr("transA", 0)), transpose_b=bool(n.attr("transB", 0)))
    if alpha != 1.0:
        y = b.binary("Mul", b.const(alpha, y), y)
    if c is not None:
        if beta != 1.0:
            c = b.binary("Mul", b.const(beta, c), c)
        y = b.op("Add", [y, c])
    return [y]


converter("Sum", min_version=8)(_variadic("Add"))


@converter("Mean", min_version=8)
def mean(b: Builder, n: NodeInfo):
    (total,) = _variadic("Add")(b, n)
    args = [x for x in n.inputs if x is not None]
    return [total if len(args) == 1 else b.binary("RealDiv", total, len(args))]


@converter("CastLike", min_version=15)
def cast_like(b: Builder, n: NodeInfo):
    return [b.cast(n.inputs[0], dtype_of(n.inputs[1]))]


@converter("IsInf", min_version=10)
def is_inf(b: Builder, n: NodeInfo):
    """IsInf, or only the infinities of one sign (detect_negative / detect_positive = 0)."""
    x = n.inputs[0]
    inf = b.op("IsInf", [x])
    negative, positive = n.attr("detect_negative", 1), n.attr("detect_positive", 1)
    if negative and positive:
        return [inf]
    if not (negative or positive):
        return [b.binary("LogicalAnd", inf, False)]
    return [b.op("LogicalAnd", [inf, b.binary("Greater" if positive else "Less", x, 0)])]




@converter("Clip", min_version=6)
def clip(b: Builder, n: NodeInfo):
    x, low, high = n.inputs[0], n.input(1), n.input(2)
    if n.version < 11:   # the bounds are attributes (a float tensor's lowest and highest when not given)
        low, high = (b.const(n.attrs[k], x) if k in n.attrs else None for k in ("min", "max"))
    if low is not None:
        x = b.op("Maximum", [x, low])
    if high is not None:  # after Maximum: min > max gives max everywhere, as numpy.clip does
        x = b.op("Minimum", [x, high])
    return [x]
