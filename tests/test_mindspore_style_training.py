"""A BERT-style pre-training step written the way MindSpore's official model code is written: a custom
Optimizer subclass updating through HyperMap + partial + MultitypeFuncGraph, a loss-scale cell
subclass with `if not overflow:` in its construct and MindSpore's overflow protocol, gradient clipping
in a jit method, a network using StridedSlice, Gather, OneHot and constant-Tensor slicing. Fusion on,
fusion off and the numpy reference train it alike, and the loss falls."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Parameter, Tensor, context, nn
from graphkernel.common import dtype as mstype
from graphkernel.common.api import jit
from graphkernel.nn.optim.optimizer import Optimizer
from graphkernel.ops import composite as C
from graphkernel.ops import functional as F
from graphkernel.ops import operations as P
from tolerance import assert_close

adam_opt = C.MultitypeFuncGraph("adam_opt")


@adam_opt.register("Tensor", "Tensor", "Tensor", "Tensor", "Tensor", "Tensor", "Tensor", "Tensor", "Tensor",
                   "Bool", "Bool")
def _update(beta1, beta2, eps, lr, weight_decay, param, m, v, gradient, decay_flag, optim_filter):
    if not optim_filter:
        return gradient
    next_m = beta1 * m + (1.0 - beta1) * gradient
    next_v = beta2 * v + (1.0 - beta2) * P.Square()(gradient)
    update = next_m / (eps + P.Sqrt()(next_v))
    if decay_flag:
        update = weight_decay * param + update
    next_param = param - P.Reshape()(lr * update, F.shape(param))
    next_param = F.depend(next_param, F.assign(param, next_param))
    next_param = F.depend(next_param, F.assign(m, next_m))
    return F.depend(next_param, F.assign(v, next_v))


class AdamLike(Optimizer):
    """AdamWeightDecay as a user writes it on MindSpore's Optimizer base."""

    def __init__(self, params, learning_rate, beta1=0.9, beta2=0.999, eps=1e-6):
        super().__init__(learning_rate, params)
        self.beta1 = Tensor(np.array([beta1], np.float32))
        self.beta2 = Tensor(np.array([beta2], np.float32))
        self.eps = Tensor(np.array([eps], np.float32))
        self.moments1 = self.parameters.clone(prefix="adam_m", init="zeros")
        self.moments2 = self.parameters.clone(prefix="adam_v", init="zeros")
        self.hyper_map = C.HyperMap()

    def construct(self, gradients):
        lr = self.get_lr()
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        return self.hyper_map(F.partial(adam_opt, self.beta1, self.beta2, self.eps, lr), self.weight_decay,
                              self.parameters, self.moments1, self.moments2, gradients, self.decay_flags,
                              self.optim_filter)


clip_grad = C.MultitypeFuncGraph("clip_grad")


@clip_grad.register("Number", "Number", "Tensor")
def _clip_grad(clip_type, clip_value, grad):
    dt = F.dtype(grad)
    if clip_type == 0:
        return C.clip_by_value(grad, F.cast(F.tuple_to_array((-clip_value,)), dt),
                               F.cast(F.tuple_to_array((clip_value,)), dt))
    return nn.ClipByNorm()(grad, F.cast(F.tuple_to_array((clip_value,)), dt))


grad_scale = C.MultitypeFuncGraph("grad_scale")


@grad_scale.register("Tensor", "Tensor")
def _grad_scale(scale, grad):
    return grad * P.Reciprocal()(scale)


