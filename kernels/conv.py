"""Convolution kernels: Conv2D and its two gradients as im2col + one GEMM through numpy's BLAS.

    columns   cols [K = C/g * kh * kw, N * oh * ow]: row (c, i, j) holds, for every output pixel, the input
              pixel tap (i, j) of channel c reads (zero in the padding); built by kh * kw strided copies
    forward   out^T [O, N * P] = W [O, K] @ cols            one GEMM per group, then [O, N, P] -> [N, O, P]
    dx        dcols [K, N * P] = W^T @ dout^T                then col2im: kh * kw strided adds into the
                                                             padded input, the padding cut off; or, at
                                                             stride 1 (`flipped`), a forward over dout
    dw        dW [O, K] = dout^T [O, N * P] @ cols^T         one GEMM per group (BLAS reads cols^T in place)

A 1x1 convolution with stride 1 and no padding needs no columns: the input is already [N, C, H * W], and
the forward and dx are batched products with the weight (N GEMMs of [O, C] x [C, HW]), dw one GEMM after
moving dout and x to [C, N * HW].

Why this and not a direct loop: a direct loop nest in numba over (o, c, i, j, y, x) at ResNet's shapes ran
many times slower than BLAS's blocked GEMM on the same product (see docs/kernels.md); the columns cost
kh * kw copies of the input, memory-bound work BLAS then amortises over O output channels.

float16 operands are widened to float32, computed in float32 and rounded once (MatMul's semantics). Each
kernel writes its flat output buffer, as every numpy step of kernels/lower.py does. Its working arrays
(the padded input, the columns, the GEMM result, the padded input gradient) are `scratch`: one buffer
per role and thread, reused by every convolution step after it, rather than fresh arrays of megabytes
on every call; a GEMM whose result is already the output's layout and dtype writes the output itself.

A forward is a `Forward`: its products (the GEMM result, [O, N * P], or [N, O, P] from the pointwise path),
then its output pass: the NCHW store, or the launch of an epilogue (`conv_epilogue`: a generated elementwise
kernel reading the GEMM result in its own axis order; graphkernel/passes/conv_epilogue.py makes them).
"""
from __future__ import annotations

import math
import threading

import numpy as np

from ir.graph import Graph, Node, input_node
from ir.ops.conv import out_hw, pads
from kernels.matmul import matmul_into
from kernels.pool import POOL_OPS, pool_kernel

CONV_OPS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")
NCHW = (0, 1, 2, 3)
FLIP_PIXELS_PER_CHANNEL = 4   # `flipped`: dx as a forward when N * P >= this many times O

_scratch = threading.local()


