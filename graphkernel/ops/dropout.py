"""Dropout for training: `nn.Dropout(p=)` and `ops.dropout(x, p=0.5, training=True, seed=None)`.

A mask element is a pure function of (seed, generator offset, op id, index) (ir/ops/random.py): the
seed is `set_seed`'s (with the op's own seed) and part of the compile key; the offset is the int32
Parameter `GENERATOR_OFFSET`, read at run time: every dropout of one compiled call reads the same
offset and the call advances it by one (`set_seed` resets it to 0). The op id is a hash of where the
dropout sits in the network (the cell path and its rank among the dropouts of that construct), so the
forward traced twice in one step (a loss, then its gradient) is the same op with the same mask, and
fused and unfused runs, the reference and the device, all draw the same mask. In PYNATIVE_MODE each
dropout call is its own draw (the offset advances per call).
"""
from __future__ import annotations

import zlib

import numpy as np

from ir.errors import GraphKernelError
from graphkernel import seed as _seed
from graphkernel.ops.primitive import Primitive
from graphkernel.tensor import Parameter, Tensor
from graphkernel.trace import SymbolicTensor, active_trace

GENERATOR_OFFSET = Parameter(np.zeros((1,), np.int32), name="random_generator_offset", requires_grad=False)
_seed.on_set_seed(lambda: GENERATOR_OFFSET.set_data(np.zeros((1,), np.int32)))


class DropoutError(GraphKernelError, ValueError):
    """A drop probability outside [0, 1)."""


class _Dropout(Primitive):
    op = "Dropout"
    num_tensors = 2


def _seed_of(op_seed) -> int:
    base = _seed.get_seed() or 0
    return (base * 1000003 + (op_seed or 0)) & 0xFFFFFFFF


def dropout(x, p=0.5, training=True, seed=None):
    """x with each element zeroed with probability p, the rest scaled by 1 / (1 - p) (MindSpore's
    ops.dropout); the identity when not training or p == 0."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise DropoutError(f"dropout: p must be a float in [0, 1), got {p!r}")
    if not training or p == 0:
        return x
    attrs = {"keep_prob": 1.0 - float(p), "seed": _seed_of(seed)}
    trace = active_trace()
    if trace is not None:
        offset = SymbolicTensor(trace.random_offset(GENERATOR_OFFSET))
        site = trace.random_site()
        return _Dropout(op_id=zlib.crc32(site.encode()), **attrs)(x, offset)
    out = _Dropout(op_id=0, **attrs)(x, Tensor(GENERATOR_OFFSET._array.copy()))
    GENERATOR_OFFSET._array += 1
    return out
