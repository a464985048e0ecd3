"""A small BERT (2 layers, hidden 128, 4 heads, seq 32) trained on a synthetic task with AdamWeightDecay:
fused and unfused training give the same losses at every step (dropout included: every target draws the
same masks), the loss falls, and mixed precision with a dynamic loss scale tracks float32 training.
The BERT runs are `slow` (each compiles the network's training step: about 40 s from a cold kernel
cache); their small twins, on an MLP, run by default."""
import math

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, context, nn, ops

HIDDEN, HEADS, SEQ, BATCH, LR = 128, 4, 32, 2, 1e-3


class Attention(nn.Cell):
    def __init__(self, dropout):
        super().__init__()
        self.size = HIDDEN // HEADS
        self.query, self.key, self.value, self.dense = (nn.Dense(HIDDEN, HIDDEN) for _ in range(4))
        self.scores, self.context = ops.BatchMatMul(transpose_b=True), ops.BatchMatMul()
        self.softmax = nn.Softmax()
        self.probs_dropout, self.dropout = nn.Dropout(p=dropout), nn.Dropout(p=dropout)

    def split(self, x):
        return ops.transpose(ops.reshape(x, (BATCH, SEQ, HEADS, self.size)), (0, 2, 1, 3))

    def construct(self, x, mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        probs = self.probs_dropout(self.softmax(self.scores(q, k) * (1 / math.sqrt(self.size)) + mask))
        context_ = ops.reshape(ops.transpose(self.context(probs, v), (0, 2, 1, 3)), x.shape)
        return self.dropout(self.dense(context_))


class Layer(nn.Cell):
    def __init__(self, dropout):
        super().__init__()
        self.attention = Attention(dropout)
        self.attention_norm = nn.LayerNorm((HIDDEN,), epsilon=1e-12)
        self.intermediate = nn.Dense(HIDDEN, 4 * HIDDEN, activation="gelu")
        self.output = nn.Dense(4 * HIDDEN, HIDDEN)
        self.dropout = nn.Dropout(p=dropout)
        self.output_norm = nn.LayerNorm((HIDDEN,), epsilon=1e-12)

    def construct(self, x, mask):
        h = self.attention_norm(self.attention(x, mask) + x)
        return self.output_norm(self.dropout(self.output(self.intermediate(h))) + h)


class Bert(nn.Cell):
    def __init__(self, dropout):
        super().__init__()
        self.layers = nn.CellList([Layer(dropout) for _ in range(2)])
        self.loss = nn.MSELoss()

    def construct(self, x, mask, target):
        for layer in self.layers:
            x = layer(x, mask)
        return self.loss(x, target)


def _task():
    """Inputs and a target the network can learn: a fixed random map of the inputs through tanh."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SEQ, HIDDEN)).astype(np.float32)
    mask = np.zeros((BATCH, 1, 1, SEQ), np.float32)
    mask[1, ..., SEQ - 4:] = -10000.0
    w = rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32) / np.sqrt(HIDDEN)
    target = np.tanh(x @ w).astype(np.float32) * 2.0
    return [Tensor(a) for a in (x, mask, target)]


def _train(target, fuse, steps, dropout=0.1, precision="must_keep_origin_dtype", scaled=False):
    context.set_context(device_target=target, enable_graph_kernel=fuse, precision_mode=precision)
    ms.set_seed(0)
    net = Bert(dropout)
    opt = nn.AdamWeightDecay([{"params": net.trainable_params(), "weight_decay": 0.01}], LR)
    if scaled:
        cell = nn.TrainOneStepWithLossScaleCell(net, opt, nn.DynamicLossScaleUpdateCell(2.0 ** 12, 2, 20))
    else:
        cell = nn.TrainOneStepCell(net, opt)
    cell.set_train(dropout > 0)
    data = _task()
    losses = []
    for _ in range(steps):
        out = cell(*data)
        losses.append(float((out[0] if scaled else out).asnumpy()))
    return np.array(losses), net


def _fused_equals_unfused(steps):
    fused, _ = _train("Ascend", True, steps)
    unfused, _ = _train("Ascend", False, steps)
    np.testing.assert_allclose(fused, unfused, rtol=1e-5)
    return fused


def test_dropout_training_fused_equals_unfused_small():
    """The small twin of the two BERT runs below (the 200 steps, whose first 12 were the short run, and
    the parameters after 20 steps): an MLP with dropout trained 12 steps fused and unfused gives the same
    losses (every target draws the same masks) and parameters, and the loss falls."""
    rng = np.random.default_rng(2)
    x = Tensor(rng.standard_normal((64, 32)).astype(np.float32))
    y = Tensor(np.tanh(x.asnumpy() @ rng.standard_normal((32, 8)).astype(np.float32)))
    losses, nets, lr = {}, {}, 1e-2
    for fuse in (True, False):
        context.set_context(device_target="Ascend", enable_graph_kernel=fuse)
        ms.set_seed(0)
        nets[fuse] = nn.SequentialCell([nn.Dense(32, 64, activation="gelu"), nn.Dropout(p=0.1), nn.Dense(64, 8)])
        opt = nn.AdamWeightDecay(nets[fuse].trainable_params(), lr, weight_decay=0.01)
        cell = nn.TrainOneStepCell(nn.WithLossCell(nets[fuse], nn.MSELoss()), opt)
        cell.set_train(True)
        losses[fuse] = np.array([float(cell(x, y).asnumpy()) for _ in range(12)])
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-5)
    assert losses[True][-1] < losses[True][0]
    for p, q in zip(nets[True].get_parameters(), nets[False].get_parameters()):
        np.testing.assert_allclose(p.asnumpy(), q.asnumpy(), rtol=0, atol=10 * lr, err_msg=p.name)


@pytest.mark.slow
def test_dropout_training_200_steps():
    losses = _fused_equals_unfused(200)
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.slow
def test_parameters_after_20_steps_fused_vs_unfused():
    _, fused = _train("Ascend", True, 20, dropout=0.0)
    _, unfused = _train("Ascend", False, 20, dropout=0.0)
    for p, q in zip(fused.get_parameters(), unfused.get_parameters()):
        np.testing.assert_allclose(p.asnumpy(), q.asnumpy(), rtol=0, atol=10 * LR, err_msg=p.name)


def _mixed_precision_tracks_float32(steps):
    full, _ = _train("Ascend", True, steps, dropout=0.0, scaled=True)
    mixed, net = _train("Ascend", True, steps, dropout=0.0, scaled=True, precision="allow_mix_precision")
    np.testing.assert_allclose(mixed[::10], full[::10], rtol=0.02)
    assert {p.dtype for p in net.get_parameters()} == {ms.float32}, "master weights stay float32"


def test_mixed_precision_short():
    """The short twin on a small MLP (the BERT run's cold float16 kernel builds take minutes): MatMuls
    and their gradients in float16, master weights, optimizer state and updates float32."""
    rng = np.random.default_rng(1)
    x = Tensor(rng.standard_normal((64, 32)).astype(np.float32))
    y = Tensor(np.tanh(x.asnumpy() @ rng.standard_normal((32, 8)).astype(np.float32)))
    losses = {}
    for precision in ("must_keep_origin_dtype", "allow_mix_precision"):
        context.set_context(device_target="Ascend", enable_graph_kernel=True, precision_mode=precision)
        ms.set_seed(0)
        net = nn.SequentialCell([nn.Dense(32, 64, activation="gelu"), nn.Dense(64, 8)])
        opt = nn.AdamWeightDecay(net.trainable_params(), 1e-2, weight_decay=0.01)
        cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt,
                                                nn.DynamicLossScaleUpdateCell(2.0 ** 12, 2, 20))
        losses[precision] = np.array([float(cell(x, y)[0].asnumpy()) for _ in range(30)])
        kernels = cell.compile(x, y).kernels
        matmuls = [k for k in kernels if k.op_types == ("MatMul",)]
        if precision == "allow_mix_precision":
            assert all(k.inputs[0].dtype == ms.float16 for k in matmuls)
            assert {p.dtype for p in cell.get_parameters() if p.dtype.is_float} == {ms.float32}
    full, mixed = losses["must_keep_origin_dtype"], losses["allow_mix_precision"]
    assert full[-1] < 0.5 * full[0]
    np.testing.assert_allclose(mixed[::10], full[::10], rtol=0.02)


@pytest.mark.slow
def test_mixed_precision_100_steps():
    _mixed_precision_tracks_float32(100)
