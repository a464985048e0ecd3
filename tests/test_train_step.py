"""A training step (TrainOneStepCell, the loss-scale cell, a jitted step calling optimizer(grads)) is one
compiled graph that updates its Parameters in place: against a float64 run of the same step, fused
against unfused, Parameter storage unchanged, threads serialized, overflow skipping the update, the
compile key holding what changes the graph and nothing that is read at run time."""
import threading

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Parameter, Tensor, context, nn, ops
from graphkernel.cell import Cell
from tests.test_bert_grads import EncoderLayer, WithMSE


def _bert(hidden, heads, dtype=ms.float32, seed=0):
    ms.set_seed(seed)
    return WithMSE(EncoderLayer(hidden, heads, dtype))


def _data(hidden, seq, dtype=np.float32, batch=2):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, seq, hidden)).astype(dtype)
    mask = np.zeros((batch, 1, 1, seq), dtype)
    mask[1, ..., seq - 2:] = -10000.0
    target = rng.standard_normal((batch, seq, hidden)).astype(dtype)
    return [Tensor(a) for a in (x, mask, target)]


def _adamw_step(net, lr=1e-4):
    params = net.trainable_params()
    opt = nn.AdamWeightDecay([{"params": params, "weight_decay": 0.01}], lr, eps=1e-6)
    return nn.TrainOneStepCell(net, opt)


def _losses(target, fuse, hidden, heads, seq, steps, dtype=ms.float32, flags=""):
    context.set_context(device_target=target, enable_graph_kernel=fuse, graph_kernel_flags=flags)
    net = _bert(hidden, heads, dtype)
    if dtype == ms.float64:   # the same initial values as the float32 network, in float64
        for p, q in zip(net.get_parameters(), _bert(hidden, heads).get_parameters()):
            p.set_data(q.asnumpy().astype(np.float64))
    step = _adamw_step(net)
    data = _data(hidden, seq, np.float64 if dtype == ms.float64 else np.float32)
    return np.array([float(step(*data).asnumpy()) for _ in range(steps)]), step


def _check_bert(hidden, heads, seq, steps=4):
    reference, _ = _losses("CPU", False, hidden, heads, seq, steps, ms.float64)
    unfused, _ = _losses("Ascend", False, hidden, heads, seq, steps)
    fused, cell = _losses("Ascend", True, hidden, heads, seq, steps)
    np.testing.assert_allclose(unfused, reference, rtol=2e-5)
    np.testing.assert_allclose(fused, reference, rtol=2e-5)
    np.testing.assert_allclose(fused, unfused, rtol=1e-5)
    assert reference[-1] < reference[0]
    return cell


def test_bert_layer_step_matches_float64_and_unfused():
    _check_bert(hidden=64, heads=4, seq=16)


@pytest.mark.slow
def test_bert_large_layer_step_matches_float64_and_unfused():
    _check_bert(hidden=1024, heads=16, seq=128)


def test_step_updates_every_parameter_in_place(setting):
    net = _bert(32, 4)
    step = _adamw_step(net)
    params = step.get_parameters()
    pointers = [p.data_ptr() for p in params]
    before = [p.asnumpy() for p in params]
    data = _data(32, 8)
    for _ in range(3):
        step(*data)
    assert [p.data_ptr() for p in params] == pointers
    changed = {p.name for p, b in zip(params, before) if not np.array_equal(p.asnumpy(), b)}
    assert {p.name for p in net.trainable_params()} <= changed
    assert int(step.optimizer.global_step.asnumpy()[0]) == 3


def test_fused_updates_write_in_place_without_copies():
    context.set_context(device_target="Ascend", enable_graph_kernel=True,
                        graph_kernel_flags="--enable_parallel_fusion")
    step = _adamw_step(_bert(32, 4))
    kernels = step.compile(*_data(32, 8)).kernels
    optimizer = [k for k in kernels if k.phase == "optimizer"]
    assert optimizer, "the updates are kernels of phase optimizer"
    assert not [k for k in kernels if k.op_types == ("Assign",)], "every update is written in place"


