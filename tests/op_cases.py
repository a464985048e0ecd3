"""Sample calls of the op rows the elementwise generators (tests/op_samples.py) do not reach: rows with
attributes, several results or integer inputs. Each case holds the inputs, the attributes and a numpy
expression of the result written apart from the row's reference; tests/test_op_cases.py checks the
reference against it, and the device, unfused and fused, against the reference. A new row gets a case
here, or its line in TESTED_ELSEWHERE saying where it is tested.

    CASES  -> [OpCase(op, arrays, attrs, numpy, id)]
    BAD    -> [BadCase(op, types, attrs, match)]: an error naming the op and the rule
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np

F = np.float32
BF16 = ml_dtypes.bfloat16   # every case with a float16 input has a bfloat16 twin


@dataclass
class OpCase:
    op: str
    arrays: list
    attrs: dict = field(default_factory=dict)
    numpy: Callable | None = None    # arrays -> the expected result(s)
    id: str = ""
    # False: the device's result is within the dtype's tolerance of the reference, not bitwise: an
    # expansion computing exp or log (kernels/mathfn.py's approximations), or a float sum whose order the
    # kernel chooses (convolutions, average pooling)
    bitwise: bool = True


@dataclass
class BadCase:
    op: str
    arrays: list
    attrs: dict
    match: str


def _x(*shape, dtype=F):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) - 3


def _ss(begin, end, strides, **masks):
    return {"begin": begin, "end": end, "strides": strides, **masks}


CASES = [
    OpCase("StridedSlice", [_x(2, 3, 4)], _ss((0, 1, 0), (2, 3, 4), (1, 1, 1)), lambda x: x[0:2, 1:3, 0:4]),
    OpCase("StridedSlice", [_x(2, 3, 4)], _ss((1,), (2,), (1,), shrink_axis_mask=1), lambda x: x[1]),
    OpCase("StridedSlice", [_x(2, 3, 4)], _ss((0, 0), (1, 2), (1, 1), ellipsis_mask=1), lambda x: x[..., 0:2]),
    OpCase("StridedSlice", [_x(2, 3, 4)], _ss((0, 0, 0), (1, 1, 1), (1, 1, 1), new_axis_mask=2),
           lambda x: x[0:1, None, 0:1]),
    OpCase("StridedSlice", [_x(2, 3, 4)], _ss((0, -1), (2, -3), (1, -1), end_mask=2), lambda x: x[0:2, ::-1]),
    OpCase("StridedSlice", [_x(2, 3, 4)], _ss((0, 0, 0), (0, 0, 0), (1, 1, 2), begin_mask=7, end_mask=7),
           lambda x: x[:, :, ::2]),
    OpCase("StridedSlice", [_x(2, 3, 4)], _ss((0, -1), (2, 6), (1, 1), shrink_axis_mask=2), lambda x: x[0:2, -1]),
    OpCase("StridedSlice", [_x(2, 3, 4)], _ss((5,), (1,), (1,)), lambda x: x[5:1]),
    OpCase("StridedSlice", [_x(3, 1, 4)], _ss((0, 0, 0), (0, 0, 0), (1, 1, 1), begin_mask=5, end_mask=5,
                                              shrink_axis_mask=2), lambda x: x[:, 0, :]),   # only a reshape
    OpCase("StridedSlice", [_x(6, 5)], _ss((1, 0, 4), (6, 0, 0), (2, 1, -2), new_axis_mask=2, end_mask=4),
           lambda x: x[1:6:2, None, 4::-2]),
]

CASES += [
    OpCase("Squeeze", [_x(2, 1, 3, 1)], {}, lambda x: x.reshape(2, 3)),
    OpCase("Squeeze", [_x(2, 1, 3, 1)], {"axis": (-1, 0)}, lambda x: x.reshape(2, 1, 3)),   # 0: size 2, stays
    OpCase("ExpandDims", [_x(2, 3)], {"axis": -1}, lambda x: x[:, :, None]),
    OpCase("ExpandDims", [_x(2, 3)], {"axis": 0}, lambda x: x[None]),
    OpCase("Tile", [_x(2, 1, 3)], {"multiples": (2, 1, 1, 2)}, lambda x: np.tile(x, (2, 1, 1, 2))),
    OpCase("Tile", [_x(2, 1, 3)], {"multiples": (3, 2)}, lambda x: np.concatenate([np.concatenate([x] * 3, 1)] * 2, 2)),
    OpCase("Tile", [_x(2, 3, dtype=np.int32)], {"multiples": (2, 0)}, lambda x: np.zeros((4, 0), np.int32)),
    OpCase("Tile", [_x(3)], {"multiples": (1,)}, lambda x: x),
    OpCase("Argmax", [np.array([[1, 5, 5], [7, 2, 7]], F)], {}, lambda x: np.array([1, 0], np.int32)),
    OpCase("Argmax", [np.array([[np.nan, 5, 5], [7, np.nan, 4]], F)], {"axis": 0, "output_type": np.int64},
           lambda x: np.array([0, 1, 0], np.int64)),   # NaN is the maximum, as numpy's argmax
    OpCase("OneHot", [np.array([0, 2, -1, 3, 1], np.int32), np.array(1, F), np.array(0, F)], {"depth": 3},
           lambda i, on, off: np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0], [0, 1, 0]], F)),
    OpCase("OneHot", [np.array([[0, 2], [1, 5]], np.int64), np.array(2, np.float16), np.array(-1, np.float16)],
           {"depth": 3, "axis": 1}, lambda i, on, off: np.where(i[:, None, :] == np.arange(3)[None, :, None], 2, -1)),
    OpCase("OneHot", [np.array([[0, 2], [1, 5]], np.int64), np.array(2.5, BF16), np.array(-1, BF16)],
           {"depth": 3, "axis": 1}, lambda i, on, off: np.where(i[:, None, :] == np.arange(3)[None, :, None], 2.5, -1)),
    OpCase("OneHot", [np.array([1, 0], np.int32), np.array([5], np.int32), np.array([7], np.int32)],
           {"depth": 2, "axis": 0}, lambda i, on, off: np.array([[7, 5], [5, 7]], np.int32)),
    OpCase("OneHot", [np.array([1, 0], np.int32), np.array(1, F), np.array(0, F)], {"depth": 0},
           lambda i, on, off: np.zeros((2, 0), F)),
    OpCase("AddN", [_x(2, 3), _x(2, 3) * 2, _x(2, 3) * -4], {}, lambda a, b, c: (a + b) + c),
    OpCase("AddN", [_x(4, dtype=np.int32)], {}, lambda a: a),
]


def _adam(var, m, v, lr, beta1, beta2, eps, decay, g):
    w = np.float32
    var, m, v, g = (x.astype(w) for x in (var, m, v, g))
    m2 = beta1 * m + (w(1) - beta1) * g
    v2 = beta2 * v + (w(1) - beta2) * np.square(g)
    return var - lr * (m2 / (np.sqrt(v2) + eps) + decay * var), m2, v2


_rng = np.random.default_rng(0)
_W, _G = _rng.standard_normal((2, 3, 5)).astype(F), _rng.standard_normal((2, 3, 5)).astype(F)
_M, _V = _rng.standard_normal((2, 3, 5)).astype(F), _rng.uniform(0, 2, (2, 3, 5)).astype(F)
_HYPER = [np.array(v, F) for v in (0.01, 0.9, 0.999, 1e-6, 0.1)]
CASES += [
    OpCase("AdamWeightDecay", [_W, _M, _V, *_HYPER, _G], {}, _adam),
    OpCase("AdamWeightDecay", [_W.astype(np.float16), _M.astype(np.float16), _V.astype(np.float16),
                               *[h.reshape(1) for h in _HYPER], _G.astype(np.float16)], {},
           lambda *a: tuple(r.astype(np.float16) for r in _adam(*a))),
    # MindSpore's in-place optimizer primitives (ir/ops/optimizer_updates.py; MindSpore 2.10's values in
    # tests/test_optimizer_primitives.py)
    OpCase("ApplyMomentum", [_W, _M, np.array(0.1, F), _G, np.array(0.9, F)], {},
           lambda w, a, lr, g, mom: (w - lr * (a * mom + g), a * mom + g)),
    OpCase("ApplyMomentum", [_W, _M, np.array(0.1, F), _G, np.array(0.9, F)], {"use_nesterov": True, "gradient_scale": 0.5},
           lambda w, a, lr, g, mom: (w - lr * (g / 2 + (a * mom + g / 2) * mom), a * mom + g / 2)),
    OpCase("Adam", [_W, _M, _V, np.array(0.9 ** 2, F), np.array(0.999 ** 2, F), *_HYPER[:4], _G], {},
           lambda w, m, v, p1, p2, lr, b1, b2, eps, g: (
               w - lr * np.sqrt(1 - p2) / (1 - p1) * (b1 * m + (1 - b1) * g) / (np.sqrt(b2 * v + (1 - b2) * g * g) + eps),
               b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g)),
    OpCase("FusedCastAdamWeightDecay", [_W, _M, _V, *_HYPER, _G.astype(np.float16), np.array(2.0, F)], {},
           lambda w, m, v, lr, b1, b2, eps, decay, g, n: _adam(w, m, v, lr, b1, b2, eps, decay, g.astype(F) / n)),
    OpCase("LambApplyOptimizerAssign", [_G, _V, _M, _W, *(np.array([x], F) for x in (0.9, 0.1, 0.999, 0.001, 1e-6, 3.0, 1.0, 0.01))],
           {}, lambda g, v, m, w, b1, s1, b2, s2, eps, t, use, wd: (
               (m * b1 + g * s1) / (1 - np.exp(np.log(b1) * t))   # beta1 ** t as MindSpore's expander writes it
               / (np.sqrt((v * b2 + g * g * s2) / (1 - np.exp(np.log(b2) * t))) + eps) + w * wd * use,
               v * b2 + g * g * s2, m * b1 + g * s1), bitwise=False),
    OpCase("LambApplyWeightAssign", [np.array([2.0], F), np.array([0.5], F), np.array([0.01], F), _G, _W], {},
           lambda wn, gn, lr, u, w: w - lr * (wn / gn) * u),
    OpCase("LambApplyWeightAssign", [np.array([2.0], F), np.array([0.0], F), np.array([0.01], F), _G, _W], {},
           lambda wn, gn, lr, u, w: w - lr * u),
    OpCase("AdamWeightDecay", [_W.astype(BF16), _M.astype(BF16), _V.astype(BF16),
                               *[h.reshape(1) for h in _HYPER], _G.astype(BF16)], {},
           lambda *a: tuple(r.astype(BF16) for r in _adam(*a))),
    OpCase("ScatterAdd", [np.zeros((4, 2), F), np.array([[0, 2], [2, 3]], np.int32),
                          np.arange(8, dtype=F).reshape(2, 2, 2)], {},
           lambda x, i, u: np.array([[0, 1], [0, 0], [6, 8], [6, 7]], F)),   # MindSpore 2.10's
    OpCase("ScatterAdd", [_x(3, 2, 2, dtype=np.int32), np.array([1, 1, 1], np.int64),
                          np.ones((3, 2, 2), np.int32)], {}, lambda x, i, u: x + np.array([0, 3, 0])[:, None, None]),
]

_P = _x(2, 3, 4)
CASES += [
    OpCase("Gather", [_P, np.array([1, -1], np.int32)], {"axis": 1}, lambda p, i: p[:, [1, 2]]),
    OpCase("Gather", [_P, np.array([[2, 0], [1, 1]], np.int32)], {"axis": 1, "batch_dims": 1},
           lambda p, i: np.stack([p[0][[2, 0]], p[1][[1, 1]]])),
    OpCase("Gather", [_P, np.array([[2, 0], [1, 3]], np.int64)], {"axis": 2, "batch_dims": 1},
           lambda p, i: np.stack([p[0][:, [2, 0]], p[1][:, [1, 3]]])),
]

_INF = np.array([[1, np.inf], [0, 2]], F)
_NAN = np.array([np.nan, 1], F)
_ONE = np.ones((2, 3), F)
CASES += [
    OpCase("FloatStatus", [_ONE], {}, lambda x: np.zeros(1, F)),
    OpCase("FloatStatus", [_INF], {}, lambda x: np.ones(1, F)),
    OpCase("FloatStatus", [_NAN.astype(np.float16)], {}, lambda x: np.ones(1, F)),
    OpCase("FloatStatus", [_INF.astype(BF16)], {}, lambda x: np.ones(1, F)),
    OpCase("FloatStatus", [_ONE.astype(BF16)], {}, lambda x: np.zeros(1, F)),
    OpCase("NPUAllocFloatStatus", [], {}, lambda: np.zeros(8, F)),
    OpCase("NPUClearFloatStatus", [np.ones(8, F)], {}, lambda s: np.zeros(8, F)),
    OpCase("NPUClearFloatStatusV2", [np.ones(8, np.int32)], {}, lambda s: np.zeros(8, np.int32)),
    OpCase("NPUGetFloatStatus", [np.zeros(8, F), _ONE, _INF], {}, lambda s, *w: np.ones(8, F)),
    OpCase("NPUGetFloatStatus", [np.ones(8, F), _ONE, _ONE], {}, lambda s, *w: np.zeros(8, F)),
    OpCase("NPUGetFloatStatus", [np.zeros(8, F)], {}, lambda s: np.zeros(8, F)),
    OpCase("NPUGetFloatStatusV2", [np.zeros(8, np.int32), _NAN], {}, lambda s, *w: np.ones(8, np.int32)),
    OpCase("NPUGetFloatStatusV2", [np.zeros(8, np.int32), _ONE.astype(np.float16)], {},
           lambda s, *w: np.zeros(8, np.int32)),
    OpCase("NPUGetFloatStatusV2", [np.zeros(8, np.int32), _ONE.astype(BF16), _NAN.astype(BF16)], {},
           lambda s, *w: np.ones(8, np.int32)),
]

# collectives in a process that is its group (ir/ops/collective.py's Alone: every one the identity);
# among two ranks: tests/test_dist_collectives.py under mpiexec
CASES += [
    *[OpCase("AllReduce", [_ONE * 3], {"op": op}, lambda x: x) for op in ("sum", "max", "min", "prod")],
    OpCase("AllReduce", [_x(4, dtype=np.int32)], {}, lambda x: x),
    OpCase("AllGather", [_x(2, 3)], {}, lambda x: x),
    OpCase("ReduceScatter", [_x(2, 3)], {"op": "max"}, lambda x: x),
    OpCase("Broadcast", [_x(2, 3), _x(3, dtype=np.int32)], {"root_rank": 0}, lambda x, y: (x, y)),
    OpCase("Barrier", [np.zeros(1, np.int32)], {}, lambda t: t),
]


def _conv_loops(x, w, stride=(1, 1), dilation=(1, 1), pad=(0, 0, 0, 0), group=1):
    """Conv2D as the loops of its definition, in float64 (the independent expression of ir/ops/conv.py)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    t, b, l, r = pad
    xp = np.zeros((n, c, h + t + b, wd + l + r))
    xp[:, :, t:t + h, l:l + wd] = x
    oh = (h + t + b - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (wd + l + r - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // group
    for oc in range(o):
        cs = slice(oc // og * cg, oc // og * cg + cg)
        for y in range(oh):
            for xx in range(ow):
                for i in range(kh):
                    for j in range(kw):
                        out[:, oc, y, xx] += (xp[:, cs, y * stride[0] + i * dilation[0], xx * stride[1] + j * dilation[1]]
                                              * w[oc, :, i, j]).sum(axis=1)
    return out


def _pool_loops(x, k, s, pad, reduce):
    n, c, h, wd = x.shape
    t, b, l, r = pad
    oh, ow = (h + t + b - k[0]) // s[0] + 1, (wd + l + r - k[1]) // s[1] + 1
    out = np.zeros((n, c, oh, ow), x.dtype)
    for y in range(oh):
        for xx in range(ow):
            y0, x0 = y * s[0] - t, xx * s[1] - l
            out[:, :, y, xx] = reduce(x[:, :, max(y0, 0):y0 + k[0], max(x0, 0):x0 + k[1]], axis=(2, 3))
    return out


_rng2 = np.random.default_rng(3)
_X = _rng2.standard_normal((2, 4, 7, 6)).astype(F)
_K3 = _rng2.standard_normal((6, 4, 3, 3)).astype(F)
_KG = _rng2.standard_normal((6, 2, 2, 3)).astype(F)
_KD = _rng2.standard_normal((4, 1, 3, 3)).astype(F)
_conv = dict(out_channel=6, kernel_size=3)
CASES += [
    OpCase("Conv2D", [_X, _K3], _conv, lambda x, w: _conv_loops(x, w), bitwise=False),
    OpCase("Conv2D", [_X, _K3], dict(_conv, pad_mode="same", stride=2),
           lambda x, w: _conv_loops(x, w, (2, 2), pad=(1, 1, 0, 1)), bitwise=False),
    OpCase("Conv2D", [_X, _KG], dict(out_channel=6, kernel_size=(2, 3), pad_mode="same", group=2),   # even kernel
           lambda x, w: _conv_loops(x, w, pad=(0, 1, 1, 1), group=2), bitwise=False),
    OpCase("Conv2D", [_X, _K3], dict(_conv, pad_mode="pad", pad=(2, 0, 1, 3), dilation=2, stride=(1, 3)),
           lambda x, w: _conv_loops(x, w, (1, 3), (2, 2), (2, 0, 1, 3)), bitwise=False),
    OpCase("Conv2D", [_X, _KD], dict(out_channel=4, kernel_size=3, pad_mode="same", group=4),       # depthwise
           lambda x, w: _conv_loops(x, w, pad=(1, 1, 1, 1), group=4), bitwise=False),
    OpCase("Conv2D", [_X.astype(np.float16), _K3.astype(np.float16)], dict(_conv, stride=4),        # stride > kernel
           lambda x, w: _conv_loops(x.astype(F), w.astype(F), (4, 4)), bitwise=False),
    OpCase("Conv2DBackpropInput", [_conv_loops(_X, _K3, (2, 2), pad=(1, 1, 0, 1)).astype(F), _K3],
           dict(_conv, pad_mode="same", stride=2, input_size=(2, 4, 7, 6)),
           lambda d, w: _conv_input_grad_loops(d, w, (2, 4, 7, 6), (2, 2), (1, 1, 0, 1)), bitwise=False),
    OpCase("Conv2DBackpropFilter", [_conv_loops(_X, _KG, pad=(0, 1, 1, 1), group=2).astype(F), _X],
           dict(out_channel=6, kernel_size=(2, 3), pad_mode="same", group=2, filter_size=(6, 2, 2, 3)),
           lambda d, x: _conv_filter_grad_loops(d, x, (6, 2, 2, 3), pad=(0, 1, 1, 1), group=2), bitwise=False),
    OpCase("MaxPool", [_X], dict(kernel_size=3, strides=2, pad_mode="same"),
           lambda x: _pool_loops(x, (3, 3), (2, 2), (1, 1, 0, 1), np.max)),
    OpCase("MaxPool", [_X.astype(np.float16)], dict(kernel_size=(1, 2), strides=(3, 2)),
           lambda x: _pool_loops(x, (1, 2), (3, 2), (0, 0, 0, 0), np.max)),
    OpCase("AvgPool", [_X], dict(kernel_size=3, strides=2, pad_mode="same"),
           lambda x: _pool_loops(x, (3, 3), (2, 2), (1, 1, 0, 1), np.mean), bitwise=False),
    OpCase("AvgPool", [_X], dict(kernel_size=2, strides=3, pad_mode="valid"),
           lambda x: _pool_loops(x, (2, 2), (3, 3), (0, 0, 0, 0), np.mean), bitwise=False),
    OpCase("MaxPoolGrad", [_X, _pool_loops(_X, (2, 2), (2, 2), (0, 1, 0, 0), np.max), np.ones((2, 4, 4, 3), F)],
           dict(kernel_size=2, strides=2, pad_mode="same"),
           lambda x, y, d: (x == np.repeat(np.repeat(y, 2, 2), 2, 3)[:, :, :7]).astype(F)),
    OpCase("AvgPoolGrad", [_X, _pool_loops(_X, (2, 2), (2, 2), (0, 1, 0, 0), np.mean), np.ones((2, 4, 4, 3), F)],
           dict(kernel_size=2, strides=2, pad_mode="same"),
           lambda x, y, d: np.concatenate([np.full((2, 4, 6, 6), 0.25, F), np.full((2, 4, 1, 6), 0.5, F)], 2)),
    OpCase("Pad", [_X[:1, :2]], dict(paddings=((0, 0), (1, 0), (2, 1), (0, 3))),
           lambda x: np.pad(x, ((0, 0), (1, 0), (2, 1), (0, 3)))),
    OpCase("Pad", [_x(2, 3, dtype=np.int32)], dict(paddings=((1, 1), (0, 0))), lambda x: np.pad(x, ((1, 1), (0, 0)))),
]


def _conv_input_grad_loops(d, w, size, stride, pad, group=1, dilation=(1, 1)):
    """Conv2D's input gradient by its definition: each output pixel's dout times the weight, added where
    that pixel read its input (float64 loops)."""
    n, c, h, wd = size
    o, cg, kh, kw = w.shape
    t, b, l, r = pad
    grad = np.zeros((n, c, h + t + b, wd + l + r))
    og = o // group
    for oc in range(o):
        cs = slice(oc // og * cg, oc // og * cg + cg)
        for y in range(d.shape[2]):
            for xx in range(d.shape[3]):
                for i in range(kh):
                    for j in range(kw):
                        grad[:, cs, y * stride[0] + i * dilation[0], xx * stride[1] + j * dilation[1]] += \
                            d[:, oc, y, xx, None] * w[oc, :, i, j]
    return grad[:, :, t:t + h, l:l + wd]


def _conv_filter_grad_loops(d, x, size, stride=(1, 1), pad=(0, 0, 0, 0), group=1, dilation=(1, 1)):
    """Conv2D's weight gradient by its definition: each tap the sum of dout times the input it read."""
    o, cg, kh, kw = size
    t, b, l, r = pad
    xp = np.zeros((x.shape[0], x.shape[1], x.shape[2] + t + b, x.shape[3] + l + r))
    xp[:, :, t:t + x.shape[2], l:l + x.shape[3]] = x
    grad = np.zeros(size)
    og = o // group
    for oc in range(o):
        cs = slice(oc // og * cg, oc // og * cg + cg)
        for y in range(d.shape[2]):
            for xx in range(d.shape[3]):
                for i in range(kh):
                    for j in range(kw):
                        grad[oc, :, i, j] += (d[:, oc, y, xx, None]
                                              * xp[:, cs, y * stride[0] + i * dilation[0],
                                                   xx * stride[1] + j * dilation[1]]).sum(axis=0)
    return grad


_I = np.ones((1, 2, 5, 5), F)
_WC = np.ones((3, 2, 3, 3), F)
BAD = [
    BadCase("StridedSlice", [_x(2, 3)], _ss((0,), (1,), (1,), begin_mask=-1), r"begin_mask=-1: must be >= 0"),
    BadCase("StridedSlice", [_x(2, 3)], _ss((0,), (1,), (1,), shrink_axis_mask=-4),
            r"shrink_axis_mask=-4: must be >= 0"),
    BadCase("StridedSlice", [_x(2, 3)], _ss((0, 0), (1, 1), (1, 1), ellipsis_mask=3),
            r"ellipsis_mask=3 marks 2 entries as `...`"),
    BadCase("StridedSlice", [_x(2, 3)], _ss((0, 5), (1, 6), (1, 1), shrink_axis_mask=2),
            r"begin\[1\]=5 of axis 1 \(size 3\)"),
    BadCase("StridedSlice", [_x(2, 3)], _ss((0, 0, 0), (1, 1, 1), (1, 1, 1)), r"slices 3 axes, x \(2, 3\) has 2"),
    BadCase("StridedSlice", [_x(2, 3)], _ss((0,), (1,), (0,)), r"stride 0"),
    BadCase("StridedSlice", [_x(2, 3)], _ss((0, 0), (1,), (1,)), r"must have one length"),
]

BAD += [
    BadCase("Squeeze", [_x(2, 1)], {"axis": 2}, r"axis 2 out of range for \(2, 1\)"),
    BadCase("ExpandDims", [_x(2, 1)], {"axis": 3}, r"axis 3 out of range for \(2, 1\) \(valid: -3..2\)"),
    BadCase("Tile", [_x(2, 1)], {"multiples": (1, -1)}, r"multiples \(1, -1\) has a negative entry"),
    BadCase("OneHot", [np.array([0], np.int32), np.array(1, F), np.array(0, F)], {"depth": -1},
            r"depth -1 must be >= 0"),
    BadCase("OneHot", [np.array([0], np.int32), np.array(1, F), np.array(0, F)], {"depth": 2, "axis": 2},
            r"axis 2 out of range for indices \(1,\) \(valid: -1..1\)"),
    BadCase("OneHot", [np.array([0.0], F), np.array(1, F), np.array(0, F)], {"depth": 2},
            r"indices must be int32 or int64"),
    BadCase("OneHot", [np.array([0], np.int32), np.ones(2, F), np.array(0, F)], {"depth": 2},
            r"on_value \(2,\) and off_value \(\) must be scalars"),
    BadCase("Argmax", [_x(2, 3)], {"output_type": np.float32}, r"output_type=.*must be int32 or int64"),
    BadCase("AddN", [_x(2, 3), _x(3)], {}, r"inputs \(2, 3\), \(3,\) must have one shape"),
    BadCase("AdamWeightDecay", [_W, _M, _V, np.array(0.01, np.float16), *_HYPER[1:], _G], {},
            r"lr must be a float32 scalar"),
    BadCase("AdamWeightDecay", [_W, _M[:1], _V, *_HYPER, _G], {}, r"must have one shape"),
    BadCase("FloatStatus", [np.ones(3, np.int32)], {}, r"x must be float16 or float32"),
    BadCase("Gather", [_x(2, 3), np.zeros((3, 1), np.int32)], {"axis": 1, "batch_dims": 1},
            r"batch_dims=1: the leading batch_dims dims of params \(2, 3\) and indices \(3, 1\) must be equal"),
    BadCase("NPUGetFloatStatus", [np.zeros(4, F)], {}, r"the status must be an \(8,\) float32 tensor"),
    BadCase("NPUGetFloatStatusV2", [np.zeros(8, F)], {}, r"the status must be an \(8,\) int32 tensor"),
    BadCase("NPUGetFloatStatus", [np.zeros(8, F), np.ones(2, np.int32)], {}, r"a watched value must be a float"),
    BadCase("AllGather", [np.zeros((), F)], {}, r"x needs at least one dimension"),
    BadCase("ReduceScatter", [np.zeros((3, 2), F)], {"rank_size": 2}, r"must be a multiple of the group's size"),
    BadCase("AllReduce", [np.zeros(2, F)], {"op": "mean"}, r"op='mean'.*expected one of sum, max, min, prod"),
    BadCase("AllReduce", [np.zeros(2, BF16)], {}, r"a collective carries float16/32/64 or integers, not bfloat16"),
    BadCase("AllReduce", [np.zeros(2, bool)], {}, r"reduces numbers"),
    BadCase("ScatterAdd", [np.zeros((4, 2), F), np.array([0, 1], np.int32), np.zeros((2, 3), F)], {},
            r"updates \(2, 3\) must have shape indices.shape \+ input_x.shape\[1:\] = \(2, 2\)"),
]

_C = dict(out_channel=3, kernel_size=3)
BAD += [
    BadCase("Conv2D", [_I, _WC], dict(_C, stride=0), r"stride=0: every entry of stride must be >= 1"),
    BadCase("Conv2D", [_I, _WC], dict(_C, dilation=(1, 2, 3)), r"dilation=\(1, 2, 3\): dilation must be an int or a tuple"),
    BadCase("Conv2D", [_I, _WC], dict(_C, pad_mode="pad", pad=-1), r"pad=-1: every entry must be >= 0"),
    BadCase("Conv2D", [_I, _WC], dict(_C, pad=(1, 2)), r"pad=\(1, 2\): must be an int or a tuple of 4 ints"),
    BadCase("Conv2D", [_I, _WC], dict(_C, pad_mode="same", pad=1), r"pad must be 0 when pad_mode is not 'pad'"),
    BadCase("Conv2D", [_I, _WC], dict(_C, pad_mode="full"), r"pad_mode='full': must be one of 'valid', 'same', 'pad'"),
    BadCase("Conv2D", [_I, _WC], dict(_C, group=0), r"group=0: must be >= 1"),
    BadCase("Conv2D", [_I, _WC], dict(_C, group=2), r"group=2: x's 2 channels and out_channel=3 must divide"),
    BadCase("Conv2D", [_I, _WC], dict(_C, mode=2), r"mode=2: must be 1"),
    BadCase("Conv2D", [_I, _WC], dict(_C, data_format="NHWC"), r"data_format='NHWC': only 'NCHW' is supported"),
    BadCase("Conv2D", [_I, _WC], dict(out_channel=4, kernel_size=3), r"weight \(3, 2, 3, 3\) has 3 output channels, "
                                                                    r"out_channel=4"),
    BadCase("Conv2D", [_I, _WC], dict(out_channel=3, kernel_size=(3, 2)), r"has a 3x3 kernel, kernel_size=\(3, 2\)"),
    BadCase("Conv2D", [_I, _WC], dict(_C, dilation=3), r"smaller than the dilated kernel \(7, 7\)"),
    BadCase("Conv2D", [_I, _WC.astype(np.float16)], _C, r"different dtypes"),
    BadCase("Conv2DBackpropInput", [np.ones((1, 3, 2, 2), F), _WC], dict(_C, input_size=(1, 2, 5, 5)),
            r"dout \(1, 3, 2, 2\) must be Conv2D's output \(1, 3, 3, 3\)"),
    BadCase("Conv2DBackpropFilter", [np.ones((1, 3, 3, 3), F), _I], dict(_C, filter_size=(3, 2, 3)),
            r"filter_size=\(3, 2, 3\): filter_size must be 4 sizes"),
    BadCase("MaxPool", [_I], dict(kernel_size=0), r"kernel_size=0: every entry of kernel_size must be >= 1"),
    BadCase("MaxPool", [_I], dict(kernel_size=2, pad_mode="pad"), r"pad_mode='pad': must be 'valid' or 'same'"),
    BadCase("AvgPool", [_I], dict(kernel_size=6), r"x \(1, 2, 5, 5\) is smaller than the \(6, 6\) window"),
    BadCase("AvgPool", [_I[0]], dict(kernel_size=2), r"x \(2, 5, 5\) must have rank 4"),
    BadCase("MaxPoolGrad", [_I, _I, _I], dict(kernel_size=2), r"out \(1, 2, 5, 5\) must be the pooled shape "
                                                               r"\(1, 2, 4, 4\)"),
    BadCase("Pad", [_I], dict(paddings=((0, 0), (1, 1))), r"paddings has 2 pairs, x \(1, 2, 5, 5\) has 4 axes"),
    BadCase("Pad", [_I], dict(paddings=((0, 0), (0, 0), (0, -1), (0, 0))), r"paddings=.*every entry must be a "
                                                                            r"\(before, after\) pair of ints >= 0"),
    BadCase("AdaptiveAvgPool2D", [_I], dict(output_size=(2, 0)), r"output_size=\(2, 0\): every size must be >= 1"),
]

# rows without a case above, and where they are tested
TESTED_ELSEWHERE = {
    "Const": "no inputs: every graph with a constant",
    "SizeValue": "no inputs, a symbolic size: tests/test_dynamic_shapes.py, tests/test_symbolic_ir.py",
    "SizeRange": "no inputs, a symbolic bound: tests/test_dynamic_shapes.py (F.make_range), tests/test_symbolic_ir.py",
    "Reshape": "tests/test_simplify.py, tests/test_kernels_executor.py (a view)",
    "Transpose": "tests/test_kernels_executor.py, tests/test_gradients.py",
    "BroadcastTo": "tests/test_sweep.py (every broadcast pattern)",
    "Cast": "tests/test_kernels_elementwise.py, tests/test_precision.py",
    "Slice": "tests/test_gradients.py, tests/test_onnx_node_conformance.py",
    "Concat": "tests/test_gradients.py, tests/test_onnx_node_conformance.py",
    "Split": "tests/test_gradients.py, tests/test_onnx_node_conformance.py",
    "UnsortedSegmentSum": "tests/test_grad_ops.py test_unsorted_segment_sum_on_the_device",
    "MatMul": "tests/test_kernels_executor.py, tests/test_gradients.py",
    "BatchMatMul": "tests/test_kernels_executor.py, tests/test_gradients.py",
    "ReduceSum": "tests/test_kernels_reduce.py, tests/test_sweep.py",
    "ReduceMax": "tests/test_kernels_reduce.py, tests/test_sweep.py",
    "ReduceMin": "tests/test_kernels_reduce.py, tests/test_sweep.py",
    "Select": "tests/test_kernels_elementwise.py, tests/test_gradients.py",
    "Assign": "tests/test_train_step.py, tests/test_assign_hunt.py",
    "Dropout": "tests/test_dropout.py",
    "Gradient": "tests/test_gradients.py",
    "StopGradient": "tests/test_gradients.py",
    "Bprop": "tests/test_grad_api.py",
    "If": "tests/test_control_flow.py",
    "PyFunc": "tests/test_mixed_compute.py",
    "HostCall": "tests/test_mixed_compute.py",
    "CopyToHost": "tests/test_mixed_compute.py",
    "CopyToDevice": "tests/test_mixed_compute.py",
    "AllReduceStart": "tests/test_dist_reducer.py (one process), tests/test_dist_training.py (two ranks)",
    "AllReduceWait": "tests/test_dist_reducer.py (one process), tests/test_dist_training.py (two ranks)",
}
