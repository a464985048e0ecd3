"""The accumulator lanes of a reduction, as LLVM vector code for numba kernels.

A reduction over a row accumulates in LANES (64) independent lanes, element j into lane j % LANES, each
lane in the row's order; the lanes are then folded in a fixed tree, lane k with lane k + h for h = 32,
16, ..., 1. No order depends on the vector width, block_dim or the thread count, so results are bitwise
stable; fused and single-op kernels call the same functions, so they agree.

    acc = np.empty(LANES, dtype)                           in the kernel
    lanes_fill(acc, identity)    every lane set to the reduction's identity (0, -inf, +inf, ...)
    lanes_sum(acc, row)          acc[j % 64] = acc[j % 64] + row[j], j = 0 .. len(row) - 1
    lanes_max(acc, row)          the same with numpy's maximum rule ((a >= b or a is NaN) ? a : b)
    lanes_min(acc, row)          ... minimum ((a <= b or a is NaN) ? a : b)
    fold_sum(acc) -> scalar      the tree over the 64 lanes (fold_max, fold_min alike)

`acc` and `row` are C-contiguous 1-D arrays of one dtype: float32, float64 or an integer type (the
reduction's accumulator dtype: a sum's is float32, float64, int64 or uint64, a max's or min's the row's
own, int8 to uint64 compared signed or unsigned as their type says; a kernel converts into it first). Why not numba code: a loop over
`lanes` accumulators kept in an array, a chunk at a time, pays a runtime alias check and a loop set-up
per chunk and a loop per fold level; on rows of 128 elements that was most of a Softmax's time. Here the
64 lanes are one <64 x T> value in vector registers (LLVM splits it into 4 AVX-512 or 8 AVX2
registers), the chunk loop is one load and one combine, and the fold is five shuffles.

PYTHON holds the same functions in plain Python: the reference of their semantics, and what the tests
use when they run generated kernel source in pure Python.
"""
from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

LANES = 64
DTYPES = (types.float32, types.float64, types.int8, types.int16, types.int32, types.int64, types.uint8,
          types.uint16, types.uint32, types.uint64)


def _kind(dtype) -> str:
    """How _combine compares values of a numba dtype: "float", "signed" or "unsigned"."""
    return "float" if isinstance(dtype, types.Float) else "signed" if dtype.signed else "unsigned"


def _combine(builder, op: str, kind: str, a, b):
    """a combined with b (scalars or vectors), as numpy's add, maximum and minimum compute it."""
    if op == "sum":
        return builder.fadd(a, b) if kind == "float" else builder.add(a, b)
    rel = ">=" if op == "max" else "<="
    if kind == "float":
        keep = builder.or_(builder.fcmp_ordered(rel, a, b), builder.fcmp_unordered("uno", a, a))
    elif kind == "signed":
        keep = builder.icmp_signed(rel, a, b)
    else:
        keep = builder.icmp_unsigned(rel, a, b)
    return builder.select(keep, a, b)


def _array(context, builder, arrty, value):
    return context.make_array(arrty)(context, builder, value)


def _lanes_vector_pointer(context, builder, arrty, data):
    vector = ir.VectorType(context.get_data_type(arrty.dtype), LANES)
    return builder.bitcast(data, vector.as_pointer())


def _accumulate(op: str):
    @intrinsic
    def accumulate(typingctx, acc, row):
        if not (isinstance(acc, types.Array) and isinstance(row, types.Array) and acc.ndim == row.ndim == 1
                and acc.layout == row.layout == "C" and acc.dtype == row.dtype and acc.dtype in DTYPES):
            return None
        kind = _kind(acc.dtype)

        def codegen(context, builder, signature, args):
            accty, rowty = signature.args
            acc_a, row_a = _array(context, builder, accty, args[0]), _array(context, builder, rowty, args[1])
            align = context.get_abi_sizeof(context.get_data_type(accty.dtype))
            acc_v = _lanes_vector_pointer(context, builder, accty, acc_a.data)
            n = row_a.nitems
            intp = n.type
            full = builder.mul(builder.udiv(n, intp(LANES)), intp(LANES))
            lanes = cgutils.alloca_once_value(builder, builder.load(acc_v, align=align))
            with cgutils.for_range_slice(builder, intp(0), full, intp(LANES)) as (i, _):
                chunk = builder.load(_lanes_vector_pointer(context, builder, rowty, builder.gep(row_a.data, [i])),
                                     align=align)
                builder.store(_combine(builder, op, kind, builder.load(lanes), chunk), lanes)
            builder.store(builder.load(lanes), acc_v, align=align)
            with cgutils.for_range_slice(builder, full, n, intp(1)) as (j, _):  # the last partial chunk
                lane = builder.gep(acc_a.data, [builder.sub(j, full)])
                x = builder.load(builder.gep(row_a.data, [j]))
                builder.store(_combine(builder, op, kind, builder.load(lane), x), lane)
            return context.get_dummy_value()
        return types.none(acc, row), codegen

    accumulate.__name__ = accumulate.__qualname__ = f"lanes_{op}"
    return accumulate