def test_bert_layer_updates_take_at_most_four_optimizer_kernels():
    """Multi-tensor fusion: the AdamWeightDecay updates of every Parameter of a BERT layer, whatever its
    shape, in a few launches (the step counter, and one per update kernel), all written in place."""
    context.set_context(device_target="Ascend", enable_graph_kernel=True, graph_kernel_flags="")
    kernels = _adamw_step(_bert(32, 4)).compile(*_data(32, 8)).kernels
    optimizer = [k for k in kernels if k.phase == "optimizer"]
    assert len(optimizer) <= 4, [(k.name, k.variant) for k in optimizer]
    assert "multi_tensor" in [k.variant for k in optimizer]


def test_parallel_fusion_keeps_reads_of_old_values(setting):
    """LayerNorm's gamma is read by the backward (dx) and rewritten by its update; merged updates and
    the in-place writes must leave every reader the old value: the same losses as the reference."""
    context.set_context(graph_kernel_flags="--enable_parallel_fusion")
    got, _ = _losses(context.get_context("device_target"), context.get_context("enable_graph_kernel"),
                     32, 4, 8, 3, flags="--enable_parallel_fusion")
    context.set_context(mode=context.GRAPH_MODE)
    expect, _ = _losses("CPU", False, 32, 4, 8, 3)
    np.testing.assert_allclose(got, expect, rtol=1e-5)


def test_jitted_step_with_optimizer_call():
    net = _bert(32, 4)
    opt = nn.Adam(net.trainable_params(), 1e-3)
    grad_fn = ms.value_and_grad(net, None, opt.parameters)

    @ms.jit
    def train_step(x, mask, target):
        loss, grads = grad_fn(x, mask, target)
        opt(grads)
        return loss

    data = _data(32, 8)
    losses = [float(train_step(*data).asnumpy()) for _ in range(4)]
    assert losses[-1] < losses[0]
    assert int(opt.global_step.asnumpy()[0]) == 4


