"""MatMul and BatchMatMul: opaque library calls (numpy's BLAS), never fused."""
from __future__ import annotations

import numpy as np

from ir.errors import ShapeError
from ir.graph import TensorType
from ir.ops.checks import broadcast, fmt, is_bool, require, same_dtype
from ir.ops.registry import Api, Attr, Form, Precision, OpDef, Pattern, register

MATMUL_ATTRS = (Attr("transpose_a", False, is_bool), Attr("transpose_b", False, is_bool))


def _matrix(shape, transposed):
    m, k = shape[-2:]
    return (k, m) if transposed else (m, k)


def _matmul_infer(types, attrs, batched: bool):
    a, b = types
    dtype = same_dtype(types)
    require(dtype, "numeric")
    want = "at least 3" if batched else "exactly 2"
    if (a.rank < 3 or b.rank < 3) if batched else (a.rank != 2 or b.rank != 2):
        raise ShapeError(f"operands need rank {want}, got {fmt(a.shape)} and {fmt(b.shape)}")
    m, k = _matrix(a.shape, attrs["transpose_a"])
    k2, n = _matrix(b.shape, attrs["transpose_b"])
    if k != k2:
        raise ShapeError(f"contracting dims differ: {fmt(a.shape)}{' (transposed)' * attrs['transpose_a']} "
                         f"x {fmt(b.shape)}{' (transposed)' * attrs['transpose_b']} gives k={k} vs {k2}")
    batch = broadcast(a.shape[:-2], b.shape[:-2]) if batched else ()
    return (TensorType(batch + (m, n), dtype),)


def _matmul(a, attrs):
    """float16 operands multiply as the Cube unit does: exactly widened to float32, accumulated in
    float32, rounded once to float16 (numpy's own float16 matmul has no BLAS and is ~10x slower)."""
    x, y = a
    if attrs["transpose_a"]:
        x = np.swapaxes(x, -1, -2)
    if attrs["transpose_b"]:
        y = np.swapaxes(y, -1, -2)
    if x.dtype == np.float16:
        return np.matmul(x.astype(np.float32), y.astype(np.float32)).astype(np.float16)
    return np.matmul(x, y)


def _matmul_grad(b, node, douts):
    """out = op(a) op(b) with op a transpose when its flag is set; each cotangent is a product of the other
    operand and dout, arranged so no Transpose is needed; batch dims broadcast are summed back."""
    (x, y), (d,) = node.inputs, douts
    ta, tb = node.attr("transpose_a"), node.attr("transpose_b")

    def mm(p, q, tp, tq):
        return b.op(node.op, p, q, transpose_a=tp, transpose_b=tq)
    if not ta:
        dx = mm(d, y, False, not tb)          # d op(b)^T
    else:
        dx = mm(y, d, tb, True)               # (d op(b)^T)^T = op(b) d^T
    if not tb:
        dy = mm(x, d, not ta, False)          # op(a)^T d
    else:
        dy = mm(d, x, True, ta)               # (op(a)^T d)^T = d^T op(a)
    return b.sum_to(dx, x.shape), b.sum_to(dy, y.shape)


register(OpDef("MatMul", Pattern.OPAQUE, 2, lambda t, a: _matmul_infer(t, a, False), _matmul,
               MATMUL_ATTRS, grad=_matmul_grad, cann=("Matmul", "MatMulV2", "MatMulV3"),
               api=Api(inputs=("a", "b"), functional="matmul", forms=(
                   Form("ops", "matmul", ("input", "other")), Form("Tensor", "matmul", ("tensor2",)),
                   Form("Tensor", "mm", ("mat2",)))),
               precision=Precision("white", False, "the emulated Cube unit multiplies float16 (as Ascend 910's "
                                   "Cube does); float16 halves the bytes moved"))),
register(OpDef("BatchMatMul", Pattern.OPAQUE, 2, lambda t, a: _matmul_infer(t, a, True), _matmul,
               MATMUL_ATTRS, grad=_matmul_grad, cann=("BatchMatMulV2", "BatchMatMulV3"), api=Api(inputs=("a", "b"), forms=(
                   Form("ops", "bmm", ("input_x", "mat2")), Form("mint", "bmm", ("input", "mat2")),
                   Form("Tensor", "bmm", ("mat2",)))), precision=Precision("white", False, "as MatMul")))