def scratch(role: str, shape: tuple, dtype) -> np.ndarray:
    """An uninitialized array of `shape` for `role` on this thread, in a buffer that every convolution
    step after this one reuses for the same role (grown when a step needs more). A step's scratch is
    dead when the step returns, and steps run one at a time on a thread (the executor's buffers are per
    thread too)."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    buffer = getattr(_scratch, role, None)
    if buffer is None or buffer.nbytes < nbytes:
        buffer = np.empty(max(nbytes, 64), np.uint8)
        setattr(_scratch, role, buffer)
    return buffer[:nbytes].view(dtype).reshape(shape)


class Geometry:
    """What a convolution kernel needs to know of its node, computed once when it is lowered."""

    def __init__(self, x_shape: tuple, w_shape: tuple, attrs: dict):
        self.n, self.c, self.h, self.w = x_shape
        self.o, self.cg, self.kh, self.kw = w_shape
        self.g = attrs["group"]
        self.og = self.o // self.g
        self.sh, self.sw = attrs["stride"]
        self.dh, self.dw = attrs["dilation"]
        self.pads = pads(attrs, self.h, self.w)
        self.oh, self.ow = out_hw(attrs, self.h, self.w)
        self.p = self.oh * self.ow
        self.k = self.cg * self.kh * self.kw
        self.pointwise = (self.kh, self.kw, self.sh, self.sw) == (1, 1, 1, 1) and not any(self.pads)
        # the forward's GEMM result: [N, O, P] from the pointwise products, else [O, N * P] (one GEMM
        # per group over every image), the axes of NCHW in that order
        self.result_order = NCHW if (self.pointwise and self.g == 1) or self.n == 1 else (1, 0, 2, 3)

    @property
    def padded_hw(self) -> tuple[int, int]:
        t, b, l, r = self.pads
        return self.h + t + b, self.w + l + r

    def tap(self, a: np.ndarray, i: int, j: int) -> np.ndarray:
        """The view [.., oh, ow] of padded a that kernel tap (i, j) reads for every output pixel."""
        y0, x0 = i * self.dh, j * self.dw
        return a[..., y0:y0 + (self.oh - 1) * self.sh + 1:self.sh, x0:x0 + (self.ow - 1) * self.sw + 1:self.sw]

    def padded(self, x: np.ndarray) -> np.ndarray:
        if not any(self.pads):
            return x
        t, b, l, r = self.pads
        hp, wp = self.padded_hw
        out = scratch("padded", (self.n, self.c, hp, wp), x.dtype)
        out[:, :, :t], out[:, :, t + self.h:] = 0, 0
        out[:, :, t:t + self.h, :l], out[:, :, t:t + self.h, l + self.w:] = 0, 0
        out[:, :, t:t + self.h, l:l + self.w] = x
        return out

    def columns(self, x: np.ndarray, group: int) -> np.ndarray:
        """cols [K, N * P] of one group's input channels."""
        xg = x[:, group * self.cg:(group + 1) * self.cg]
        cols = scratch("columns", (self.cg, self.kh, self.kw, self.n, self.oh, self.ow), x.dtype)
        xt = xg.transpose(1, 0, 2, 3)    # [C, N, Hp, Wp], a view
        for i in range(self.kh):
            for j in range(self.kw):
                cols[:, i, j] = self.tap(xt, i, j)
        return cols.reshape(self.k, self.n * self.p)


def _wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _store(out: np.ndarray, value: np.ndarray) -> None:
    np.copyto(out.reshape(value.shape), value, casting="unsafe")


def _products(geo: Geometry, x_shape, w_shape):
    """fn(x, w, into=None) -> the forward's GEMM result, float32 for half operands, in
    `geo.result_order`: in `into` when given (an array of the result's shape and dtype), else in scratch."""
    def products(x, w, into=None):
        x, w = _wide(x).reshape(x_shape), _wide(w).reshape(w_shape)
        w2 = w.reshape(geo.o, geo.k)
        if geo.pointwise and geo.g == 1:
            result = scratch("result", (geo.n, geo.o, geo.p), x.dtype) if into is None else into   # [N, O, P]
            matmul_into(w2, x.reshape(geo.n, geo.c, geo.p), result)
            return result
        xp = geo.padded(x)
        result = scratch("result", (geo.o, geo.n * geo.p), x.dtype) if into is None else into  # [O, N, P]
        for k in range(geo.g):
            rows = slice(k * geo.og, (k + 1) * geo.og)
            matmul_into(w2[rows], geo.columns(xp, k), result[rows])
        return result
    return products


class Forward:
    """A Conv2D step in its two phases: `products(x, w)`, the GEMM result (`_products`), then
    `output_pass(result, *arrays)`, which writes the step's outputs from it: the NCHW store, or an
    epilogue. Called as any step, fn(*inputs, *outputs); x and w are inputs `ix` and `iw`."""

    __name__ = "conv2d"

    def __init__(self, products, output_pass, ix: int = 0, iw: int = 1):
        self.products, self.output_pass, self.ix, self.iw = products, output_pass, ix, iw

    def __call__(self, *arrays):
        with np.errstate(over="ignore", invalid="ignore"):   # inf and NaN propagate, as in every kernel
            self.output_pass(self.products(arrays[self.ix], arrays[self.iw]), *arrays)


