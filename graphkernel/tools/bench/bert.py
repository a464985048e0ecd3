"""A BERT encoder layer (post-LN, as in BERT) written with the Cell API, in two spellings, plus the same
computation as plain array code for numpy and jax.

    x [batch, seq, hidden], mask [batch, 1, 1, seq] (additive: 0 or -10000)
    q, k, v  = x @ Wq + bq, ...  -> [batch, heads, seq, dh]         MatMul (opaque), Reshape, Transpose
    probs    = softmax(q @ k^T * dh**-0.5 + mask)                    BatchMatMul (opaque)
    h        = LayerNorm(probs @ v (heads merged) @ Wo + bo + x)
    y        = LayerNorm(GeLU_tanh(h @ W1 + b1) @ W2 + b2 + h)

`BertLayer(weights, composite=False)` writes bias, tanh-GeLU, residual, LayerNorm and the scaled masked
Softmax with primitives (Add, Mul, Tanh, ReduceMean, ReduceMax, Exp, ...); `composite=True` uses
P.LayerNorm, P.Softmax and P.GeLU, which the expanders turn into primitives before fusion. The weights
come from `graphkernel.onnx.examples.bert_layer_model` (fixed seed), so the Cell, the ONNX model through
graphkernel.onnx.load, ONNX Runtime, numpy and jax all compute one function with one set of weights.
"""
from __future__ import annotations

import math

import numpy as np

from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter

LN_EPSILON = 1e-12       # the ONNX model's LayerNormalization epsilon
GELU_C, SQRT_2_OVER_PI = 0.044715, math.sqrt(2 / math.pi)
LINEARS = ("attention.query", "attention.key", "attention.value", "attention.output", "intermediate",
           "output")
NORMS = ("attention.ln", "output.ln")


def weights_of(model) -> dict[str, np.ndarray]:
    """The layer's weights by stem ("attention.query.weight", "output.ln.gamma", ...) from a model
    built by bert_layer_model (its initializer names carry a numeric suffix)."""
    from onnx import numpy_helper
    stems = {f"{s}.{part}" for s in LINEARS for part in ("weight", "bias")}
    stems |= {f"{s}.{part}" for s in NORMS for part in ("gamma", "beta")}
    out = {}
    for init in model.graph.initializer:
        stem = init.name.rsplit("_", 1)[0]
        if stem in stems:
            out[stem] = numpy_helper.to_array(init)
    missing = stems - set(out)
    if missing:
        raise ValueError(f"the model lacks the weights {sorted(missing)}")
    return out


class BertLayer(Cell):
    """One encoder layer, forward; weights become Parameters named by stem."""

    def __init__(self, weights: dict[str, np.ndarray], heads: int, composite: bool = False):
        super().__init__()
        self.heads, self.composite = heads, composite
        self.hidden = weights["attention.query.weight"].shape[0]
        self.params = {}
        for stem, value in sorted(weights.items()):
            param = Parameter(value.copy(), name=stem)
            setattr(self, stem.replace(".", "_"), param)
            self.params[stem] = param
        self.matmul = P.MatMul()
        self.scores = P.BatchMatMul(transpose_b=True)
        self.context = P.BatchMatMul()
        self.add, self.sub, self.mul, self.div = P.Add(), P.Sub(), P.Mul(), P.RealDiv()
        self.reshape, self.transpose = P.Reshape(), P.Transpose()
        self.mean = P.ReduceMean(keep_dims=True)
        self.max, self.sum = P.ReduceMax(keep_dims=True), P.ReduceSum(keep_dims=True)
        self.exp, self.tanh, self.sqrt = P.Exp(), P.Tanh(), P.Sqrt()
        self.layer_norm = P.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=LN_EPSILON)
        self.softmax, self.gelu = P.Softmax(axis=-1), P.GeLU()

    def linear(self, x, stem: str):
        return self.add(self.matmul(x, self.params[f"{stem}.weight"]), self.params[f"{stem}.bias"])

    def norm(self, x, stem: str):
        gamma, beta = self.params[f"{stem}.gamma"], self.params[f"{stem}.beta"]
        if self.composite:
            return self.layer_norm(x, gamma, beta)[0]
        centered = self.sub(x, self.mean(x, -1))
        variance = self.mean(self.mul(centered, centered), -1)
        return self.add(self.mul(self.div(centered, self.sqrt(self.add(variance, LN_EPSILON))), gamma), beta)

    def act(self, x):
        if self.composite:
            return self.gelu(x)
        cube = self.mul(self.mul(x, x), x)
        inner = self.mul(self.add(x, self.mul(cube, GELU_C)), SQRT_2_OVER_PI)
        return self.mul(self.mul(x, 0.5), self.add(self.tanh(inner), 1.0))

    def probabilities(self, scores):
        if self.composite:
            return self.softmax(scores)
        e = self.exp(self.sub(scores, self.max(scores, -1)))
        return self.div(e, self.sum(e, -1))

    def construct(self, x, mask):
        batch, seq, hidden = x.shape
        heads, dh = self.heads, hidden // self.heads
        rows = self.reshape(x, (batch * seq, hidden))

        def split(t, perm):
            return self.transpose(self.reshape(t, (batch, seq, heads, dh)), perm)

        q = split(self.linear(rows, "attention.query"), (0, 2, 1, 3))
        k = split(self.linear(rows, "attention.key"), (0, 2, 1, 3))
        v = split(self.linear(rows, "attention.value"), (0, 2, 1, 3))
        scores = self.add(self.mul(self.scores(q, k), dh ** -0.5), mask)
        ctx = self.transpose(self.context(self.probabilities(scores), v), (0, 2, 1, 3))
        ctx = self.reshape(ctx, (batch * seq, hidden))
        h = self.norm(self.add(self.linear(ctx, "attention.output"), rows), "attention.ln")
        out = self.linear(self.act(self.linear(h, "intermediate")), "output")
        y = self.norm(self.add(out, h), "output.ln")
        return self.reshape(y, (batch, seq, hidden))


def bert_arrays(xp, w: dict, heads: int, x, mask):
    """The same layer as array code: xp is numpy or jax.numpy (matmul on BLAS / XLA)."""
    f32 = np.float32
    batch, seq, hidden = x.shape
    dh = hidden // heads
    rows = x.reshape(batch * seq, hidden)

    def linear(t, stem):
        return t @ w[f"{stem}.weight"] + w[f"{stem}.bias"]

    def split(t):
        return t.reshape(batch, seq, heads, dh).transpose(0, 2, 1, 3)

    def norm(t, stem):
        centered = t - t.mean(axis=-1, keepdims=True)
        variance = (centered * centered).mean(axis=-1, keepdims=True)
        return centered / xp.sqrt(variance + f32(LN_EPSILON)) * w[f"{stem}.gamma"] + w[f"{stem}.beta"]

    q, k, v = (split(linear(rows, s)) for s in LINEARS[:3])
    scores = xp.matmul(q, k.transpose(0, 1, 3, 2)) * f32(dh ** -0.5) + mask
    e = xp.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    ctx = xp.matmul(probs, v).transpose(0, 2, 1, 3).reshape(batch * seq, hidden)
    h = norm(linear(ctx, "attention.output") + rows, "attention.ln")
    a = linear(h, "intermediate")
    g = f32(0.5) * a * (f32(1) + xp.tanh(f32(SQRT_2_OVER_PI) * (a + f32(GELU_C) * (a * a * a))))
    y = norm(linear(g, "output") + h, "output.ln")
    return y.reshape(batch, seq, hidden)
