"""UnsortedSegmentSum on the device: one pass over the rows of x, each added into the row of its segment.

    out[s, :] = sum of x[i, :] over the rows i with ids[i] == s     (x viewed as [len(ids), width])

Ids outside [0, num_segments) are skipped. A float16 x is read as float32 (numba has no float16
arithmetic here) and accumulates in a float32 buffer, rounded once into the output, as the reference. The loop is serial over rows (two rows may add into one
segment, so rows cannot run in parallel without atomics) and contiguous over the width.
"""
from __future__ import annotations

import numba
import numpy as np

from ir.dtypes import wide_np


@numba.njit(cache=True, nogil=True)
def _segment_sum(x, ids, acc):
    segments, width = acc.shape
    for i in range(ids.shape[0]):
        s = ids[i]
        if 0 <= s < segments:
            for j in range(width):
                acc[s, j] += x[i, j]


def segment_sum_fn(x_shape: tuple[int, ...], ids_shape: tuple[int, ...], num_segments: int, dtype):
    """The step function (x, ids, out) of one UnsortedSegmentSum launch, on flat buffers."""
    rows = int(np.prod(ids_shape, dtype=np.int64))
    width = int(np.prod(x_shape[len(ids_shape):], dtype=np.int64))
    wide = wide_np(dtype)   # a half float sums in float32

    def segment_sum(x, ids, out):
        # a float32 or float64 output accumulates where it lies, unless it is x's own buffer (an
        # update of x in place): an embedding table's gradient is one zeroing and one pass, not a
        # fresh buffer, its page faults and a copy every step
        in_place = out.dtype == wide and not np.may_share_memory(out, x)
        acc = out.reshape(num_segments, width) if in_place else np.empty((num_segments, width), wide)
        acc.fill(0)
        if rows and width:
            _segment_sum(x.reshape(rows, width).astype(wide, copy=False), ids.astype(np.int64), acc)
        if not in_place:
            out[:] = acc.reshape(-1)
    return segment_sum
