"""nn layers, containers, losses and initializers against numpy formulas written here, in GRAPH and PYNATIVE
mode, on the reference and on the device fused and unfused; Parameter names as MindSpore gives them."""
import math

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import nn
from graphkernel.common.initializer import (HeUniform, InitializerError, Normal, TruncatedNormal, Uniform,
                                            XavierUniform, fans, initializer)
from tests.tolerance import assert_close

RNG = np.random.default_rng(0)


def f32(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def run(cell, *arrays):
    out = cell(*[ms.Tensor(a) for a in arrays])
    return out.asnumpy()


def close(got, want):
    assert_close(np.asarray(got), np.asarray(want, dtype=np.float32), rtol_scale=10)


# -- layers ------------------------------------------------------------------------------------------

def test_dense(setting):
    dense = nn.Dense(6, 4)
    w, b = dense.weight.asnumpy(), dense.bias.asnumpy()
    x = f32(3, 6)
    close(run(dense, x), x @ w.T + b)
    x3 = f32(2, 3, 6)
    close(run(dense, x3), x3 @ w.T + b)
    relu = nn.Dense(6, 4, activation="relu", has_bias=False)
    close(run(relu, x), np.maximum(x @ relu.weight.asnumpy().T, 0))


def test_activations_and_layer_norm(setting):
    x = f32(3, 5)
    close(run(nn.ReLU(), x), np.maximum(x, 0))
    close(run(nn.Sigmoid(), x), 1 / (1 + np.exp(-x.astype(np.float64))))
    close(run(nn.Tanh(), x), np.tanh(x.astype(np.float64)))
    e = np.exp(x - x.max(-1, keepdims=True))
    close(run(nn.Softmax(), x), e / e.sum(-1, keepdims=True))
    close(run(nn.LogSoftmax(), x), np.log(e / e.sum(-1, keepdims=True)))
    t = np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))
    close(run(nn.GELU(), x), 0.5 * x * (1 + t))
    from math import erf
    close(run(nn.GELU(approximate=False), x), 0.5 * x * (1 + np.vectorize(erf)(x / math.sqrt(2))))
    ln = nn.LayerNorm((5,), epsilon=1e-5)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    close(run(ln, x), (x - mean) / np.sqrt(var + 1e-5))


def test_embedding_and_its_gradient(setting):
    emb = nn.Embedding(7, 3, padding_idx=2)
    table = emb.embedding_table.asnumpy()
    assert not table[2].any()
    ids = np.array([[1, 6], [2, 1]], np.int32)
    close(run(emb, ids), table[ids])
    weights = f32(2, 2, 3)
    (grad,) = ms.grad(lambda i: ms.ops.ReduceSum()(emb(i) * ms.Tensor(weights)), None,
                      emb.trainable_params())(ms.Tensor(ids))
    want = np.zeros_like(table)
    np.add.at(want, ids.reshape(-1), weights.reshape(-1, 3))
    close(grad.asnumpy(), want)


def test_dropout_is_the_identity_outside_training_and_set_train_recompiles():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    net = nn.SequentialCell([nn.Dense(4, 4), nn.Dropout(p=0.5)])
    x = f32(8, 4)
    before = run(net, x)
    net.set_train()
    assert net.training and net[1].training
    dropped = run(net, x)
    assert net.trace_count == 2
    assert (dropped == 0).any() and not (before == 0).any()
    kept = dropped != 0
    close(dropped[kept], 2 * before[kept])   # the kept elements scaled by 1 / (1 - p)
    net.set_train(False)
    close(run(net, x), before)
    close(run(nn.Dropout(keep_prob=1.0).set_train(), x), x)


def test_switching_between_train_and_eval_reuses_both_compiles():
    """Model.train then Model.eval every epoch: each mode compiles once; a sub-cell's own set_train reaches
    the parent's compile, and so does the mode of a Cell outside the tree that construct calls."""
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    net = nn.SequentialCell([nn.Dense(4, 4), nn.Dropout(p=0.5)])
    x = f32(8, 4)
    evaluated = run(net, x)
    for _ in range(2):
        net.set_train()
        assert (run(net, x) == 0).any()
        net.set_train(False)
        close(run(net, x), evaluated)
    assert net.trace_count == 2
    net[1].set_train()                  # only the Dropout below: a third set of modes, compiled
    assert (run(net, x) == 0).any() and net.trace_count == 3

    class Outside(nn.Cell):             # the Dropout lives in a plain list: not a sub-cell
        def __init__(self, drop):
            super().__init__()
            self.drops = [drop]

        def construct(self, x):
            return self.drops[0](x)

    drop = nn.Dropout(p=0.5)
    outer = Outside(drop)
    ones = np.ones((8, 4), np.float32)
    close(run(outer, ones), ones)
    drop.set_train()
    assert (run(outer, ones) == 0).any() and outer.trace_count == 2
    drop.set_train(False)
    close(run(outer, ones), ones)
    assert outer.trace_count == 2


