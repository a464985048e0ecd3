"""The benchmark's workloads: each one computation as a Cell, as array code, and (for ONNX Runtime) as an
ONNX model, with its inputs.

    demo nets   NetBasicFuse x*2+1, NetCompositeFuse (x*2+1)**3 (graphkernel/tools/demo.py)
    W1..W6      x*2+1, (x*2+1)**3, bias + tanh-GeLU, LayerNorm(1024), Softmax(128), sum of squares:
                rows x 1024 (Softmax: rows*8 rows of 128), written with primitives
    models      masked Softmax (BERT attention's scores) and residual + LayerNormalization, as torch.onnx
                writes them (onnx_models.py), through graphkernel.onnx.load: the issue's two model shapes
    BERT        one BERT-large encoder layer (bert.py), primitives or composite ops, and the same layer
                as an ONNX model through graphkernel.onnx.load

`arrays(xp, consts, *inputs)` is the hand-written array code: the numpy op-by-op baseline with
xp=numpy, and jax.jit's function with xp=jax.numpy (consts: weights passed as arguments, not baked in).
It spells Pow(y, 3) as y*y*y, as a person tuning numpy would (numpy's ** 3 calls powf).
A workload's `family` names the computation (sizes differ); `kernel_family` (default: the family) what
its kernels are shared with: kernels are shape-generic, so cold compile time is measured once per kernel
family (the three BERT spellings lower to the same kernels).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from graphkernel.tools.bench import onnx_models
from graphkernel.tools.bench.bert import BertLayer, bert_arrays, weights_of
from graphkernel.tools.demo import NetBasicFuse, NetCompositeFuse
from graphkernel.nn import Cell
from graphkernel.onnx import load
from graphkernel.onnx.examples import bert_layer_inputs, bert_layer_model
from graphkernel.ops import operations as P

COLS = 1024
SOFTMAX_ROW = 128
GELU_C, SQRT_2_OVER_PI = 0.044715, math.sqrt(2 / math.pi)
LN_EPSILON = 1e-5
f32 = np.float32


@dataclass
class Workload:
    name: str                                   # unique: "W3 bias+GeLU 4096x1024"
    family: str                                 # "W3": what shares kernels (compile measured once)
    make_cell: Callable[[], Cell]
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    arrays: Callable                            # (xp, consts, *inputs) -> output array
    onnx_model: Callable[[], object] | None     # the ModelProto ONNX Runtime runs, inputs in order
    consts: dict = field(default_factory=dict)
    opaque: bool = False                        # has MatMul/BatchMatMul kernels
    bound: bool = True                          # memory-bound: report the fraction of the copy bound
    kernel_family: str = ""                     # what shares kernels (cold compile measured once); family


def _normal(*shapes):
    return lambda rng: [rng.standard_normal(s).astype(f32) for s in shapes]


# --- W1..W6 as Cells ------------------------------------------------------------------------------

class ScaleShift(Cell):
    """W1: x * 2 + 1."""

    def __init__(self):
        super().__init__()
        self.mul, self.add = P.Mul(), P.Add()

    def construct(self, x):
        return self.add(self.mul(x, 2.0), 1.0)


class ScaleShiftCube(Cell):
    """W2: (x * 2 + 1) ** 3."""

    def __init__(self):
        super().__init__()
        self.mul, self.add, self.pow = P.Mul(), P.Add(), P.Pow()

    def construct(self, x):
        return self.pow(self.add(self.mul(x, 2.0), 1.0), 3.0)


class BiasGeLU(Cell):
    """W3: h = x + bias; 0.5 * h * (1 + tanh(sqrt(2/pi) * (h + 0.044715 * h^3)))."""

    def __init__(self):
        super().__init__()
        self.mul, self.add, self.tanh = P.Mul(), P.Add(), P.Tanh()

    def construct(self, x, bias):
        h = self.add(x, bias)
        cube = self.mul(self.mul(h, h), h)
        inner = self.mul(self.add(h, self.mul(cube, GELU_C)), SQRT_2_OVER_PI)
        return self.mul(self.mul(h, 0.5), self.add(self.tanh(inner), 1.0))


class LayerNorm(Cell):
    """W4: (x - mean) / sqrt(var + eps) * gamma + beta over the last axis (two-pass variance)."""

    def __init__(self):
        super().__init__()
        self.mean = P.ReduceMean(keep_dims=True)
        self.sub, self.mul, self.add, self.div, self.sqrt = P.Sub(), P.Mul(), P.Add(), P.RealDiv(), P.Sqrt()

    def construct(self, x, gamma, beta):
        centered = self.sub(x, self.mean(x, -1))
        variance = self.mean(self.mul(centered, centered), -1)
        return self.add(self.mul(self.div(centered, self.sqrt(self.add(variance, LN_EPSILON))), gamma), beta)


class Softmax(Cell):
    """W5: exp(x - max) / sum over the last axis."""

    def __init__(self):
        super().__init__()
        self.max, self.sum = P.ReduceMax(keep_dims=True), P.ReduceSum(keep_dims=True)
        self.sub, self.exp, self.div = P.Sub(), P.Exp(), P.RealDiv()

    def construct(self, x):
        e = self.exp(self.sub(x, self.max(x, -1)))
        return self.div(e, self.sum(e, -1))


class SumOfSquares(Cell):
    """W6: sum(x * x) over every axis."""

    def __init__(self):
        super().__init__()
        self.mul, self.sum = P.Mul(), P.ReduceSum()

    def construct(self, x):
        return self.sum(self.mul(x, x), ())


# --- the same as array code ------------------------------------------------------------------------

def scale_shift(xp, c, x):
    return x * f32(2) + f32(1)


def scale_shift_cube(xp, c, x):
    y = x * f32(2) + f32(1)
    return y * y * y


def bias_gelu(xp, c, x, bias):
    h = x + bias
    return f32(0.5) * h * (f32(1) + xp.tanh(f32(SQRT_2_OVER_PI) * (h + f32(GELU_C) * (h * h * h))))


def layer_norm(xp, c, x, gamma, beta):
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / xp.sqrt(variance + f32(LN_EPSILON)) * gamma + beta


def softmax(xp, c, x):
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sum_of_squares(xp, c, x):
    return xp.sum(x * x)


# --- the lists ---------------------------------------------------------------------------------------

def kernel_suite(rows: int) -> list[Workload]:
    size = f"{rows}x{COLS}"
    shape, vec, soft = (rows, COLS), (COLS,), (rows * COLS // SOFTMAX_ROW, SOFTMAX_ROW)
    return [
        Workload(f"W1 x*2+1 {size}", "W1", ScaleShift, _normal(shape), scale_shift,
                 lambda: onnx_models.scale_shift(shape)),
        Workload(f"W2 (x*2+1)**3 {size}", "W2", ScaleShiftCube, _normal(shape), scale_shift_cube,
                 lambda: onnx_models.scale_shift_cube(shape)),
        Workload(f"W3 bias+GeLU {size}", "W3", BiasGeLU, _normal(shape, vec), bias_gelu,
                 lambda: onnx_models.bias_gelu(shape)),
        Workload(f"W4 LayerNorm(1024) {size}", "W4", LayerNorm,
                 lambda rng: [rng.standard_normal(shape).astype(f32), (1 + 0.1 * rng.standard_normal(vec)).astype(f32),
                              (0.1 * rng.standard_normal(vec)).astype(f32)],
                 layer_norm, lambda: onnx_models.layer_norm(shape, LN_EPSILON)),
        Workload(f"W5 Softmax(128) {size}", "W5", Softmax, _normal(soft), softmax,
                 lambda: onnx_models.softmax(soft)),
        Workload(f"W6 sum of squares {size}", "W6", SumOfSquares, _normal(shape), sum_of_squares,
                 lambda: onnx_models.sum_of_squares(shape)),
    ]


def masked_softmax(xp, c, a, m):
    return softmax(xp, c, a * f32(0.125) + m)


def residual_layer_norm(xp, c, x, r):
    return layer_norm(xp, c, x + r, c["gamma"], c["beta"])


def onnx_suite(scores: tuple[int, ...], mask: tuple[int, ...], rows: tuple[int, int]) -> list[Workload]:
    """The two torch-exported models, loaded by graphkernel.onnx.load: Softmax over scores [b, h, s, s]
    with an additive mask [b, 1, 1, s], and LayerNormalization of x + r over the last axis."""
    rng = np.random.default_rng(1)
    width = rows[-1]
    consts = {"gamma": (1 + 0.1 * rng.standard_normal(width)).astype(f32),
              "beta": (0.1 * rng.standard_normal(width)).astype(f32)}
    soft = onnx_models.masked_softmax(scores, mask)
    norm = onnx_models.residual_layer_norm(rows, consts["gamma"], consts["beta"], LN_EPSILON)

    def mask_inputs(rng):
        a = rng.standard_normal(scores).astype(f32) * f32(4)
        m = np.where(rng.random(mask) < 0.1, f32(-10000), f32(0)).astype(f32)   # BERT's padding mask
        return [a, m]

    return [
        Workload(f"ONNX masked Softmax {'x'.join(map(str, scores))}", "ONNX masked Softmax", lambda: load(soft),
                 mask_inputs, masked_softmax, lambda: soft),
        Workload(f"ONNX residual+LayerNorm {'x'.join(map(str, rows))}", "ONNX residual+LayerNorm",
                 lambda: load(norm), _normal(rows, rows), residual_layer_norm, lambda: norm, consts=consts),
    ]


def seed_nets(shape: tuple[int, int]) -> list[Workload]:
    size = "x".join(map(str, shape))
    return [
        Workload(f"NetBasicFuse {size}", "NetBasicFuse", NetBasicFuse, _normal(shape), scale_shift,
                 lambda: onnx_models.scale_shift(shape)),
        Workload(f"NetCompositeFuse {size}", "NetCompositeFuse", NetCompositeFuse, _normal(shape),
                 scale_shift_cube, lambda: onnx_models.scale_shift_cube(shape)),
    ]


def bert(hidden: int = 1024, heads: int = 16, seq: int = 128, batch: int = 2) -> list[Workload]:
    """The layer as primitives, as composite ops, and as the ONNX model: one set of weights."""
    model = bert_layer_model(hidden=hidden, heads=heads, seq=seq, batch=batch, gelu="tanh")
    weights = weights_of(model)
    feeds = bert_layer_inputs(model)

    def inputs(rng):
        return [feeds["x"].copy(), feeds["mask"].copy()]

    def arrays(xp, w, x, mask):
        return bert_arrays(xp, w, heads, x, mask)

    size = f"b{batch} s{seq} h{hidden}"
    common = dict(inputs=inputs, arrays=arrays, onnx_model=lambda: model, consts=weights, opaque=True,
                  bound=False, kernel_family="BERT")
    return [
        Workload(f"BERT layer primitives {size}", "BERT primitives",
                 lambda: BertLayer(weights, heads, composite=False), **common),
        Workload(f"BERT layer composite ops {size}", "BERT composite",
                 lambda: BertLayer(weights, heads, composite=True), **common),
        Workload(f"BERT layer ONNX {size}", "BERT ONNX", lambda: load(model), **common),
    ]
