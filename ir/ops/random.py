"""Randomness as a pure function of counters: Dropout.

    Dropout(x, offset) {keep_prob, seed, op_id}
        x where an element is kept, scaled by 1 / keep_prob, else 0. Element i (row-major in x) is kept
        when philox_uniform(seed, op_id, offset, i) < keep_prob. `offset` is an int32 scalar read at run
        time (the generator offset a training step advances); `seed` and `op_id` (derived from the
        scope of the op in its network) are attributes. Its gradient is the same op on the cotangent:
        the same counters give the same mask, regenerated, never stored.

`philox_uniform` is Philox4x32-10 (a counter-based generator: Salmon et al., SC'11) over the counter
(i mod 2^32, i div 2^32, offset, 0) and the key (seed mod 2^32, op_id), its first word's top 24 bits
as a float in [0, 1). It uses only uint64 arithmetic that cannot overflow (32 x 32 -> 64 bit products)
and works elementwise on numpy arrays and on numba scalars alike: the reference calls it on arrays and
the device kernel (kernels/random.py) calls this same function per element, so both give the same bits.
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import wide_np
from ir.errors import ShapeError
from ir.ops.checks import is_int
from ir.ops.registry import Api, Attr, Cost, OpDef, Pattern, Precision, register

_MASK = np.uint64(0xFFFFFFFF)
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_S32, _S8 = np.uint64(32), np.uint64(8)
_UNIT = 1.0 / 16777216.0   # 2^-24


def philox_uniform(seed, op_id, offset, index):
    """A float in [0, 1) per index (uint64 scalars or arrays): Philox4x32-10's first output word."""
    c0, c1 = index & _MASK, index >> _S32
    c2, c3 = offset & _MASK, offset * np.uint64(0)
    k0, k1 = seed & _MASK, op_id & _MASK
    for _ in range(10):
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = ((p1 >> _S32) ^ c1 ^ k0), (p1 & _MASK), ((p0 >> _S32) ^ c3 ^ k1), (p0 & _MASK)
        k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
    return (c0 >> _S8) * _UNIT


def dropout_reference(arrays, attrs):
    x, offset = arrays
    index = np.arange(x.size, dtype=np.uint64)
    u = philox_uniform(np.uint64(attrs["seed"]), np.uint64(attrs["op_id"]),
                       np.uint64(int(np.asarray(offset).reshape(-1)[0]) & 0xFFFFFFFF), index)
    kept = (u < attrs["keep_prob"]).reshape(x.shape)
    wide = compute_dtype(x.dtype)   # a half float scales in float32, rounded once
    scaled = (x.astype(wide) * wide.type(1.0 / attrs["keep_prob"])).astype(x.dtype)
    return np.where(kept, scaled, np.zeros((), x.dtype))


def compute_dtype(dtype) -> np.dtype:
    """The dtype Dropout scales in: a half float in float32 (rounded once), others in their own."""
    return wide_np(dtype)


def _infer(types, attrs):
    x, offset = types
    if not x.dtype.is_float:
        raise ShapeError(f"x is {x}: dropout takes a float tensor")
    if offset.dtype.name != "int32" or offset.size != 1:
        raise ShapeError(f"offset is {offset}: the generator offset is one int32")
    return (x,)


def _keep_prob(v) -> float:
    v = float(v)
    if not 0.0 < v <= 1.0:
        raise ValueError(f"must be in (0, 1], got {v}")
    return v


def _u32(v) -> int:
    v = is_int(v)
    if not 0 <= v < 2 ** 32:
        raise ValueError(f"must be in [0, 2^32), got {v}")
    return v


def _grad(b, node, douts):
    return (b.op("Dropout", douts[0], node.inputs[1], **node.attr_dict), None)


register(OpDef(
    "Dropout", Pattern.OPAQUE, 2, _infer, dropout_reference,
    (Attr("keep_prob", check=_keep_prob), Attr("seed", 0, _u32), Attr("op_id", 0, _u32)),
    doc="x * mask / keep_prob, the mask a counter-based function of (seed, op_id, offset, index)",
    cost=Cost.TRANSCENDENTAL, domain="real", grad=_grad, api=Api(primitive=False),
    precision=Precision("gray", True, "scales its input")))