# -- containers and names ----------------------------------------------------------------------------

class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(3, 4)
        self.w = ms.Parameter(np.ones(2, np.float32), name="explicit")


class Model(nn.Cell):
    def __init__(self):
        super().__init__()
        self.layers = nn.CellList([Block(), Block()])
        self.seq = nn.SequentialCell([nn.Dense(2, 2), nn.ReLU()])
        self.p = ms.Parameter(np.ones(1, np.float32), requires_grad=False)


def test_parameter_names_are_attribute_paths_as_mindspore_names_them():
    # the lists printed by mindspore 2.10 for the same classes
    model = Model()
    assert [p.name for p in model.get_parameters()] == [
        "p", "layers.0.w", "layers.0.dense.weight", "layers.0.dense.bias", "layers.1.w",
        "layers.1.dense.weight", "layers.1.dense.bias", "seq.0.weight", "seq.0.bias"]
    assert [p.name for p in model.trainable_params()] == [p.name for p in model.get_parameters()][1:]
    assert [p.name for p in Block().get_parameters()] == ["explicit", "dense.weight", "dense.bias"]
    assert [n for n, _ in model.cells_and_names()] == ["", "layers", "layers.0", "layers.0.dense", "layers.1",
                                                       "layers.1.dense", "seq", "seq.0", "seq.1"]
    assert len(model.layers) == 2 and isinstance(model.layers[1], Block)
    assert [type(c).__name__ for c in model.seq] == ["Dense", "ReLU"]


def test_sequential_cell_runs_in_order(setting):
    seq = nn.SequentialCell([nn.Dense(4, 3), nn.Tanh(), nn.Dense(3, 2)])
    x = f32(5, 4)
    h = np.tanh(x @ seq[0].weight.asnumpy().T + seq[0].bias.asnumpy())
    close(run(seq, x), h @ seq[2].weight.asnumpy().T + seq[2].bias.asnumpy())


def test_set_seed_makes_weights_reproducible():
    ms.set_seed(7)
    a = nn.Dense(5, 5).weight.asnumpy()
    ms.set_seed(7)
    b = nn.Dense(5, 5).weight.asnumpy()
    assert np.array_equal(a, b) and not np.array_equal(a, nn.Dense(5, 5).weight.asnumpy())


# -- initializers ------------------------------------------------------------------------------------

def test_fans_and_uniform_bounds():
    assert fans((8, 3)) == (3, 8)
    assert fans((8, 3, 2, 5)) == (30, 80)
    assert fans((7,)) == (7, 7)
    for init, bound in ((XavierUniform(gain=2), 2 * math.sqrt(6 / (40 + 200))),
                        (HeUniform(), math.sqrt(2) * math.sqrt(3 / 40)),
                        (HeUniform(negative_slope=math.sqrt(5)), math.sqrt(1 / 40)),
                        (HeUniform(mode="fan_out", nonlinearity="relu"), math.sqrt(2) * math.sqrt(3 / 200)),
                        (Uniform(0.3), 0.3)):
        values = initializer(init, (200, 40)).asnumpy()
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.95 * bound      # 8000 draws reach the top 5% of the range


def test_normal_and_truncated_normal_statistics():
    n = initializer(Normal(sigma=0.5, mean=1.0), (100, 100)).asnumpy().astype(np.float64)
    # the sample mean and std of 10^4 draws are within 5 standard errors (0.005 and ~0.0035)
    assert abs(n.mean() - 1.0) < 5 * 0.5 / 100 and abs(n.std() - 0.5) < 5 * 0.5 / math.sqrt(2 * 10 ** 4)
    t = initializer(TruncatedNormal(sigma=0.1, a=-2, b=2), (100, 100)).asnumpy()
    assert np.abs(t).max() <= 0.2 + 1e-7
    assert np.array_equal(initializer("zeros", (2, 3)).asnumpy(), np.zeros((2, 3), np.float32))
    assert np.array_equal(initializer(2.5, (2,), ms.float16).asnumpy(), np.full(2, 2.5, np.float16))


# -- losses ------------------------------------------------------------------------------------------