class TinyBert(nn.Cell):
    """Embeddings (Gather, a slice of constant position ids), one Dense + GELU + LayerNorm layer, a pooler
    on the first token (StridedSlice + Squeeze), a masked-LM head tied to the embedding table, and the
    two losses with OneHot labels, as BertNetworkWithLoss computes them."""

    def __init__(self, vocab, hidden, seq, layers=1):
        super().__init__()
        rng = np.random.default_rng(7)
        self.embedding_table = Parameter(rng.standard_normal((vocab, hidden)).astype(np.float32) * 0.1)
        self.position_table = Parameter(rng.standard_normal((seq * 2, hidden)).astype(np.float32) * 0.1)
        self.position_ids = Tensor(np.arange(seq * 2).reshape(1, -1).astype(np.int32))
        self.layers = nn.CellList([nn.Dense(hidden, hidden, activation="gelu") for _ in range(layers)])
        self.layernorm = nn.LayerNorm((hidden,))
        self.pooler = nn.Dense(hidden, hidden, activation="tanh")
        self.nsp = nn.Dense(hidden, 2)
        self.output_bias = Parameter(np.zeros(vocab, np.float32))
        self.gather = P.Gather()
        self.slice = P.StridedSlice()
        self.squeeze = P.Squeeze(axis=1)
        self.onehot = P.OneHot()
        self.on_value, self.off_value = Tensor(1.0, mstype.float32), Tensor(0.0, mstype.float32)
        self.log_softmax = nn.LogSoftmax(axis=-1)
        self.vocab, self.hidden = vocab, hidden

    def construct(self, ids, positions, labels, weights, nsp_labels):
        batch, seq = F.shape(ids)
        x = self.gather(self.embedding_table, ids, 0)
        x = x + self.gather(self.position_table, self.position_ids[:, :seq], 0)
        x = P.Reshape()(x, (-1, self.hidden))
        for layer in self.layers:
            x = self.layernorm(x + layer(x))
        sequence = P.Reshape()(x, (batch, seq, self.hidden))
        first = self.squeeze(self.slice(sequence, (0, 0, 0), (batch, 1, self.hidden), (1, 1, 1)))
        nsp_log_probs = P.LogSoftmax()(self.nsp(self.pooler(first)))
        rng = F.tuple_to_array(F.make_range(batch))
        flat = P.Reshape()(positions + P.Reshape()(rng * seq, (-1, 1)), (-1,))
        masked = self.gather(x, flat, 0)
        logits = P.MatMul(transpose_b=True)(masked, self.embedding_table) + self.output_bias
        log_probs = self.log_softmax(logits)
        one_hot = self.onehot(P.Reshape()(labels, (-1,)), self.vocab, self.on_value, self.off_value)
        per_example = P.Neg()(P.ReduceSum()(log_probs * one_hot, (-1,)))
        label_weights = P.Reshape()(weights, (-1,))
        numerator = P.ReduceSum()(label_weights * per_example, ())
        denominator = P.ReduceSum()(label_weights, ()) + F.cast(F.tuple_to_array((1e-5,)), mstype.float32)
        nsp_one_hot = self.onehot(P.Reshape()(nsp_labels, (-1,)), 2, self.on_value, self.off_value)
        nsp_loss = P.ReduceMean()(P.Neg()(P.ReduceSum()(nsp_one_hot * nsp_log_probs, (-1,))), (-1,))
        return numerator / denominator + nsp_loss        # shape (1,), as BERT's loss


class LossScaleStep(nn.TrainOneStepWithLossScaleCell):
    """BertTrainOneStepWithLossScaleCell's construct."""

    def __init__(self, network, optimizer, scale_update_cell):
        super().__init__(network, optimizer, scale_update_cell)
        self.cast = P.Cast()
        self.degree = 1
        self.loss_scale = Parameter(Tensor(scale_update_cell.get_loss_scale(), dtype=mstype.float32))

    @jit
    def clip_grads(self, grads):
        return self.hyper_map(F.partial(clip_grad, 1, 1.0), grads)

    def construct(self, *inputs):
        loss = self.network(*inputs)
        status, scaling_sens = self.start_overflow_check(loss, self.loss_scale)
        grads = self.grad(self.network, self.weights)(*inputs, self.cast(scaling_sens, mstype.float32))
        grads = self.grad_reducer(grads)
        degree_sens = self.cast(scaling_sens * self.degree, mstype.float32)
        grads = self.hyper_map(F.partial(grad_scale, degree_sens), grads)
        grads = self.clip_grads(grads)
        cond = self.get_overflow_status(status, grads)
        overflow = self.loss_scaling_manager(self.loss_scale, cond)
        if not overflow:
            self.optimizer(grads)
        return loss, cond, scaling_sens.value()


def _batch(vocab, seq, batch, masked, rng):
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    positions = np.stack([rng.choice(seq, masked, replace=False) for _ in range(batch)]).astype(np.int32)
    labels = rng.integers(0, vocab, (batch, masked)).astype(np.int32)
    weights = np.ones((batch, masked), np.float32)
    weights[:, -1] = 0.0
    return [ids, positions, labels, weights, rng.integers(0, 2, (batch, 1)).astype(np.int32)]


def train(target, fused, steps, vocab=16, hidden=8, seq=6, batch=2, masked=3, layers=1, poison_first=False):
    context.reset_context()
    context.set_context(mode=context.GRAPH_MODE, device_target=target, enable_graph_kernel=fused)
    ms.set_seed(0)
    net = TinyBert(vocab, hidden, seq, layers)
    params = net.trainable_params()
    decay_filter = lambda x: "layernorm" not in x.name.lower() and "bias" not in x.name.lower()  # noqa: E731
    decay = list(filter(decay_filter, params))
    rest = list(filter(lambda x: not decay_filter(x), params))
    optimizer = AdamLike([{"params": decay, "weight_decay": 1e-2}, {"params": rest, "weight_decay": 0.0},
                          {"order_params": params}], learning_rate=nn.PolynomialDecayLR(1e-2, 0.0, steps, 1.0))
    step = LossScaleStep(net, optimizer, nn.DynamicLossScaleUpdateCell(2.0 ** 16, 2, 1000))
    arrays = _batch(vocab, seq, batch, masked, np.random.default_rng(3))
    poisoned = [a.copy() for a in arrays]
    poisoned[3][0, 0] = np.inf      # a label weight: the loss and its gradients are not finite
    rows = []
    for k in range(steps):
        before = [p.asnumpy() for p in params]
        loss, cond, scale_now = step(*[Tensor(a) for a in (poisoned if poison_first and k == 0 else arrays)])
        rows.append((loss.asnumpy(), bool(cond.asnumpy()), float(scale_now.asnumpy()),
                     [p.asnumpy() for p in params], before))
    return rows, step, optimizer


