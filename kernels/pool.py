"""Pooling kernels: MaxPool, AvgPool and their gradients as kh * kw vectorized passes over strided views, one
per window tap, in numpy (each pass a whole [N, C, oh, ow] operation; no window is materialized).

    MaxPool       out = max over taps of the -inf-padded input (a running np.maximum)
    AvgPool       out = (sum over taps of the zero-padded input) / the count of real pixels per window
    MaxPoolGrad   each tap's view copied out contiguous, the first maximum per window found over them in
                  row-major order (np.argmax's: a NaN is the maximum, its first one wins), then each tap
                  adds dout where it was that maximum and +0.0 elsewhere, as the reference adds
    AvgPoolGrad   each tap adds dout / count to the pixels it read

The taps run in the reference's order (ir/ops/pool.py), so MaxPool and MaxPoolGrad give its bits; an
average's sum may round differently. float16 is computed in float32 and rounded once.

MaxPoolGrad keeps to numpy operations that run at memory speed: a comparison, a maximum, integer
arithmetic and bitwise ands over contiguous arrays, and one strided add per tap. A masked copy
(np.where, copyto's where=) runs ~25x slower per element than these, and the strided views of the
padded input slower than contiguous copies of them: written with those, ResNet-50's one MaxPoolGrad,
(2, 64, 112, 112) with 3x3 windows at stride 2, took 72 ms of a 0.84 s training step.
"""
from __future__ import annotations

import numpy as np

from ir.graph import Node
from ir.ops.conv import pads
from ir.ops.pool import counts, pool_shape, window_attrs

POOL_OPS = ("MaxPool", "AvgPool", "MaxPoolGrad", "AvgPoolGrad")


class Windows:
    def __init__(self, x_shape: tuple, attrs: dict):
        w = window_attrs(attrs)
        self.shape = x_shape
        self.pads = pads(w, *x_shape[2:])
        (self.kh, self.kw), (self.sh, self.sw) = w["kernel_size"], w["stride"]
        self.out = pool_shape(x_shape, attrs)
        self.oh, self.ow = self.out[2:]
        self.count = counts(x_shape, attrs)

    def padded(self, x: np.ndarray, fill) -> np.ndarray:
        t, b, l, r = self.pads
        if not any(self.pads):
            return x
        out = np.full(x.shape[:2] + (x.shape[2] + t + b, x.shape[3] + l + r), fill, x.dtype)
        out[:, :, t:t + x.shape[2], l:l + x.shape[3]] = x
        return out

    def taps(self):
        for i in range(self.kh):
            for j in range(self.kw):
                yield i, j

    def tap(self, a: np.ndarray, i: int, j: int) -> np.ndarray:
        return a[:, :, i:i + (self.oh - 1) * self.sh + 1:self.sh, j:j + (self.ow - 1) * self.sw + 1:self.sw]

    def scatter(self, per_tap, dtype) -> np.ndarray:
        """x's gradient: what each tap receives (per_tap(i, j) -> [N, C, oh, ow]) added where it read."""
        t, b, l, r = self.pads
        n, c, h, w = self.shape
        grad = np.zeros((n, c, h + t + b, w + l + r), dtype)
        for i, j in self.taps():
            self.tap(grad, i, j)[...] += per_tap(i, j)
        return grad[:, :, t:t + h, l:l + w]


def _wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _max_pool(win: Windows):
    def max_pool(x, out):
        xp = win.padded(x.reshape(win.shape), -np.inf)
        res = out.reshape(win.out)
        res[...] = win.tap(xp, 0, 0)
        for i, j in win.taps():
            np.maximum(res, win.tap(xp, i, j), out=res)
    return max_pool


def _avg_pool(win: Windows):
    def avg_pool(x, out):
        xp = win.padded(_wide(x.reshape(win.shape)), 0)
        acc = np.zeros(win.out, xp.dtype)
        for i, j in win.taps():
            acc += win.tap(xp, i, j)
        np.copyto(out.reshape(win.out), acc / win.count.astype(xp.dtype), casting="unsafe")
    return avg_pool


def _first_maximum(taps: np.ndarray) -> np.ndarray:
    """np.argmax(taps, axis=0) of [taps, ...] as int8 (int32 for 128 taps or more), by whole-array
    operations: a tap wins where it is greater than the best so far, or NaN where the best is not."""
    first = np.zeros(taps.shape[1:], np.int8 if len(taps) < 128 else np.int32)
    best = taps[0].copy()
    better, nan = np.empty(best.shape, bool), np.empty(best.shape, bool)
    for k in range(1, len(taps)):
        np.greater(taps[k], best, out=better)
        np.isnan(taps[k], out=nan)
        nan &= ~np.isnan(best)
        better |= nan
        first += (k - first) * better           # first = k where better
        np.maximum(best, taps[k], out=best)     # NaN once seen stays the best, as argmax's
    return first


def _max_pool_grad(win: Windows):
    count = win.kh * win.kw

    def max_pool_grad(x, y, dout, out):
        xp = win.padded(x.reshape(win.shape), -np.inf)
        d = _wide(dout.reshape(win.out))
        taps = np.empty((count,) + win.out, xp.dtype)
        for i, j in win.taps():
            taps[i * win.kw + j] = win.tap(xp, i, j)
        first = _first_maximum(taps)
        bits = d.view(np.dtype(f"u{d.itemsize}"))
        share = taps.view(bits.dtype) if taps.dtype == d.dtype else np.empty(taps.shape, bits.dtype)
        for k in range(count):   # dout's bits where tap k is the first maximum, else 0 (+0.0)
            np.bitwise_and(bits, -(first == k).astype(bits.dtype), out=share[k])
        share = share.view(d.dtype)
        grad = win.scatter(lambda i, j: share[i * win.kw + j], d.dtype)
        np.copyto(out.reshape(win.shape), grad, casting="unsafe")
    return max_pool_grad


def _avg_pool_grad(win: Windows):
    def avg_pool_grad(x, y, dout, out):
        d = _wide(dout.reshape(win.out))
        share = d / win.count.astype(d.dtype)
        np.copyto(out.reshape(win.shape), win.scatter(lambda i, j: share, d.dtype), casting="unsafe")
    return avg_pool_grad


_MAKERS = {"MaxPool": _max_pool, "AvgPool": _avg_pool, "MaxPoolGrad": _max_pool_grad, "AvgPoolGrad": _avg_pool_grad}


def pool_kernel(node: Node):
    """The step function (inputs..., output) computing a pooling node on flat buffers."""
    fn = _MAKERS[node.op](Windows(node.inputs[0].shape, node.attr_dict))

    def kernel(*arrays):
        with np.errstate(invalid="ignore", over="ignore"):
            fn(*arrays)
    kernel.__name__ = fn.__name__
    return kernel
