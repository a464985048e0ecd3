"""Layers over images (NCHW) with MindSpore 2.x's names, arguments and defaults, written with the op table's
primitives (ir/ops/conv.py, ir/ops/pool.py), so they trace, fuse and differentiate like any construct.

    Conv2d(in_channels, out_channels, kernel_size, stride=1, pad_mode='same', padding=0, dilation=1, group=1,
           has_bias=False, weight_init=None, bias_init=None, data_format='NCHW', dtype=float32)
        P.Conv2D, then a BiasAdd when has_bias. weight [out, in / group, kh, kw]; padding an int, (h, w) or
        (top, bottom, left, right), only with pad_mode 'pad'. Default init as MindSpore 2.x: weight
        HeUniform(sqrt(5)), bias Uniform(1 / sqrt(fan_in)).
    MaxPool2d(kernel_size=1, stride=1, pad_mode='valid', data_format='NCHW')        P.MaxPool
    AvgPool2d(kernel_size=1, stride=1, pad_mode='valid', data_format='NCHW')        P.AvgPool
    AdaptiveAvgPool2d(output_size)                                                  P.AdaptiveAvgPool2D
    Flatten(start_dim=1, end_dim=-1)        the axes start_dim..end_dim merged into one
    Pad(paddings, mode='CONSTANT')          zeros around x, one (before, after) pair per axis

A MindSpore argument these layers do not implement (pooling's padding, dilation, ceil_mode, return_indices;
Pad's REFLECT and SYMMETRIC modes) is refused with a LayerError naming it, unless it has its default.
"""
from __future__ import annotations

import math

from graphkernel.common.initializer import HeUniform, Uniform, initializer
from graphkernel.cell import Cell
from graphkernel.nn.layers import LayerError, _positive
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter


def _pair(cls: str, name: str, v) -> tuple[int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(d, int) for d in v):
        return tuple(v)
    raise LayerError(f"{cls}: {name} must be an int or a pair of ints, got {v!r}")


