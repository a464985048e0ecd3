"""Dropout for training: `nn.Dropout(p=)`, `ops.dropout(x, p=0.5, training=True, seed=None)`, and
MindSpore's primitive `P.Dropout(keep_prob=0.5, Seed0=0, Seed1=0)(x) -> (output, mask)`.

The primitive's mask is x-shaped, in x's dtype, 1 where an element is kept and 0 where it is dropped (the
form MindSpore's CPU and GPU kernels return; Ascend's packed uint8 bitmask is not modelled), and is
what `_grad_ops.DropoutGrad(keep_prob)(dy, mask)` consumes. Seed0 is the op's own seed (mixed with
`set_seed`'s, as ops.dropout's `seed`), Seed1 is mixed into its op id; the output and the mask are the
same draw (the same counters), so output == x * mask / keep_prob.

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
from graphkernel.settings import seed as _seed
from graphkernel.ops.primitive import Primitive
from graphkernel.tensor import Parameter, Tensor
from graphkernel.tracing.trace import SymbolicTensor, active_trace

GENERATOR_OFFSET = Parameter(np.zeros((1,), np.int32), name="random_generator_offset", requires_grad=False)
_seed.on_set_seed(lambda: GENERATOR_OFFSET.set_data(np.zeros((1,), np.int32)))


class DropoutError(GraphKernelError, ValueError):
    """A drop probability outside [0, 1)."""


class _Dropout(Primitive):
    op = "Dropout"
    num_tensors = 2


class _Greater(Primitive):
    op = "Greater"
    num_tensors = 2


class _Cast(Primitive):
    op = "Cast"
    call_attrs = ("dtype",)


class _OnesLike(Primitive):
    op = "OnesLike"


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


class Dropout:
    """MindSpore's `Dropout(keep_prob=0.5, Seed0=0, Seed1=0)(x) -> (output, mask)` (see the module doc)."""

    signature = "P.Dropout(keep_prob=0.5, Seed0=0, Seed1=0)(x) -> (output, mask)"

    def __init__(self, keep_prob=0.5, Seed0=0, Seed1=0):
        if isinstance(keep_prob, bool) or not isinstance(keep_prob, (int, float)) or not 0 < keep_prob <= 1:
            raise DropoutError(f"P.Dropout: keep_prob must be in (0, 1], got {keep_prob!r}")
        for name, v in (("Seed0", Seed0), ("Seed1", Seed1)):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2 ** 32:
                raise DropoutError(f"P.Dropout: {name} must be an int in [0, 2^32), got {v!r}")
        self.keep_prob, self.seed0, self.seed1 = float(keep_prob), Seed0, Seed1

    def __repr__(self) -> str:
        return f"P.Dropout(keep_prob={self.keep_prob}, Seed0={self.seed0}, Seed1={self.seed1})"

    def __call__(self, x):
        attrs = {"keep_prob": self.keep_prob, "seed": _seed_of(self.seed0)}
        trace = active_trace()
        if trace is not None:
            offset = SymbolicTensor(trace.random_offset(GENERATOR_OFFSET))
            op_id = zlib.crc32(trace.random_site().encode()) ^ self.seed1
        else:
            offset, op_id = Tensor(GENERATOR_OFFSET._array.copy()), self.seed1
        draw = _Dropout(op_id=op_id, **attrs)
        out = draw(x, offset)
        mask = _Cast()(_Greater()(draw(_OnesLike()(x), offset), 0.0), x.dtype)
        if trace is None:
            GENERATOR_OFFSET._array += 1
        return out, mask