def _agree(runs):
    """Each step's loss within float32's tolerance, overflow and scale equal. The loss of step k is a
    function of every Parameter after step k - 1, so this compares the updates where they matter; the
    Parameters themselves are not compared element by element: Adam divides by sqrt(v) + eps, so an
    element whose gradient is near eps turns the last bits of its gradient into a visible difference."""
    (base_rows, *_), others = runs[0], runs[1:]
    for rows, *_ in others:
        for k, (a, b) in enumerate(zip(base_rows, rows)):
            assert_close(a[0], b[0], err_msg=f"loss of step {k}")
            assert a[1:3] == b[1:3], f"overflow and scale of step {k}"


@pytest.mark.grid
@pytest.mark.parametrize("fuse", [False, True], ids=["unfused", "fused"])
def test_a_bert_style_step_on_the_kernels_agrees_with_the_reference(fuse):
    runs = [train("CPU", False, 3), train("Ascend", fuse, 3)]
    _agree(runs)
    rows, step, optimizer = runs[1]
    losses = [float(r[0].reshape(-1)[0]) for r in rows]
    assert rows[0][0].shape == (1,) and losses[-1] < losses[0], losses
    assert [p.name for p in optimizer.parameters][:2] == ["embedding_table", "position_table"]
    assert optimizer.moments1[0].name == "adam_m.embedding_table"
    assert int(optimizer.global_step.asnumpy()[0]) == 3
    assert step.trace_count == 1


def test_an_overflow_keeps_the_parameters_and_lowers_the_scale():
    rows, step, optimizer = train("Ascend", True, 2, poison_first=True)
    loss, cond, scale, after, before = rows[0]
    assert cond and not rows[1][1], "the poisoned step overflows, the next one does not"
    assert scale == 2.0 ** 15, "the scale returned is the lowered one (scaling_sens.value())"
    for a, b in zip(after, before):
        assert_close(a, b, bitwise=True)
    assert int(optimizer.global_step.asnumpy()[0]) == sum(not r[1] for r in rows), "the optimizer ran only "\
        "on the steps without overflow"


@pytest.mark.slow
def test_a_bert_style_training_run_fused_unfused_and_reference_agree():
    kwargs = dict(vocab=64, hidden=32, seq=16, batch=4, masked=5, layers=2)
    runs = [train("CPU", False, 10, **kwargs), train("Ascend", False, 10, **kwargs),
            train("Ascend", True, 10, **kwargs)]
    _agree(runs)
    losses = [float(r[0].reshape(-1)[0]) for r in runs[2][0]]
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.grid
@pytest.mark.parametrize("mode", ["allfinite", "isfinite", "saturation", "gpu"])
def test_the_overflow_checks_of_the_base_cell(mode):
    """MindSpore's four ways, chosen by the cell's attributes: allfinite (the default here: one IsNan/IsInf
    reduction over the gradients), isfinite (IsFinite per gradient, AddN of the flags), saturation (the
    sticky float status, NPUClearFloatStatusV2 after the loss, NPUGetFloatStatusV2 after the gradients),
    gpu (FloatStatus per gradient, AddN). Each sees a NaN step and lets a finite one through."""
    context.set_context(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    net = nn.WithLossCell(nn.Dense(3, 1, weight_init="ones", bias_init="zeros"), nn.MSELoss())
    cell = nn.TrainOneStepWithLossScaleCell(net, nn.SGD(net.trainable_params(), 0.1),
                                            nn.FixedLossScaleUpdateCell(4.0))
    cell.enable_allfinite = mode == "allfinite"
    cell.ascend_910a_target = mode == "saturation"
    cell.gpu_target = mode == "gpu"
    y = Tensor(np.zeros((2, 1), np.float32))
    weight = net.trainable_params()[0]
    _, cond, scale = cell(Tensor(np.ones((2, 3), np.float32)), y)
    assert not bool(cond.asnumpy()) and float(scale.asnumpy()) == 4.0
    assert_close(weight.asnumpy(), np.full((1, 3), 1.0 - 0.1 * 6.0, np.float32))   # d/dw mean((3w)^2) = 6
    before = weight.asnumpy()
    _, cond, _ = cell(Tensor(np.full((2, 3), np.nan, np.float32)), y)
    assert bool(cond.asnumpy())
    assert_close(weight.asnumpy(), before, bitwise=True)
