"""2-D convolution as MindSpore 2.10 has it (NCHW), and its two gradients, opaque ops (a kernel family of
their own in kernels/conv.py, never fused into a composite).

    Conv2D(x, weight) {out_channel, kernel_size, mode=1, pad_mode="valid", pad=0, stride=1, dilation=1,
                       group=1, data_format="NCHW"}
        x [N, C, H, W], weight [out_channel, C / group, kh, kw] -> [N, out_channel, oh, ow]
        out[n, o, y, x] = sum over c in o's group, i, j of
                          weight[o, c, i, j] * xpad[n, c, y * sh + i * dh, x * sw + j * dw]
    Conv2DBackpropInput(dout, weight, input_size) {the same attributes, pad_list=None}
        the gradient of Conv2D's x: a [N, C, H, W] = input_size result
    Conv2DBackpropFilter(dout, x, filter_size) {the same attributes, pad_list=(0, 0, 0, 0)}
        the gradient of Conv2D's weight: a filter_size result (MindSpore's _grad_ops input order)

Attributes, checked as MindSpore checks them (an error names the attribute): kernel_size an int or
(kh, kw); stride and dilation an int, (h, w) or (1, 1, h, w), every entry positive; pad_mode "valid"
(no padding), "same" (output ceil(H / sh); the padding (oh - 1) sh + (kh - 1) dh + 1 - H, when positive,
split with the odd pixel at the bottom and right) or "pad" (pad: an int or (top, bottom, left, right),
each >= 0; pad must be 0 in the other modes); group >= 1 divides C and out_channel (group = C = out_channel
is a depthwise convolution); mode 1; data_format "NCHW" only. A pad_list given to a gradient op is the
forward's padding as MindSpore passes it; the padding is always computed from the attributes as above.

float16 operands multiply as MatMul's do: widened to float32, accumulated in float32, rounded once.
"""
from __future__ import annotations

import numpy as np

from ir.errors import ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_int, is_int_tuple, require, same_dtype
from ir.ops.registry import Api, Attr, OpDef, Pattern, Precision, register


# --- attribute checks ---------------------------------------------------------------------------

def pair(name: str, *, lengths=(1, 2), low: int = 1):
    """An int or a tuple of `lengths` ints (4: (1, 1, h, w)), each >= low -> (h, w)."""
    def check(v):
        t = is_int_tuple(v)
        if len(t) not in lengths:
            raise ValueError(f"{name} must be an int or a tuple of {' or '.join(map(str, lengths[1:]))} ints, "
                             f"got {v!r}")
        if any(d < low for d in t):
            raise ValueError(f"every entry of {name} must be >= {low}, got {v!r}")
        return t * 2 if len(t) == 1 else t[-2:]
    return check


def pad_mode(v) -> str:
    if not isinstance(v, str) or v.lower() not in ("valid", "same", "pad"):
        raise ValueError("must be one of 'valid', 'same', 'pad' (any case)")
    return v.lower()


def pool_pad_mode(v) -> str:
    if not isinstance(v, str) or v.lower() not in ("valid", "same"):
        raise ValueError("must be 'valid' or 'same' (any case)")
    return v.lower()


def _pad(v):
    t = is_int_tuple(v)
    if len(t) not in (1, 4):
        raise ValueError(f"must be an int or a tuple of 4 ints (top, bottom, left, right), got {v!r}")
    if any(d < 0 for d in t):
        raise ValueError(f"every entry must be >= 0, got {v!r}")
    return t * 4 if len(t) == 1 else t


def _pad_list(v):
    return None if v is None else _pad(v)


def _positive(v) -> int:
    v = is_int(v)
    if v < 1:
        raise ValueError(f"must be >= 1, got {v}")
    return v


def _mode(v) -> int:
    if is_int(v) != 1:
        raise ValueError(f"must be 1 (MindSpore's only convolution mode), got {v!r}")
    return 1


def nchw(v) -> str:
    if v != "NCHW":
        raise ValueError(f"only 'NCHW' is supported, got {v!r}")
    return v