def _forward(geo: Geometry, x_shape, w_shape):
    """The step of a Conv2D alone: its GEMMs write the output itself when their result is in NCHW order
    and of the output's dtype, else the result is stored (transposed, rounded)."""
    products = _products(geo, x_shape, w_shape)
    shape = (geo.n, geo.o, geo.p) if geo.pointwise and geo.g == 1 else (geo.o, geo.n * geo.p)

    def conv2d(x, w, out):
        with np.errstate(over="ignore", invalid="ignore"):   # inf and NaN propagate, as in every kernel
            if geo.result_order == NCHW and out.dtype == (np.float32 if x.dtype == np.float16 else x.dtype):
                products(x, w, out.reshape(shape))
                return
            result = products(x, w)
            if geo.result_order != NCHW:
                result = result.reshape(geo.o, geo.n, geo.p).transpose(1, 0, 2)
            _store(out, result)
    return conv2d


def conv_epilogue(node: Node, conv: Node, inputs: tuple[int, int], reads: tuple[int, ...], launch, extra: tuple,
                  half: tuple[bool, ...]) -> Forward:
    """The step of a composite computing Conv2D `conv` and its epilogue (an elementwise kernel,
    graphkernel/passes/conv_epilogue.py): its output pass launches the epilogue with the GEMM result as
    input 0, read in `result_order` (kernels.layout's layouts), so the activation is written once, in
    NCHW, by the epilogue. `inputs`: the step's inputs that are the conv's x and w; `reads`: those the
    epilogue reads after the result; `half`: which of the launch's arrays are half floats (passed as
    their bits). A half conv result is rounded to its dtype first, as the conv alone stores it."""
    a, b = (v.shape for v in conv.inputs)
    n_in, y_dtype = len(node.inputs), conv.out.dtype.np

    def epilogue(result, *arrays):
        if result.dtype != y_dtype:
            result = result.astype(y_dtype)
        args = [result.reshape(-1)] + [arrays[i] for i in reads] + list(arrays[n_in:])
        launch(*(x.view(np.uint16) if h else x for x, h in zip(args, half)), *extra)
    return Forward(_products(Geometry(a, b, conv.attr_dict), a, b), epilogue, *inputs)


def _product_into(out: np.ndarray, x: np.ndarray, y: np.ndarray, shape: tuple) -> None:
    """out (flat, `shape` as a matrix or a batch of them) = x @ y: written in place when out has the
    product's dtype, else through scratch and one rounding."""
    if out.dtype == np.result_type(x, y):
        matmul_into(x, y, out.reshape(shape))
    else:
        result = scratch("result", shape, np.result_type(x, y))
        matmul_into(x, y, result)
        _store(out, result)


def flipped(geo: Geometry) -> Geometry | None:
    """The input gradient of a stride-1 convolution of one group as a forward convolution over dout, or
    None: dx = Conv2D(dout, W') with W'[c, o, i, j] = W[o, c, kh-1-i, kw-1-j], stride 1, the same
    dilation, each side padded by the kernel's dilated extent less the forward's padding there (none
    may be negative: a forward padded by more than its kernel's extent keeps the col2im path). A call
    whose weights are not all finite takes the col2im path too: the forward would multiply an inf weight
    by dout's zero padding (NaN) where the reference never reads that weight.

    Taken where it measured faster: W' is a copy of the weights on every call, the col2im path's dcols
    are C * kh * kw * N * P numbers, so it pays when N * P is large beside O (ResNet-50, batch 2, 3x3
    input gradients: 64 channels at 56x56 0.78-0.82 of the col2im path's time, 128 at 28x28 0.82-0.85,
    256 at 14x14 0.97-1.04, 512 at 7x7 1.21-1.31; 256 at 14x14 with batch 8 0.74)."""
    if (geo.sh, geo.sw) != (1, 1) or geo.g != 1 or geo.pointwise or geo.n * geo.p < FLIP_PIXELS_PER_CHANNEL * geo.o:
        return None
    t, b, l, r = geo.pads
    eh, ew = geo.dh * (geo.kh - 1), geo.dw * (geo.kw - 1)
    pad = (eh - t, eh - b, ew - l, ew - r)
    if min(pad) < 0:
        return None
    attrs = {"group": 1, "stride": (1, 1), "dilation": (geo.dh, geo.dw), "kernel_size": (geo.kh, geo.kw),
             "pad_mode": "pad", "pad": pad}
    flip = Geometry((geo.n, geo.o, geo.oh, geo.ow), (geo.c, geo.o, geo.kh, geo.kw), attrs)
    assert (flip.oh, flip.ow) == (geo.h, geo.w), (geo.pads, pad)
    return flip


