"""ONNX's linear quantization as graphkernel primitives: elementwise ops, so a QuantizeLinear or
DequantizeLinear fuses with the ops around it (a Dequantize -> Add -> Quantize chain is one kernel).

    QuantizeLinear(x, scale, zp)      y = saturate(rint(x / scale) + zp): the division in the common
                                      dtype of x and scale (numpy's promotion: int32 x gives float64) or
                                      in `precision`, rounded half to even, zp added and the result
                                      clipped to the output type's range in float64 (exact), a NaN
                                      quotient giving the range's low end (the ONNX reference's result on
                                      x86), then cast
    DequantizeLinear(x, scale, zp)    y = (x - zp) * scale: x in float32 (float64 when zp is int32),
                                      zp subtracted, multiplied by scale in their common dtype, cast to
                                      `output_dtype` or to scale's dtype
    DynamicQuantizeLinear(x)          (y uint8, y_scale, y_zero_point) from x's range including 0: a
                                      float32 ReduceMax and ReduceMin, then QuantizeLinear's steps

Versions 10 on: version 10 quantizes per tensor only (no `axis`; a one-element scale), which is
the per-tensor case below.

Granularity, from scale's shape (zp has the same): per tensor when it holds one element; per axis
when it is 1-D along `axis` (default 1; negative counts from the back); blocked with `block_size` B
when it has x's rank and ceil(D / B) entries along `axis`, each serving B consecutive elements (the
last block may be shorter). The output type comes from zp, else `output_dtype`, else uint8; the types
are int8, uint8, int16, uint16, the sub-byte int4, uint4, int2, uint2 and float4e2m1 (storage dtypes: the
chains read and write them through Casts, which fuse like any other, and compute in float). To
float4e2m1 there is no rounding to an integer nor clipping: x / scale + zp is cast, which rounds to the
type and saturates; from it, (x - zp) * scale as ONNX's formula says (onnx.reference leaves a float4
zero point out; the zero points tools write are zeros, where the two agree). float8 (a quantized type
ONNX defines, which graphkernel does not hold) is refused by name, by the loader when a tensor has the
type, here when `output_dtype` names it. A zero point is cast to the dtype it is computed in before it
is spread over its block or axis. The arithmetic follows onnx.reference, whose results the ONNX backend
node tests hold.
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType, as_dtype
from graphkernel.onnx.builder import Builder, NodeInfo, dtype_of, shape_of
from graphkernel.onnx.registry import converter
from graphkernel.onnx.types import to_dtype, to_onnx_type, type_name

QUANTIZED = (DType.int8, DType.uint8, DType.int16, DType.uint16, DType.int4, DType.uint4, DType.int2, DType.uint2,
             DType.float4_e2m1fn)
# a storage dtype promotes as the smallest dtype that computes and holds its values
_PROMOTES_AS = {DType.int4: DType.int8, DType.int2: DType.int8, DType.uint4: DType.uint8, DType.uint2: DType.uint8,
                DType.float4_e2m1fn: DType.float16}


def common_dtype(a: DType, b: DType) -> DType:
    """numpy's promotion of two dtypes (float16 with bfloat16, which numpy cannot promote: float32)."""
    a, b = _PROMOTES_AS.get(a, a), _PROMOTES_AS.get(b, b)
    if a.is_half and b.is_half and a != b:
        return DType.float32
    return as_dtype(np.result_type(a.np, b.np))


def _axis(n: NodeInfo, rank: int) -> int:
    axis = n.attr("axis", 1)
    if not -rank <= axis < rank:
        raise n.error(f"axis={axis} is out of range for an input of rank {rank}")
    return axis % rank