def _shape4(name: str):
    def check(v):
        t = is_int_tuple(v)
        if len(t) != 4 or any(d < 0 for d in t):
            raise ValueError(f"{name} must be 4 sizes (N, C, H, W), got {v!r}")
        return t
    return check


CONV_ATTRS = (Attr("out_channel", check=_positive), Attr("kernel_size", check=pair("kernel_size")),
              Attr("mode", 1, _mode), Attr("pad_mode", "valid", pad_mode), Attr("pad", (0, 0, 0, 0), _pad),
              Attr("stride", (1, 1), pair("stride", lengths=(1, 2, 4))),
              Attr("dilation", (1, 1), pair("dilation", lengths=(1, 2, 4))), Attr("group", 1, _positive),
              Attr("data_format", "NCHW", nchw))


# --- geometry ---------------------------------------------------------------------------------------

def same_pads(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """MindSpore's "same" padding of one axis: (before, after), the odd pixel after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def pads(attrs: dict, h: int, w: int) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of a convolution or pooling window over an [.., h, w] input."""
    mode = attrs["pad_mode"]
    (kh, kw), (sh, sw) = attrs["kernel_size"], attrs["stride"]
    dh, dw = attrs.get("dilation", (1, 1))
    if mode == "same":
        return same_pads(h, kh, sh, dh) + same_pads(w, kw, sw, dw)
    if mode == "pad":
        return attrs["pad"]
    return (0, 0, 0, 0)


def out_size(size: int, before: int, after: int, kernel: int, stride: int, dilation: int = 1) -> int:
    return (size + before + after - (kernel - 1) * dilation - 1) // stride + 1


def out_hw(attrs: dict, h: int, w: int) -> tuple[int, int]:
    t, b, l, r = pads(attrs, h, w)
    (kh, kw), (sh, sw) = attrs["kernel_size"], attrs["stride"]
    dh, dw = attrs.get("dilation", (1, 1))
    return out_size(h, t, b, kh, sh, dh), out_size(w, l, r, kw, sw, dw)


def _check_padding(attrs: dict) -> None:
    if attrs["pad_mode"] != "pad" and any(attrs["pad"]):
        raise ShapeError(f"pad must be 0 when pad_mode is not 'pad', got pad={attrs['pad']} and "
                         f"pad_mode='{attrs['pad_mode']}'")


def conv_shapes(x: tuple, w: tuple, attrs: dict) -> tuple[int, int, int, int]:
    """Checks x [N, C, H, W] against weight [O, C/g, kh, kw] and the attributes; the output shape."""
    _check_padding(attrs)
    if len(x) != 4 or len(w) != 4:
        raise ShapeError(f"x {fmt(x)} and weight {fmt(w)} must both have rank 4 (NCHW; OIHW)")
    n, c, h, wd = x
    o, cg, kh, kw = w
    g = attrs["group"]
    if o != attrs["out_channel"]:
        raise ShapeError(f"weight {fmt(w)} has {o} output channels, out_channel={attrs['out_channel']}")
    if (kh, kw) != attrs["kernel_size"]:
        raise ShapeError(f"weight {fmt(w)} has a {kh}x{kw} kernel, kernel_size={attrs['kernel_size']}")
    if c % g or o % g or c // g != cg:
        raise ShapeError(f"group={g}: x's {c} channels and out_channel={o} must divide by group, and weight "
                         f"{fmt(w)} must have C / group = {c / g:g} input channels")
    oh, ow = out_hw(attrs, h, wd)
    if oh < 1 or ow < 1:
        t, b, l, r = pads(attrs, h, wd)
        raise ShapeError(f"x {fmt(x)} padded by (top, bottom, left, right) = {(t, b, l, r)} is smaller than "
                         f"the dilated kernel ({(kh - 1) * attrs['dilation'][0] + 1}, "
                         f"{(kw - 1) * attrs['dilation'][1] + 1}): no output")
    return n, o, oh, ow


# --- numpy references ---------------------------------------------------------------------------

def _wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype == np.float16 else a


def windows(xp: np.ndarray, oh: int, ow: int, kernel, stride, dilation) -> np.ndarray:
    """A read-only view [N, C, oh, ow, kh, kw] of padded xp: the window of each output pixel."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    s = xp.strides
    return np.lib.stride_tricks.as_strided(xp, (*xp.shape[:2], oh, ow, kh, kw),
                                           (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw),
                                           writeable=False)


def padded(x: np.ndarray, p: tuple, value=0) -> np.ndarray:
    t, b, l, r = p
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value) if any(p) else x


def conv2d(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """The forward convolution in x's dtype (float16: computed in float32, rounded once)."""
    n, o, oh, ow = conv_shapes(x.shape, w.shape, attrs)
    xw, ww = _wide(x), _wide(w)
    cols = windows(padded(xw, pads(attrs, *x.shape[2:])), oh, ow, attrs["kernel_size"], attrs["stride"],
                   attrs["dilation"])
    g = attrs["group"]
    cg, og = x.shape[1] // g, o // g
    out = np.empty((n, o, oh, ow), xw.dtype)
    for k in range(g):
        part = np.tensordot(cols[:, k * cg:(k + 1) * cg], ww[k * og:(k + 1) * og], axes=([1, 4, 5], [1, 2, 3]))
        out[:, k * og:(k + 1) * og] = part.transpose(0, 3, 1, 2)
    return out.astype(x.dtype)


def conv2d_input_grad(dout: np.ndarray, w: np.ndarray, input_size: tuple, attrs: dict) -> np.ndarray:
    """d loss / d x of Conv2D from d loss / d out: every output pixel's window receives its share."""
    n, c, h, wd = input_size
    t, b, l, r = pads(attrs, h, wd)
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel_size"], attrs["stride"], attrs["dilation"]
    d, ww = _wide(dout), _wide(w)
    oh, ow = d.shape[2:]
    g = attrs["group"]
    cg, og = c // g, w.shape[0] // g
    grad = np.zeros((n, c, h + t + b, wd + l + r), d.dtype)
    for k in range(g):
        dk, wk = d[:, k * og:(k + 1) * og], ww[k * og:(k + 1) * og]
        for i in range(kh):
            for j in range(kw):
                part = np.tensordot(dk, wk[:, :, i, j], axes=([1], [0])).transpose(0, 3, 1, 2)
                grad[:, k * cg:(k + 1) * cg, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                     j * dw:j * dw + (ow - 1) * sw + 1:sw] += part
    return grad[:, :, t:t + h, l:l + wd].astype(dout.dtype)


def conv2d_filter_grad(dout: np.ndarray, x: np.ndarray, filter_size: tuple, attrs: dict) -> np.ndarray:
    """d loss / d weight of Conv2D: each kernel tap the sum over pixels of dout times the input it read."""
    d, xw = _wide(dout), _wide(x)
    oh, ow = d.shape[2:]
    cols = windows(padded(xw, pads(attrs, *x.shape[2:])), oh, ow, attrs["kernel_size"], attrs["stride"],
                   attrs["dilation"])
    g = attrs["group"]
    o = filter_size[0]
    cg, og = x.shape[1] // g, o // g
    grad = np.empty(filter_size, d.dtype)
    for k in range(g):
        grad[k * og:(k + 1) * og] = np.tensordot(d[:, k * og:(k + 1) * og], cols[:, k * cg:(k + 1) * cg],
                                                 axes=([0, 2, 3], [0, 2, 3]))
    return grad.astype(dout.dtype)


# --- rows --------------------------------------------------------------------------------------------

def _conv_infer(types, attrs):
    x, w = types
    dtype = same_dtype(types)
    require(dtype, "float")
    return (TensorType(conv_shapes(x.shape, w.shape, attrs), dtype),)


def _forward_attrs(node) -> dict:
    return {a.name: node.attr(a.name) for a in CONV_ATTRS}


def _conv_grad(b, node, douts):
    x, w = node.inputs
    attrs = _forward_attrs(node)
    return (b.op("Conv2DBackpropInput", douts[0], w, input_size=x.shape, **attrs),
            b.op("Conv2DBackpropFilter", douts[0], x, filter_size=w.shape, **attrs))


def _input_grad_infer(types, attrs):
    d, w = types
    dtype = same_dtype(types)
    require(dtype, "float")
    size = attrs["input_size"]
    want = conv_shapes(size, w.shape, attrs)
    if d.shape != want:
        raise ShapeError(f"dout {fmt(d.shape)} must be Conv2D's output {fmt(want)} for input_size {fmt(size)} and "
                         f"weight {fmt(w.shape)}")
    return (TensorType(size, dtype),)


def _filter_grad_infer(types, attrs):
    d, x = types
    dtype = same_dtype(types)
    require(dtype, "float")
    size = attrs["filter_size"]
    want = conv_shapes(x.shape, size, attrs)
    if d.shape != want:
        raise ShapeError(f"dout {fmt(d.shape)} must be Conv2D's output {fmt(want)} for x {fmt(x.shape)} and "
                         f"filter_size {fmt(size)}")
    return (TensorType(size, dtype),)


def _input_grad_grad(b, node, douts):
    """Conv2DBackpropInput is Conv2D's transpose, linear in both operands: its cotangent g gives dout
    Conv2D(g, weight), and weight the filter gradient of dout against g."""
    d, w = node.inputs
    attrs = _forward_attrs(node)
    return (b.op("Conv2D", douts[0], w, **attrs),
            b.op("Conv2DBackpropFilter", d, douts[0], filter_size=w.shape, **attrs))


def _filter_grad_grad(b, node, douts):
    """<G, filter_grad(dout, x)> = <Conv2D(x, G), dout>: dout gets Conv2D(x, G), x the input gradient."""
    d, x = node.inputs
    attrs = _forward_attrs(node)
    return (b.op("Conv2D", x, douts[0], **attrs),
            b.op("Conv2DBackpropInput", d, douts[0], input_size=x.shape, **attrs))


_WHITE = Precision("white", False, "the emulated Cube unit multiplies float16 (as MatMul); float32 accumulation")
register(OpDef("Conv2D", Pattern.OPAQUE, 2, _conv_infer, lambda a, attrs: conv2d(a[0], a[1], attrs), CONV_ATTRS,
               grad=_conv_grad, precision=_WHITE, api=Api(inputs=("x", "weight")),
               doc="2-D convolution, NCHW, weight [out_channel, C / group, kh, kw]"))
register(OpDef("Conv2DBackpropInput", Pattern.OPAQUE, 2, _input_grad_infer,
               lambda a, attrs: conv2d_input_grad(a[0], a[1], attrs["input_size"], attrs),
               CONV_ATTRS + (Attr("pad_list", None, _pad_list), Attr("input_size", check=_shape4("input_size"))),
               grad=_input_grad_grad, precision=_WHITE, cann=("Conv2DBackpropInputD",),
               api=Api(inputs=("dout", "weight"), call_attrs=("input_size",)),
               doc="Conv2D's gradient with respect to x, of shape input_size"))
register(OpDef("Conv2DBackpropFilter", Pattern.OPAQUE, 2, _filter_grad_infer,
               lambda a, attrs: conv2d_filter_grad(a[0], a[1], attrs["filter_size"], attrs),
               CONV_ATTRS + (Attr("pad_list", (0, 0, 0, 0), _pad_list),
                             Attr("filter_size", check=_shape4("filter_size"))),
               grad=_filter_grad_grad, precision=_WHITE, cann=("Conv2DBackpropFilterD",),
               api=Api(primitive=False, inputs=("dout", "x"), call_attrs=("filter_size",)),
               doc="Conv2D's gradient with respect to weight, of shape filter_size"))

__all__ = ["conv2d", "conv2d_filter_grad", "conv2d_input_grad", "out_hw", "padded", "pads", "same_pads",
           "windows"]