def _padding(v) -> tuple[int, int, int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * 4
    if isinstance(v, (tuple, list)) and len(v) in (2, 4):
        v = tuple(v)
        return (v[0], v[0], v[1], v[1]) if len(v) == 2 else v
    raise LayerError(f"Conv2d: padding must be an int or a tuple of 2 or 4 ints, got {v!r}")


def _unsupported(cls: str, **given) -> None:
    """Refuse MindSpore arguments this layer does not implement: each name -> (value, default)."""
    for name, (value, default) in given.items():
        if value != default:
            raise LayerError(f"{cls}: {name}={value!r} is not supported (only {default!r})")


class Conv2d(Cell):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0, dilation=1,
                 group=1, has_bias=False, weight_init=None, bias_init=None, data_format="NCHW", dtype=None):
        super().__init__()
        _positive("Conv2d", in_channels=in_channels, out_channels=out_channels, group=group)
        if in_channels % group or out_channels % group:
            raise LayerError(f"Conv2d: in_channels={in_channels} and out_channels={out_channels} must divide by "
                             f"group={group}")
        if not isinstance(pad_mode, str) or pad_mode.lower() not in ("same", "valid", "pad"):
            raise LayerError(f"Conv2d: pad_mode must be 'same', 'valid' or 'pad', got {pad_mode!r}")
        self.in_channels, self.out_channels, self.group, self.has_bias = in_channels, out_channels, group, has_bias
        self.kernel_size = _pair("Conv2d", "kernel_size", kernel_size)
        self.stride, self.dilation = _pair("Conv2d", "stride", stride), _pair("Conv2d", "dilation", dilation)
        self.pad_mode, self.padding, self.data_format = pad_mode, _padding(padding), data_format
        shape = (out_channels, in_channels // group) + self.kernel_size
        weight_init = HeUniform(negative_slope=math.sqrt(5)) if weight_init is None else weight_init
        self.weight = Parameter(initializer(weight_init, shape, dtype or "float32"), name="weight")
        if has_bias:
            fan_in = shape[1] * shape[2] * shape[3]
            bias_init = Uniform(1 / math.sqrt(fan_in)) if bias_init is None else bias_init
            self.bias = Parameter(initializer(bias_init, (out_channels,), dtype or "float32"), name="bias")
        self.conv2d = P.Conv2D(out_channel=out_channels, kernel_size=self.kernel_size, mode=1, pad_mode=pad_mode,
                               pad=self.padding, stride=self.stride, dilation=self.dilation, group=group,
                               data_format=data_format)
        self.bias_add = P.BiasAdd(data_format=data_format)

    def construct(self, x):
        if len(x.shape) != 4 or x.shape[1] != self.in_channels:
            raise LayerError(f"Conv2d({self.in_channels}, {self.out_channels}): x {list(x.shape)} must be "
                             f"[N, {self.in_channels}, H, W]")
        y = self.conv2d(x, self.weight)
        return self.bias_add(y, self.bias) if self.has_bias else y


class _Pool2d(Cell):
    primitive = None

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", data_format="NCHW", **others):
        super().__init__()
        cls = type(self).__name__
        _unsupported(cls, **others)
        if not isinstance(pad_mode, str) or pad_mode.lower() not in ("same", "valid"):
            raise LayerError(f"{cls}: pad_mode must be 'same' or 'valid', got {pad_mode!r}")
        self.kernel_size, self.stride = _pair(cls, "kernel_size", kernel_size), _pair(cls, "stride", stride)
        self.pad_mode = pad_mode
        self.pool = self.primitive(kernel_size=self.kernel_size, strides=self.stride, pad_mode=pad_mode,
                                   data_format=data_format)

    def construct(self, x):
        if len(x.shape) != 4:
            raise LayerError(f"{type(self).__name__}: x must be [N, C, H, W], got {list(x.shape)}")
        return self.pool(x)


class MaxPool2d(_Pool2d):
    primitive = P.MaxPool

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, dilation=1, return_indices=False,
                 ceil_mode=False, data_format="NCHW"):
        super().__init__(kernel_size, stride, pad_mode, data_format, padding=(padding, 0), dilation=(dilation, 1),
                         return_indices=(return_indices, False), ceil_mode=(ceil_mode, False))


class AvgPool2d(_Pool2d):
    primitive = P.AvgPool

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None, data_format="NCHW"):
        super().__init__(kernel_size, stride, pad_mode, data_format, padding=(padding, 0),
                         ceil_mode=(ceil_mode, False), divisor_override=(divisor_override, None))
        self.count_include_pad = count_include_pad   # no padding is counted: MindSpore's 'same' mode neither


class AdaptiveAvgPool2d(Cell):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size
        self.pool = P.AdaptiveAvgPool2D(output_size=output_size)

    def construct(self, x):
        return self.pool(x)


class Flatten(Cell):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def construct(self, x):
        rank = len(x.shape)
        start, end = self.start_dim % max(rank, 1), self.end_dim % max(rank, 1)
        if start > end:
            raise LayerError(f"Flatten: start_dim={self.start_dim} comes after end_dim={self.end_dim} for "
                             f"x {list(x.shape)}")
        if (start, end) == (1, rank - 1) and rank >= 2:
            return P.Flatten()(x)
        shape = tuple(x.shape)
        return P.Reshape()(x, shape[:start] + (math.prod(shape[start:end + 1]),) + shape[end + 1:])


class Pad(Cell):
    def __init__(self, paddings, mode="CONSTANT"):
        super().__init__()
        _unsupported("Pad", mode=(mode.upper() if isinstance(mode, str) else mode, "CONSTANT"))
        self.paddings, self.mode = paddings, mode
        self.pad = P.Pad(paddings=tuple(tuple(p) for p in paddings))

    def construct(self, x):
        return self.pad(x)
