"""Dropout on the device: one numba loop that computes each element's keep decision with the same
counter-based generator the reference uses (ir/ops/random.py: `philox_uniform`, compiled here per
element), so the device gives the reference's bits. The mask is never stored. A half-float x is computed
in float32 and rounded once, as the reference does."""
from __future__ import annotations

import numba
import numpy as np

from ir.ops.random import compute_dtype, philox_uniform

_philox = numba.njit(cache=True, nogil=True)(philox_uniform)


@numba.njit(cache=True, nogil=True)
def _dropout(x, seed, op_id, offset, keep_prob, scale, out):
    for i in range(x.shape[0]):
        u = _philox(seed, op_id, offset, np.uint64(i))
        out[i] = x[i] * scale if u < keep_prob else scale * 0


def dropout_fn(keep_prob: float, seed: int, op_id: int, dtype):
    """The step function (x, offset, out) of one Dropout launch, on flat buffers."""
    wide = compute_dtype(dtype)
    scale = wide.type(1.0 / keep_prob)
    widen = wide != np.dtype(dtype)

    def dropout(x, offset, out):
        counter = np.uint64(int(offset[0]) & 0xFFFFFFFF)
        if widen:
            tmp = np.empty(x.shape[0], wide)
            _dropout(x.astype(wide), np.uint64(seed), np.uint64(op_id), counter, keep_prob, scale, tmp)
            out[:] = tmp.astype(out.dtype)
        else:
            _dropout(x, np.uint64(seed), np.uint64(op_id), counter, keep_prob, scale, out)
    return dropout