def test_regression_losses(setting):
    x, y = f32(4, 3), f32(4, 3)
    close(run(nn.MSELoss(), x, y), ((x - y) ** 2).mean())
    close(run(nn.MSELoss(reduction="sum"), x, y), ((x - y) ** 2).sum())
    close(run(nn.L1Loss(reduction="none"), x, y), np.abs(x - y))


def _log_softmax(x):
    x = x.astype(np.float64)
    s = x - x.max(-1, keepdims=True)
    return s - np.log(np.exp(s).sum(-1, keepdims=True))


def test_softmax_cross_entropy(setting):
    logits, labels = f32(5, 4), np.array([0, 3, 1, 1, 2], np.int32)
    picked = -_log_softmax(logits)[np.arange(5), labels]
    close(run(nn.SoftmaxCrossEntropyWithLogits(sparse=True), logits, labels), picked)
    close(run(nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), logits, labels), picked.mean())
    probs = np.eye(4, dtype=np.float32)[labels]
    close(run(nn.SoftmaxCrossEntropyWithLogits(), logits, probs), picked)


def test_cross_entropy_loss(setting):
    logits, labels = f32(5, 4), np.array([0, 3, -100, 1, 2], np.int32)
    log_p = _log_softmax(logits)
    weight = np.array([1.0, 2.0, 0.5, 1.5], np.float32)
    kept = labels != -100
    rows = np.arange(5)[kept]
    w = weight[labels[kept]]
    want = -(log_p[rows, labels[kept]] * w).sum() / w.sum()
    close(run(nn.CrossEntropyLoss(weight=ms.Tensor(weight)), logits, labels), want)
    eps = 0.1
    smooth = -((1 - eps) * log_p[rows, labels[kept]] + eps * log_p[rows].mean(-1))
    close(run(nn.CrossEntropyLoss(label_smoothing=eps), logits, labels), smooth.mean())
    probs = RNG.dirichlet(np.ones(4), 5).astype(np.float32)
    close(run(nn.CrossEntropyLoss(reduction="sum"), logits, probs), -(probs * log_p).sum())


def test_bce_with_logits(setting):
    x, y = f32(3, 4, low=-30, high=30), RNG.integers(0, 2, (3, 4)).astype(np.float32)
    pos = np.array([2.0, 1.0, 0.5, 3.0], np.float32)
    xd = x.astype(np.float64)
    softplus = lambda v: np.logaddexp(0, v)  # noqa: E731
    want = (pos * y * softplus(-xd) + (1 - y) * softplus(xd)).mean()
    close(run(nn.BCEWithLogitsLoss(pos_weight=ms.Tensor(pos)), x, y), want)


def test_with_loss_cell_gradients_match_the_reference(setting):
    net = nn.SequentialCell([nn.Dense(6, 5, activation="gelu"), nn.Dense(5, 3)])
    loss_net = nn.WithLossCell(net, nn.MSELoss())
    assert loss_net.backbone_network is net
    x, y = f32(4, 6), f32(4, 3)
    loss, grads = ms.value_and_grad(loss_net, None, loss_net.trainable_params())(ms.Tensor(x), ms.Tensor(y))
    w1, b1, w2, b2 = (p.asnumpy().astype(np.float64) for p in loss_net.trainable_params())
    pre = x @ w1.T + b1
    t = np.tanh(math.sqrt(2 / math.pi) * (pre + 0.044715 * pre ** 3))
    h = 0.5 * pre * (1 + t)
    out = h @ w2.T + b2
    d_out = 2 * (out - y) / out.size
    close(loss.asnumpy(), ((out - y) ** 2).mean())
    close(grads[3].asnumpy(), d_out.sum(0))
    close(grads[2].asnumpy(), d_out.T @ h)


def test_errors_name_the_thing():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    with pytest.raises(nn.LayerError, match=r"Dense\(4, 2\): input \[3, 5\] must end in in_channels=4"):
        run(nn.Dense(4, 2), f32(3, 5))
    with pytest.raises(nn.LayerError, match="ids must be int32 or int64, got float32"):
        run(nn.Embedding(4, 2), f32(3))
    with pytest.raises(InitializerError, match="unknown initializer 'nope'"):
        initializer("nope", (2,))
    with pytest.raises(nn.LayerError, match="unknown activation 'swishy'"):
        nn.Dense(2, 2, activation="swishy")
    with pytest.raises(nn.LossError, match="reduction 'avg'"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(nn.LossError, match="class-index labels must be int32 or int64"):
        run(nn.SoftmaxCrossEntropyWithLogits(sparse=True), f32(2, 3), f32(2))