def _input_grad(geo: Geometry, d_shape, w_shape):
    t, _, l, _ = geo.pads
    flip = flipped(geo)
    as_forward = _forward(flip, d_shape, (geo.c, geo.o, geo.kh, geo.kw)) if flip is not None else None

    def conv2d_backprop_input(dout, w, out):
        # (an inf weight times the flipped forward's zero padding would be NaN: such weights take col2im)
        if as_forward is not None and np.isfinite(w).all():
            as_forward(dout, w.reshape(w_shape).transpose(1, 0, 2, 3)[:, :, ::-1, ::-1], out)
            return
        d, w = _wide(dout).reshape(d_shape), _wide(w).reshape(w_shape)
        w2 = w.reshape(geo.o, geo.k)
        if geo.pointwise and geo.g == 1:
            _product_into(out, w2.T, d.reshape(geo.n, geo.o, geo.p), (geo.n, geo.c, geo.p))
            return
        dt = d.reshape(geo.n, geo.o, geo.p).transpose(1, 0, 2).reshape(geo.o, geo.n * geo.p)
        hp, wp = geo.padded_hw
        grad = scratch("padded", (geo.c, geo.n, hp, wp), d.dtype)
        grad[...] = 0
        for k in range(geo.g):
            rows = slice(k * geo.og, (k + 1) * geo.og)
            dcols = scratch("columns", (geo.k, geo.n * geo.p), d.dtype)
            matmul_into(w2[rows].T, dt[rows], dcols)
            dcols = dcols.reshape(geo.cg, geo.kh, geo.kw, geo.n, geo.oh, geo.ow)
            gk = grad[k * geo.cg:(k + 1) * geo.cg]
            for i in range(geo.kh):
                for j in range(geo.kw):
                    geo.tap(gk, i, j)[...] += dcols[:, i, j]
        _store(out, grad[:, :, t:t + geo.h, l:l + geo.w].transpose(1, 0, 2, 3))
    return conv2d_backprop_input


def _filter_grad(geo: Geometry, d_shape, x_shape):
    def conv2d_backprop_filter(dout, x, out):
        d, x = _wide(dout).reshape(d_shape), _wide(x).reshape(x_shape)
        dt = d.reshape(geo.n, geo.o, geo.p).transpose(1, 0, 2).reshape(geo.o, geo.n * geo.p)
        if geo.pointwise and geo.g == 1:
            xt = x.reshape(geo.n, geo.c, geo.p).transpose(1, 0, 2).reshape(geo.c, geo.n * geo.p)
            _product_into(out, dt, xt.T, (geo.o, geo.c))
            return
        xp = geo.padded(x)
        result = scratch("result", (geo.o, geo.k), d.dtype)
        for k in range(geo.g):
            rows = slice(k * geo.og, (k + 1) * geo.og)
            matmul_into(dt[rows], geo.columns(xp, k).T, result[rows])
        _store(out, result)
    return conv2d_backprop_filter


