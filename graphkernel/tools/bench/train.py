"""Training workloads of the bench: forward and backward (and, for the train step, the optimizer) in one
compiled graph.

    T1 LayerNormGrad(1024)   rows x 1024: dx, dgamma, dbeta of LayerNorm given x and dy
                             (GradOperation with sens: the forward's stats and LayerNormGrad)
    T2 SoftmaxGrad(128)      rows*8 x 128: dx of Softmax given x and dy
    BERT layer fwd+bwd       the bench's BERT layer (composite ops), loss = mean of the output's squares,
                             the loss and the gradient of every parameter
    BERT layer train step    the same loss, TrainOneStepCell with AdamWeightDecay (lr 1e-4, eps 1e-6,
                             weight decay 0.01 on every parameter): one call is one step, updates in place

T1 and T2 have numpy baselines written from the textbook formulas (the forward recomputed, as their graphs
do); the BERT step has none (numpy cannot differentiate), so it is timed fused against unfused only.
"""
from __future__ import annotations

import numpy as np

from graphkernel.tools.bench.bert import BertLayer, weights_of
from graphkernel.tools.bench.workloads import COLS, SOFTMAX_ROW, Workload
from graphkernel.cell import Cell
from graphkernel.gradients import GradOperation, value_and_grad
from graphkernel.nn import AdamWeightDecay, TrainOneStepCell
from graphkernel.onnx.examples import bert_layer_inputs, bert_layer_model
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter

LN_EPSILON = 1e-5
f32 = np.float32


class LayerNormOnly(Cell):
    def __init__(self, width):
        super().__init__()
        self.gamma = Parameter(np.ones(width, f32), name="gamma")
        self.beta = Parameter(np.zeros(width, f32), name="beta")
        self.layer_norm = P.LayerNorm(epsilon=LN_EPSILON)

    def construct(self, x):
        return self.layer_norm(x, self.gamma, self.beta)[0]


class LayerNormBackward(Cell):
    """T1: (dx, dgamma, dbeta) of LayerNorm at x for the cotangent dy."""

    def __init__(self, width=COLS):
        super().__init__()
        self.net = LayerNormOnly(width)
        self.grad = GradOperation(get_all=True, get_by_list=True, sens_param=True)

    def construct(self, x, dy):
        (dx,), (dgamma, dbeta) = self.grad(self.net, [self.net.gamma, self.net.beta])(x, dy)
        return dx, dgamma, dbeta


class SoftmaxBackward(Cell):
    """T2: dx of Softmax at x for the cotangent dy."""

    def __init__(self):
        super().__init__()
        self.softmax = P.Softmax()
        self.grad = GradOperation(sens_param=True)

    def construct(self, x, dy):
        return self.grad(self.softmax)(x, dy)


class BertLoss(Cell):
    def __init__(self, weights, heads):
        super().__init__(auto_prefix=False)
        self.layer = BertLayer(weights, heads, composite=True)

    def construct(self, x, mask):
        y = self.layer(x, mask)
        return P.ReduceMean()(y * y, ())


def bert_train_step(weights, heads) -> Cell:
    net = BertLoss(weights, heads)
    opt = AdamWeightDecay([{"params": net.trainable_params(), "weight_decay": 0.01}], 1e-4, eps=1e-6)
    return TrainOneStepCell(net, opt)


class BertStep(Cell):
    """The BERT layer's loss and the gradient of every parameter, one graph."""

    def __init__(self, weights, heads):
        super().__init__(auto_prefix=False)
        self.layer = BertLayer(weights, heads, composite=True)
        self.step = value_and_grad(self.loss, None, self.layer.trainable_params())

    def loss(self, x, mask):
        y = self.layer(x, mask)
        return P.ReduceMean()(y * y, ())

    def construct(self, x, mask):
        loss, grads = self.step(x, mask)
        return (loss,) + tuple(grads)


# --- the same as array code (numpy: the textbook backward formulas) -------------------------------

def layer_norm_backward(xp, c, x, dy):
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    rstd = f32(1) / xp.sqrt((centered * centered).mean(axis=-1, keepdims=True) + f32(LN_EPSILON))
    xhat = centered * rstd
    dx = rstd * (dy - dy.mean(axis=-1, keepdims=True) - xhat * (dy * xhat).mean(axis=-1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


def softmax_backward(xp, c, x, dy):
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return y * (dy - (y * dy).sum(axis=-1, keepdims=True))


def _normal(*shapes):
    return lambda rng: [rng.standard_normal(s).astype(f32) for s in shapes]


def train_suite(rows: int) -> list[Workload]:
    size = f"{rows}x{COLS}"
    soft = (rows * COLS // SOFTMAX_ROW, SOFTMAX_ROW)
    return [
        Workload(f"T1 LayerNormGrad(1024) {size}", "T1", LayerNormBackward, _normal((rows, COLS), (rows, COLS)),
                 layer_norm_backward, None),
        Workload(f"T2 SoftmaxGrad(128) {size}", "T2", SoftmaxBackward, _normal(soft, soft), softmax_backward,
                 None),
    ]


def bert_step(hidden: int = 1024, heads: int = 16, seq: int = 128, batch: int = 2) -> list[Workload]:
    model = bert_layer_model(hidden=hidden, heads=heads, seq=seq, batch=batch, gelu="tanh")
    weights = weights_of(model)
    feeds = bert_layer_inputs(model)
    return [Workload(f"BERT layer fwd+bwd b{batch} s{seq} h{hidden}", "BERT fwd+bwd",
                     lambda: BertStep(weights, heads), lambda rng: [feeds["x"].copy(), feeds["mask"].copy()],
                     None, None, opaque=True, bound=False),
            Workload(f"BERT layer train step b{batch} s{seq} h{hidden}", "BERT train step",
                     lambda: bert_train_step(weights, heads),
                     lambda rng: [feeds["x"].copy(), feeds["mask"].copy()], None, None, opaque=True, bound=False)]