def test_two_threads_serialize_their_steps():
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    data = _data(32, 8)
    sequential = _adamw_step(_bert(32, 4))
    for _ in range(40):
        sequential(*data)
    threaded = _adamw_step(_bert(32, 4))
    threaded(*data)   # compile first
    errors = []

    def run(n):
        try:
            for _ in range(n):
                threaded(*data)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    workers = [threading.Thread(target=run, args=(n,)) for n in (19, 20)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    for p, q in zip(threaded.get_parameters(), sequential.get_parameters()):
        np.testing.assert_array_equal(p.asnumpy(), q.asnumpy(), err_msg=p.name)


class Spiky(Cell):
    """loss = mean(w * x); a 'spike' input of inf makes every gradient inf."""

    def __init__(self):
        super().__init__()
        self.w = Parameter(np.linspace(-1, 1, 8).astype(np.float32), name="w")

    def construct(self, x):
        return ops.ReduceMean()(self.w * x, ())


def _loss_scale_step(scale_window=2):
    net = Spiky()
    manager = nn.DynamicLossScaleUpdateCell(loss_scale_value=1024.0, scale_factor=2, scale_window=scale_window)
    return net, nn.TrainOneStepWithLossScaleCell(net, nn.SGD(net.trainable_params(), 0.1), manager)


def test_overflow_skips_the_update_and_lowers_the_scale(setting):
    net, step = _loss_scale_step()
    ok = Tensor(np.ones(8, np.float32))
    spike = Tensor(np.full(8, np.inf, np.float32))
    loss, overflow, scale = step(ok)
    assert not bool(overflow.asnumpy()) and float(scale.asnumpy()) == 1024.0
    np.testing.assert_allclose(net.w.asnumpy(), np.linspace(-1, 1, 8) - 0.1 / 8, rtol=1e-6)
    before = net.w.asnumpy()
    counter = step.optimizer.global_step.asnumpy()
    loss, overflow, scale = step(spike)
    assert bool(overflow.asnumpy())
    assert np.array_equal(net.w.asnumpy(), before), "an overflowing step leaves the Parameters' bits"
    assert np.array_equal(step.optimizer.global_step.asnumpy(), counter)
    assert float(step.scale_sense.asnumpy()) == 512.0
    step(ok)
    step(ok)   # scale_window (2) steps without overflow since the last one: the scale doubles
    assert float(step.scale_sense.asnumpy()) == 1024.0
    assert step.trace_count <= 1, "the scale and the overflow are run-time values: one compile"


def test_fixed_loss_scale_divides_the_gradients():
    net = Spiky()
    step = nn.TrainOneStepWithLossScaleCell(net, nn.SGD(net.trainable_params(), 0.1),
                                            nn.FixedLossScaleUpdateCell(128.0))
    step(Tensor(np.ones(8, np.float32)))
    np.testing.assert_allclose(net.w.asnumpy(), np.linspace(-1, 1, 8) - 0.1 / 8, rtol=1e-6)
    assert float(step.scale_sense.asnumpy()) == 128.0


def test_training_mode_and_requires_grad_are_in_the_compile_key():
    net = _bert(32, 4)
    step = _adamw_step(net)
    data = _data(32, 8)
    step(*data)
    assert step.trace_count == 1
    step.set_train(True)
    step(*data)
    assert step.trace_count == 2
    step(*data)
    assert step.trace_count == 2
    net.layer.output.bias.requires_grad = False
    step(*data)
    assert step.trace_count == 3


def test_assign_errors_name_the_variable():
    with pytest.raises(ms.GraphKernelError, match="must be a Parameter"):
        ops.assign(Tensor(np.ones(2, np.float32)), 1.0)
    p = Parameter(np.ones(3, np.float32), name="p")
    with pytest.raises(ms.GraphKernelError, match="Parameter p has shape"):
        ops.assign(p, Tensor(np.ones(4, np.float32)))


def test_checkpoint_round_trip_resumes_training_bit_for_bit(tmp_path):
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    data = _data(32, 8)
    step = _adamw_step(_bert(32, 4))
    for _ in range(3):
        step(*data)
    path = str(tmp_path / "step3.safetensors")
    ms.save_checkpoint(step, path)
    uninterrupted = [step(*data).asnumpy() for _ in range(3)]
    resumed_step = _adamw_step(_bert(32, 4, seed=99))   # other initial values: the file must set them all
    not_loaded, _ = ms.load_param_into_net(resumed_step, ms.load_checkpoint(path))
    assert not_loaded == []
    resumed = [resumed_step(*data).asnumpy() for _ in range(3)]
    for a, b in zip(uninterrupted, resumed):
        np.testing.assert_array_equal(a, b)


class TwiceW(Cell):
    """W is read twice in the forward; in the backward, dW is complete before dx = dh W^T reads W for
    V's gradient: W's update must wait for that last read."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(5)
        self.v = Parameter(rng.standard_normal((8, 16)).astype(np.float32) * 0.3, name="v")
        self.w = Parameter(rng.standard_normal((16, 16)).astype(np.float32) * 0.3, name="w")

    def construct(self, x):
        h = ops.tanh(ops.matmul(x, self.v))
        y = ops.matmul(ops.tanh(ops.matmul(h, self.w)), self.w)
        return ops.ReduceMean()(y * y, ())


def test_update_waits_for_the_last_backward_read(setting):
    x = Tensor(np.random.default_rng(6).standard_normal((4, 8)).astype(np.float32))
    got_net = TwiceW()
    step = nn.TrainOneStepCell(got_net, nn.SGD(got_net.trainable_params(), 0.5))
    got = [float(step(x).asnumpy()) for _ in range(3)]
    context.set_context(mode=context.GRAPH_MODE, device_target="CPU", enable_graph_kernel=False)
    ref_net = TwiceW()
    ref_step = nn.TrainOneStepCell(ref_net, nn.SGD(ref_net.trainable_params(), 0.5))
    expect = [float(ref_step(x).asnumpy()) for _ in range(3)]
    np.testing.assert_allclose(got, expect, rtol=1e-5)
    for p, q in zip(got_net.get_parameters(), ref_net.get_parameters()):
        np.testing.assert_allclose(p.asnumpy(), q.asnumpy(), rtol=1e-5, atol=1e-6)