def conv_kernel(node: Node):
    """The step function (inputs..., output) computing a Conv2D (a Forward), Conv2DBackpropInput or
    Conv2DBackpropFilter node on flat buffers."""
    attrs = node.attr_dict
    a, b = (v.shape for v in node.inputs)
    if node.op == "Conv2D":
        return _forward(Geometry(a, b, attrs), a, b)
    if node.op == "Conv2DBackpropInput":
        fn = _input_grad(Geometry(attrs["input_size"], b, attrs), a, b)
    else:
        fn = _filter_grad(Geometry(b, attrs["filter_size"], attrs), a, b)

    def kernel(*arrays):
        with np.errstate(over="ignore", invalid="ignore"):   # inf and NaN propagate, as in every kernel
            fn(*arrays)
    kernel.__name__ = fn.__name__
    return kernel


def epilogue_conv(node: Node) -> Node | None:
    """The Conv2D a composite starts with (its other ops are the conv's epilogue:
    graphkernel/passes/conv_epilogue.py), else None."""
    if node.subgraph is None:
        return None
    first = next((n for n in node.subgraph.nodes if n.op != "Const"), None)
    return first if first is not None and first.op == "Conv2D" else None


def epilogue_reason(conv: Node) -> str | None:
    """Why the output pass of Conv2D `conv` cannot compute an epilogue, or None: an elementwise kernel
    reads its GEMM result in rows of output pixels, which [O, N] (one pixel per image, several images,
    im2col) does not have."""
    if conv.op != "Conv2D":
        return f"{conv.op} is not a Conv2D forward"
    if not all(isinstance(d, int) for v in (*conv.inputs, conv.out) for d in v.shape):
        return "the convolution has symbolic sizes"
    geo = Geometry(conv.inputs[0].shape, conv.inputs[1].shape, conv.attr_dict)
    if geo.result_order != NCHW and geo.p == 1 and geo.o > 1:
        return f"its GEMM result [O={geo.o}, N={geo.n}] has one pixel per image: no contiguous rows"
    return None


def epilogue_graph(sub: Graph, conv: Node) -> tuple[Graph, tuple[int, ...], tuple[int, int]]:
    """The epilogue of a composite starting with `conv` as a kernel subgraph of its own: input 0 is the
    conv's result, then the composite's inputs its other ops read (their positions: `reads`); an
    output that is the conv's result itself is written through an identity Cast. Returns (graph,
    reads, the positions of the conv's x and w among the composite's inputs)."""
    position = {v: k for k, v in enumerate(sub.inputs)}
    result = input_node(0, conv.out.type).out
    remap = {conv.out: result}
    reads: list[int] = []
    nodes = []
    for node in sub.nodes:
        if node is conv:
            continue
        for v in node.inputs:
            if v not in remap and v in position:
                remap[v] = input_node(len(reads) + 1, v.type).out
                reads.append(position[v])
        new = node.replace(inputs=tuple(remap[v] for v in node.inputs))
        remap.update(zip(node.outputs, new.outputs))
        nodes.append(new)
    outputs = []
    for v in sub.outputs:
        if v is conv.out:
            copy = Node("Cast", (result,), {"dtype": v.dtype}, (v.type,))
            nodes.append(copy)
            outputs.append(copy.out)
        else:
            outputs.append(remap[v])
    inputs = [result] + [remap[sub.inputs[k]] for k in reads]
    return Graph(inputs, nodes, outputs), tuple(reads), tuple(position[v] for v in conv.inputs)


def spatial_kernel(node: Node):
    """(step function, variant) of a convolution ("conv") or pooling ("pool") node; None for any other op.
    kernels/lower.py launches it as a numpy step of its own, named after its node."""
    if node.op in CONV_OPS:
        return conv_kernel(node), "conv"
    if node.op in POOL_OPS:
        return pool_kernel(node), "pool"
    return None