@intrinsic
def lanes_fill(typingctx, acc, value):
    if not (isinstance(acc, types.Array) and acc.ndim == 1 and acc.layout == "C" and acc.dtype in DTYPES
            and isinstance(value, (types.Number, types.Boolean))):
        return None

    def codegen(context, builder, signature, args):
        accty, valuety = signature.args
        acc_a = _array(context, builder, accty, args[0])
        align = context.get_abi_sizeof(context.get_data_type(accty.dtype))
        x = context.cast(builder, args[1], valuety, accty.dtype)
        vector = ir.VectorType(x.type, LANES)
        one = builder.insert_element(ir.Constant(vector, ir.Undefined), x, ir.IntType(32)(0))
        splat = builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES))
        builder.store(splat, _lanes_vector_pointer(context, builder, accty, acc_a.data), align=align)
        return context.get_dummy_value()
    return types.none(acc, value), codegen


def _fold(op: str):
    @intrinsic
    def fold(typingctx, acc):
        if not (isinstance(acc, types.Array) and acc.ndim == 1 and acc.layout == "C" and acc.dtype in DTYPES):
            return None
        kind = _kind(acc.dtype)

        def codegen(context, builder, signature, args):
            accty = signature.args[0]
            acc_a = _array(context, builder, accty, args[0])
            align = context.get_abi_sizeof(context.get_data_type(accty.dtype))
            v = builder.load(_lanes_vector_pointer(context, builder, accty, acc_a.data), align=align)
            h = LANES // 2
            while h >= 1:  # lane k with lane k + h: the low half with the high half
                index = ir.VectorType(ir.IntType(32), h)
                low = builder.shuffle_vector(v, v, ir.Constant(index, list(range(h))))
                high = builder.shuffle_vector(v, v, ir.Constant(index, list(range(h, 2 * h))))
                v = _combine(builder, op, kind, low, high)
                h //= 2
            return builder.extract_element(v, ir.IntType(32)(0))
        return acc.dtype(acc), codegen

    fold.__name__ = fold.__qualname__ = f"fold_{op}"
    return fold


lanes_sum, lanes_max, lanes_min = (_accumulate(op) for op in ("sum", "max", "min"))
fold_sum, fold_max, fold_min = (_fold(op) for op in ("sum", "max", "min"))
FUNCTIONS = {f.__name__: f for f in (lanes_fill, lanes_sum, lanes_max, lanes_min, fold_sum, fold_max, fold_min)}


# ---------------------------------------------------------------- the same in plain Python

def _py_combine(op: str):
    if op == "sum":
        return lambda a, b: a + b
    if op == "max":
        return lambda a, b: a if (a >= b or a != a) else b
    return lambda a, b: a if (a <= b or a != a) else b


def _py_accumulate(op: str):
    combine = _py_combine(op)

    def accumulate(acc, row):
        with np.errstate(all="ignore"):
            for j in range(len(row)):
                acc[j % LANES] = combine(acc[j % LANES], row[j])
    return accumulate


def _py_fold(op: str):
    combine = _py_combine(op)

    def fold(acc):
        lanes = list(acc[:LANES])
        h = LANES // 2
        with np.errstate(all="ignore"):
            while h >= 1:
                lanes = [combine(lanes[k], lanes[k + h]) for k in range(h)]
                h //= 2
        return lanes[0]
    return fold


def _py_fill(acc, value):
    acc[:LANES] = value


PYTHON = {"lanes_fill": _py_fill, **{f"lanes_{op}": _py_accumulate(op) for op in ("sum", "max", "min")},
          **{f"fold_{op}": _py_fold(op) for op in ("sum", "max", "min")}}