def along(b: Builder, n: NodeInfo, v, x, what: str):
    """`v` (a scale or zero point) shaped to broadcast against x for its granularity."""
    shape, x_shape = shape_of(v), shape_of(x)
    if int(np.prod(shape, dtype=np.int64)) == 1:
        return b.reshape(v, ())                                     # per tensor
    block = n.attr("block_size", 0)
    axis = _axis(n, len(x_shape))
    if not block:                                                   # per axis
        if shape != (x_shape[axis],):
            raise n.error(f"{what} of shape {list(shape)} is neither one value nor 1-D of length "
                          f"{x_shape[axis]} (x's dim {axis}); a blocked {what} needs block_size")
        return b.reshape(v, tuple(x_shape[axis] if a == axis else 1 for a in range(len(x_shape))))
    blocks = -(-x_shape[axis] // block)
    want = x_shape[:axis] + (blocks,) + x_shape[axis + 1:]
    if block < 0 or shape != want:
        raise n.error(f"blocked {what} of shape {list(shape)} with block_size={block} along axis {axis}: "
                      f"expected shape {list(want)} for x of shape {list(x_shape)}")
    spread = shape[:axis + 1] + (block,) + shape[axis + 1:]
    v = b.op("BroadcastTo", [b.reshape(v, shape[:axis + 1] + (1,) + shape[axis + 1:])], shape=spread)
    v = b.reshape(v, shape[:axis] + (blocks * block,) + shape[axis + 1:])
    if blocks * block != x_shape[axis]:                             # a shorter last block
        v = b.op("Slice", [v], begin=(0,) * len(shape), end=x_shape, strides=(1,) * len(shape))
    return v


# TensorProto numbers of the types graphkernel quantizes to
_ONNX_QUANT = {to_onnx_type(d): d for d in QUANTIZED}


def output_type(n: NodeInfo, zero_point) -> DType:
    """QuantizeLinear's output type: its zero point's, else output_dtype's, else uint8."""
    declared = n.attr("output_dtype", 0)
    if declared and declared not in _ONNX_QUANT:
        raise n.error(f"quantizing to {type_name(declared)} is not supported; graphkernel quantizes to "
                      f"{', '.join(d.value for d in QUANTIZED)}")
    dtype = dtype_of(zero_point) if zero_point is not None else _ONNX_QUANT.get(declared, DType.uint8)
    if declared and _ONNX_QUANT[declared] != dtype:
        raise n.error(f"output_dtype {type_name(declared)} differs from y_zero_point's type {dtype}")
    if dtype not in QUANTIZED:
        raise n.error(f"y_zero_point is {dtype}: ONNX quantizes to {', '.join(d.value for d in QUANTIZED)} "
                      "(and types graphkernel does not hold)")
    return dtype


def saturate(b: Builder, rounded, zero_point, dtype: DType):
    """clip(rounded + zero_point) to dtype's range, cast to it: in float64, where both are exact (the
    zero point cast to float64 already)."""
    low, high = dtype.bounds
    v = b.cast(rounded, DType.float64)
    if zero_point is not None:
        v = b.op("Add", [v, zero_point])
    v = b.binary("Minimum", b.binary("Maximum", v, low), high)
    v = b.op("Select", [b.op("IsNan", [v]), b.const(low, v), v])
    return b.cast(v, dtype)


@converter("QuantizeLinear", min_version=10, reviewed=28)
def quantize_linear(b: Builder, n: NodeInfo):
    x, scale, zero_point = n.inputs[0], n.inputs[1], n.input(2)
    dtype = output_type(n, zero_point)
    precision = n.attr("precision", 0)
    wide = to_dtype(precision, "precision") if precision else common_dtype(dtype_of(x), dtype_of(scale))
    scale = along(b, n, scale, x, "y_scale")
    quotient = b.op("RealDiv", [b.cast(x, wide), b.cast(scale, wide)])
    if dtype == DType.float4_e2m1fn:   # the cast rounds and saturates
        if zero_point is not None:
            quotient = b.op("Add", [quotient, along(b, n, b.cast(zero_point, wide), x, "y_zero_point")])
        return [b.cast(quotient, dtype)]
    zero_point = None if zero_point is None else along(b, n, b.cast(zero_point, DType.float64), x, "y_zero_point")
    return [saturate(b, b.op("Round", [quotient]), zero_point, dtype)]


@converter("DequantizeLinear", min_version=10, reviewed=28)
def dequantize_linear(b: Builder, n: NodeInfo):
    x, scale, zero_point = n.inputs[0], n.inputs[1], n.input(2)
    declared = n.attr("output_dtype", 0)
    out = to_dtype(declared, "output_dtype") if declared else dtype_of(scale)
    dx = b.cast(x, DType.float32)
    if zero_point is not None:
        if dtype_of(zero_point) != dtype_of(x):
            raise n.error(f"x_zero_point's type {dtype_of(zero_point)} differs from x's {dtype_of(x)}")
        wide = common_dtype(DType.float32, dtype_of(zero_point))   # an int32 zero point: float64
        zero_point = along(b, n, b.cast(zero_point, wide), x, "x_zero_point")
        dx = b.op("Sub", [b.cast(dx, wide), zero_point])
    scale = along(b, n, scale, x, "x_scale")
    wide = common_dtype(dtype_of(dx), dtype_of(scale))
    return [b.cast(b.op("Mul", [b.cast(dx, wide), b.cast(scale, wide)]), out)]


@converter("DynamicQuantizeLinear", min_version=11)
def dynamic_quantize_linear(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    if dtype_of(x) != DType.float32:
        raise n.error(f"x must be float32, got {dtype_of(x)}")
    high = b.binary("Maximum", b.op("ReduceMax", [x], axis=(), keep_dims=False), 0)
    low = b.binary("Minimum", b.op("ReduceMin", [x], axis=(), keep_dims=False), 0)
    span = b.op("Sub", [high, low])
    span = b.op("Select", [b.binary("Equal", span, 0), b.const(1, span), span])   # x all zeros: scale 1/255
    scale = b.binary("RealDiv", span, 255)
    start = b.op("Sub", [b.const(0, scale), b.op("RealDiv", [low, scale])])
    zero_point = b.op("Round", [b.binary("Minimum", b.binary("Maximum", start, 0), 255)])
    rounded = b.op("Round", [b.op("RealDiv", [x, scale])])
    return [saturate(b, rounded, b.cast(zero_point, DType.float64), DType.uint8), scale,
            b.cast(zero_point, DType.uint8)]
