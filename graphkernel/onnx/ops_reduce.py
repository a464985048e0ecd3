"""ONNX reductions on our ReduceSum/ReduceMax/ReduceMin/ReduceMean.

    axes        an attribute before version 18 (ReduceSum: before 13), else an optional second input;
                empty axes reduce every axis, or nothing when noop_with_empty_axes=1; converted from
                version 1 (versions 1 to 13 differ in types and in allowing negative axes, 11 on)
    empty set   reducing a zero-size axis gives the op's identity (0, -inf, +inf, NaN for the mean),
                a constant, as ONNX 18 specifies
    bool        ReduceMax/ReduceMin of bools are any/all, computed on int32

    ReduceL1 = sum(|x|)   ReduceL2 = sqrt(sum(x*x))   ReduceSumSquare = sum(x*x)   ReduceLogSum = log(sum(x))
    ReduceLogSumExp = log(sum(exp(x - max))) + max    GlobalAveragePool/GlobalMaxPool: mean/max over axes 2..
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from graphkernel.onnx.builder import Builder, NodeInfo, dtype_of, shape_of
from graphkernel.onnx.registry import converter


def _reduction(compute, empty_value, axes_input_since: int = 18):
    def convert(b: Builder, n: NodeInfo):
        x = n.inputs[0]
        shape = shape_of(x)
        if n.version >= axes_input_since:
            axes = b.ints(n.input(1), "axes") if n.input(1) is not None else []
        else:
            axes = list(n.attr("axes", []))
        if not axes:
            if n.attr("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(len(shape)))
        axes = _canonical_axes(n, axes, len(shape))
        keep = bool(n.attr("keepdims", 1))
        if any(shape[a] == 0 for a in axes):
            out = [1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes]
            dtype, value = dtype_of(x), empty_value(dtype_of(x))
            if not (dtype.is_float or np.isfinite(value)):
                raise n.error(f"the {n.op_type} of nothing (axes {axes} of {list(shape)} are empty) is "
                              f"{value}, which a {dtype} tensor cannot hold")
            return [np.full(out, value, dtype=dtype.np)]
        return [compute(b, x, tuple(axes), keep)]
    return convert


def _canonical_axes(n: NodeInfo, axes: list[int], rank: int) -> list[int]:
    """Sorted non-negative axes, each in range and given once."""
    bad = [a for a in axes if not -rank <= a < rank]
    if bad:
        raise n.error(f"axes {axes}: {bad[0]} is out of range for rank {rank}")
    out = sorted({a % rank for a in axes})
    if len(out) != len(axes):
        raise n.error(f"axes {axes} name an axis twice")
    return out


def _sum(b, x, axes, keep):
    return b.op("ReduceSum", [x], axis=axes, keep_dims=keep)


def _extremum(ir_name: str):
    def compute(b, x, axes, keep):
        if dtype_of(x) == DType.bool:  # any / all
            return b.cast(b.op(ir_name, [b.cast(x, DType.int32)], axis=axes, keep_dims=keep), DType.bool)
        return b.op(ir_name, [x], axis=axes, keep_dims=keep)
    return compute


def _bound(high: bool):
    def value(dtype: DType):
        if dtype == DType.bool:
            return high
        if dtype.is_float:
            return np.inf if high else -np.inf
        info = np.iinfo(dtype.np)
        return info.max if high else info.min
    return value


def _square_sum(b, x, axes, keep):
    return _sum(b, b.op("Mul", [x, x]), axes, keep)


def _l2(b, x, axes, keep):
    dtype = dtype_of(x)
    total = b.cast(_square_sum(b, x, axes, keep), DType.float64 if not dtype.is_float else dtype)
    return b.cast(b.op("Sqrt", [total]), dtype)


def _log_sum_exp(b, x, axes, keep):
    top = b.op("ReduceMax", [x], axis=axes, keep_dims=True)
    total = _sum(b, b.op("Exp", [b.op("Sub", [x, top])]), axes, True)
    out = b.op("Add", [b.op("Log", [total]), top])
    return out if keep else b.reshape(out, [d for i, d in enumerate(shape_of(x)) if i not in axes])


def _zero(dtype):
    return 0


converter("ReduceSum", static=(1,), min_version=1)(_reduction(_sum, _zero, axes_input_since=13))
converter("ReduceMean", static=(1,), min_version=1)(_reduction(
    lambda b, x, axes, keep: b.op("ReduceMean", [x], axis=axes, keep_dims=keep), lambda dtype: np.nan))
converter("ReduceMax", static=(1,), min_version=1)(_reduction(_extremum("ReduceMax"), _bound(False)))
converter("ReduceMin", static=(1,), min_version=1)(_reduction(_extremum("ReduceMin"), _bound(True)))
converter("ReduceL1", static=(1,), min_version=1)(_reduction(
    lambda b, x, axes, keep: _sum(b, b.op("Abs", [x]), axes, keep), _zero))
converter("ReduceL2", static=(1,), min_version=1)(_reduction(_l2, _zero))
converter("ReduceSumSquare", static=(1,), min_version=1)(_reduction(_square_sum, _zero))
converter("ReduceLogSum", static=(1,), min_version=1)(_reduction(
    lambda b, x, axes, keep: b.op("Log", [_sum(b, x, axes, keep)]), lambda dtype: -np.inf))
converter("ReduceLogSumExp", static=(1,), min_version=1)(_reduction(_log_sum_exp, lambda dtype: -np.inf))


def _global_pool(ir_name: str):
    def convert(b: Builder, n: NodeInfo):
        x = n.inputs[0]
        rank = len(shape_of(x))
        if rank < 3:
            raise n.error(f"X must have rank >= 3 (N, C, spatial...), got shape {list(shape_of(x))}")
        return [b.op(ir_name, [x], axis=tuple(range(2, rank)), keep_dims=True)]
    return convert


converter("GlobalAveragePool", min_version=1)(_global_pool("ReduceMean"))
converter("GlobalMaxPool", min_version=1)(_global_pool("ReduceMax"))
