"""Model.train / eval / predict with MindSpore's semantics, and loop sinking: a sink of N steps staged once
and run by one CompiledGraph.run_steps call gives the losses and Parameters of N plain steps, bit for bit,
on the reference and on the device fused and unfused; the sink splits epochs as MindSpore's does; the
iterations_per_loop context key and mix_compile_mode exclude each other."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, context, nn
from graphkernel.context import ContextError
from graphkernel.train import (Callback, DynamicLossScaleManager, FixedLossScaleManager, LossMonitor, Model,
                               ModelError, NumpySlicesDataset)
from graphkernel.train.dataset import DatasetError
from tests.tolerance import assert_close


def _net(seed=0):
    ms.set_seed(seed)
    return nn.SequentialCell([nn.Dense(4, 8, activation="relu"), nn.Dense(8, 2)])


def _data(rows=24, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, 4)).astype(np.float32), rng.standard_normal((rows, 2)).astype(np.float32)


def _model(seed=0, **kw):
    net = _net(seed)
    return Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9), **kw), net


class Recorder(Callback):
    """Every hook called, with the step counters it saw, and each step's loss."""

    def __init__(self):
        self.calls, self.losses = [], []

    def __getattribute__(self, name):
        if name.startswith("on_train_"):
            def hook(run_context):
                cb = run_context.original_args()
                self.calls.append((name, cb.cur_epoch_num, cb.cur_step_num))
                if name == "on_train_step_end":
                    self.losses.append(float(cb.net_outputs.asnumpy()))
            return hook
        return object.__getattribute__(self, name)


def _params(net):
    return [p.asnumpy().copy() for p in net.get_parameters()]


@pytest.mark.parametrize("target,fuse", [("CPU", False), ("Ascend", False), ("Ascend", True)])
def test_a_sink_equals_the_same_steps_run_one_by_one(target, fuse):
    context.set_context(device_target=target, enable_graph_kernel=fuse)
    x, y = _data()
    data = NumpySlicesDataset((x, y), shuffle=False).batch(4)     # 6 batches
    plain, plain_net = _model()
    rec = Recorder()
    plain.train(2, data, callbacks=[rec])                          # 12 steps
    sunk, sunk_net = _model()
    sink_rec = Recorder()
    sunk.train(4, data, callbacks=[sink_rec], dataset_sink_mode=True, sink_size=3)   # 4 sinks of 3
    assert len(rec.losses) == 12 and len(sink_rec.losses) == 4
    # each sink's reported loss is its last step's; the sinks run on through the dataset's passes
    assert_close(np.array(sink_rec.losses), np.array(rec.losses)[2::3], bitwise=True)
    for a, b in zip(_params(sunk_net), _params(plain_net)):
        assert_close(a, b, bitwise=True)


def test_run_steps_returns_every_loss_of_the_sink(cpu):
    x, y = _data(rows=4)
    xs, ys = np.stack([x] * 3), np.stack([y] * 3)   # one batch three times: the loss must fall
    plain, plain_net = _model()
    one_by_one = [float(plain.train_network(Tensor(a), Tensor(b)).asnumpy()) for a, b in zip(xs, ys)]
    sunk, _ = _model()
    compiled = sunk.train_network.compile(Tensor(xs[0]), Tensor(ys[0]))
    (losses,) = compiled.run_steps([xs, ys])
    assert losses.shape == (3,)
    assert_close(losses, np.array(one_by_one, np.float32), bitwise=True)
    assert one_by_one[2] < one_by_one[0]


def test_run_steps_refuses_inputs_of_the_wrong_shape(cpu):
    model, _ = _model()
    x, y = _data(rows=4)
    compiled = model.train_network.compile(Tensor(x), Tensor(y))
    with pytest.raises(ms.GraphKernelError, match=r"staged input 1: got float32\[2, 4, 3\]"):
        compiled.run_steps([np.stack([x, x]), np.zeros((2, 4, 3), np.float32)])
    with pytest.raises(ms.GraphKernelError, match="takes 2 staged inputs, got 1"):
        compiled.run_steps([np.stack([x, x])])


def test_sink_callbacks_see_one_step_per_sink_as_mindspore(cpu):
    x, y = _data()
    model, _ = _model()
    rec = Recorder()
    model.train(2, NumpySlicesDataset((x, y), shuffle=False).batch(4), callbacks=[rec], dataset_sink_mode=True,
                sink_size=2)
    assert rec.calls == [("on_train_begin", 0, 0),
                         ("on_train_epoch_begin", 1, 0), ("on_train_step_begin", 1, 2), ("on_train_step_end", 1, 2),
                         ("on_train_epoch_end", 1, 2),
                         ("on_train_epoch_begin", 2, 2), ("on_train_step_begin", 2, 4), ("on_train_step_end", 2, 4),
                         ("on_train_epoch_end", 2, 4), ("on_train_end", 2, 4)]


def test_loss_monitor_prints_mindspores_line(cpu, capsys):
    x, y = _data(rows=12)
    data = NumpySlicesDataset((x, y), shuffle=False).batch(4)
    model, _ = _model()
    rec = Recorder()
    model.train(2, data, callbacks=[LossMonitor(per_print_times=2), rec])
    lines = capsys.readouterr().out.splitlines()
    # steps 2, 4, 6 of 6: the step within the epoch, the loss as float
    assert lines == [f"epoch: {e} step: {s}, loss is {rec.losses[k]}"
                     for e, s, k in ((1, 2, 1), (2, 1, 3), (2, 3, 5))]
    model.train(2, data, callbacks=[LossMonitor()], dataset_sink_mode=True)   # sink_size -1: the dataset
    assert [line.split(",")[0] for line in capsys.readouterr().out.splitlines()] == ["epoch: 1 step: 3",
                                                                                    "epoch: 2 step: 3"]


def test_loss_monitor_stops_on_a_nan_loss(cpu):
    x, y = _data(rows=8)
    y[0, 0] = np.nan
    model, _ = _model()
    with pytest.raises(ValueError, match="In epoch: 1 step: 1, loss is NAN or INF"):
        model.train(1, [(x[:4], y[:4]), (x[4:], y[4:])], callbacks=[LossMonitor()])


def test_request_stop_ends_training_after_the_step(cpu):
    class StopAt3(Callback):
        def on_train_step_end(self, run_context):
            if run_context.original_args().cur_step_num == 3:
                run_context.request_stop()

    x, y = _data()
    model, _ = _model()
    rec = Recorder()
    model.train(5, NumpySlicesDataset((x, y), shuffle=False).batch(4), callbacks=[StopAt3(), rec])
    assert [c for c in rec.calls if c[0] == "on_train_step_end"][-1][2] == 3
    assert rec.calls[-1] == ("on_train_end", 1, 3)


def test_cb_params_hold_mindspores_fields(cpu):
    seen = {}

    class Grab(Callback):
        def on_train_step_end(self, run_context):
            seen.update(run_context.original_args())

    x, y = _data(rows=8)
    model, net = _model()
    model.train(1, [(x[:4], y[:4]), (x[4:], y[4:])], callbacks=Grab())
    for key in ("train_network", "epoch_num", "batch_num", "mode", "loss_fn", "optimizer", "train_dataset",
                "list_callback", "train_dataset_element", "network", "cur_step_num", "cur_epoch_num",
                "dataset_sink_mode", "net_outputs", "last_save_ckpt_step", "latest_ckpt_file"):
        assert key in seen, key
    assert seen["network"] is net and seen["mode"] == "train" and seen["batch_num"] == 2


def test_eval_returns_the_metrics_of_the_numpy_formulas(cpu):
    x, y = _data(rows=10)
    model, net = _model(metrics={"mae", "mse", "loss"})
    data = NumpySlicesDataset((x, y), shuffle=False).batch(4)      # 4, 4, 2 rows
    result = model.eval(data)
    pred = net(Tensor(x)).asnumpy().astype(np.float64)
    batch_losses = [np.mean((pred[i:i + 4] - y[i:i + 4]) ** 2) for i in (0, 4, 8)]
    assert set(result) == {"mae", "mse", "loss"}
    assert_close(np.float32(result["mae"]), np.float32(np.abs(pred - y).sum() / 10))
    assert_close(np.float32(result["mse"]), np.float32(((pred - y) ** 2).sum() / 10))
    assert_close(np.float32(result["loss"]), np.float32(np.mean(batch_losses)))


def test_eval_accuracy_and_predict(cpu):
    ms.set_seed(1)
    net = nn.Dense(4, 3)
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), metrics={"accuracy"})
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, 4)).astype(np.float32)
    logits = model.predict(x).asnumpy()
    labels = rng.integers(0, 3, 9).astype(np.int32)
    expected = np.mean(logits.argmax(1) == labels)
    assert model.eval([(x, labels)]) == {"accuracy": pytest.approx(expected)}


def test_fixed_loss_scale_without_drop_equals_a_scaled_optimizer(cpu):
    x, y = _data(rows=8)
    batches = [(x[:4], y[:4]), (x[4:], y[4:])]
    net = _net()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9, loss_scale=64.0)
    Model(net, nn.MSELoss(), opt, loss_scale_manager=FixedLossScaleManager(64.0, drop_overflow_update=False)
          ).train(2, batches)
    ref_net = _net()
    ref = Model(ref_net, nn.MSELoss(), nn.Momentum(ref_net.trainable_params(), 0.05, 0.9))
    ref.train(2, batches)
    for a, b in zip(_params(net), _params(ref_net)):
        assert_close(a, b)


def test_dynamic_loss_scale_drops_overflowing_steps_and_tracks_the_scale(cpu):
    x, y = _data(rows=8)
    manager = DynamicLossScaleManager(init_loss_scale=2.0 ** 10, scale_factor=2, scale_window=2)
    model, net = _model(loss_scale_manager=manager)
    before = _params(net)
    bad = x.copy()
    bad[0, 0] = np.inf
    model.train(1, [(bad[:4], y[:4])])            # overflow: no update, the scale halves
    for a, b in zip(_params(net), before):
        assert_close(a, b, bitwise=True)
    assert manager.get_loss_scale() == 2.0 ** 9
    model.train(1, [(x[:4], y[:4]), (x[4:], y[4:])])   # two clean steps: the scale doubles
    assert manager.get_loss_scale() == 2.0 ** 10
    assert float(model.train_network.scale_sense.asnumpy()) == 2.0 ** 10


def test_amp_levels_map_onto_precision_modes(cpu):
    x, y = _data(rows=8)
    seen = {}

    class Mode(Callback):
        def on_train_step_end(self, run_context):
            seen["mode"] = context.get_context("precision_mode")

    for level, mode in (("O0", "must_keep_origin_dtype"), ("O3", "force_fp16")):
        model, net = _model(amp_level=level)
        model.train(1, [(x, y)], callbacks=Mode())
        assert seen["mode"] == mode
        assert context.get_context("precision_mode") == "must_keep_origin_dtype"   # restored
        assert all(p.asnumpy().dtype == np.float32 for p in net.get_parameters())
    o2, _ = _model(amp_level="O2")
    assert isinstance(o2.train_network, nn.TrainOneStepWithLossScaleCell)   # O2 brings a dynamic loss scale
    with pytest.raises(ModelError, match="amp_level 'O4' is not supported"):
        _model(amp_level="O4")


def test_model_refuses_what_it_cannot_use(cpu):
    net = _net()
    with pytest.raises(ModelError, match="loss_scale_manager needs an optimizer"):
        Model(net, nn.MSELoss(), loss_scale_manager=FixedLossScaleManager())
    with pytest.raises(ModelError, match="metrics need an eval_network"):
        Model(net, metrics={"mae"})
    with pytest.raises(ModelError, match="Model.eval needs metrics"):
        Model(net, nn.MSELoss()).eval([(np.zeros((1, 4), np.float32), np.zeros((1, 2), np.float32))])
    model, _ = _model()
    with pytest.raises(ModelError, match="sink_size must be -1 or a positive int, got 0"):
        model.train(1, [], sink_size=0)
    with pytest.raises(DatasetError, match="each batch must be \\(data, label\\), got 3 columns"):
        model.train(1, [(np.zeros((1, 4), np.float32),) * 3])
    x, y = _data(rows=6)
    ragged = NumpySlicesDataset((x, y), shuffle=False).batch(4)   # 4 rows, then 2
    with pytest.raises(DatasetError, match="a sink needs batches of one shape.*drop_remainder=True"):
        model.train(1, ragged, dataset_sink_mode=True)


def test_iterations_per_loop_is_the_steps_per_launch(cpu):
    x, y = _data()
    data = NumpySlicesDataset((x, y), shuffle=False).batch(4)
    context.set_context(iterations_per_loop=3)
    model, _ = _model()
    rec = Recorder()
    model.train(2, data, callbacks=[rec], dataset_sink_mode=True)
    assert [c[2] for c in rec.calls if c[0] == "on_train_step_end"] == [3, 6]
    with pytest.raises(ModelError, match="sink_size=2 differs from the context's iterations_per_loop=3"):
        model.train(1, data, dataset_sink_mode=True, sink_size=2)
    with pytest.raises(ModelError, match="iterations_per_loop=3 is set but dataset_sink_mode=False"):
        model.train(1, data)


def test_loop_sinking_and_mix_compile_mode_exclude_each_other(cpu):
    context.set_context(mix_compile_mode=True)
    with pytest.raises(ContextError, match="iterations_per_loop=4 with mix_compile_mode=True.*must stay 1"):
        context.set_context(iterations_per_loop=4)
    assert context.get_context("iterations_per_loop") == 1       # a refused setting changes nothing
    context.set_context(mix_compile_mode=False, iterations_per_loop=4)
    with pytest.raises(ContextError, match="mix_compile_mode=True"):
        context.set_context(mix_compile_mode=True)
    context.set_context(iterations_per_loop=1, mix_compile_mode=True)
    x, y = _data(rows=8)
    model, _ = _model()
    with pytest.raises(ModelError, match="loop sinking \\(2 steps per launch\\) with mix_compile_mode=True"):
        model.train(1, NumpySlicesDataset((x, y), shuffle=False).batch(4), dataset_sink_mode=True)


def test_sinking_needs_graph_mode(cpu):
    context.set_context(mode=context.PYNATIVE_MODE)
    x, y = _data(rows=8)
    model, _ = _model()
    with pytest.raises(ModelError, match="dataset_sink_mode=True needs GRAPH_MODE"):
        model.train(1, [(x, y)], dataset_sink_mode=True)


def test_a_sink_never_goes_through_the_cell_call_path(cpu, monkeypatch):
    x, y = _data()
    data = NumpySlicesDataset((x, y), shuffle=False).batch(4)
    model, _ = _model()
    model.train(1, data, dataset_sink_mode=True)        # compiles
    calls = []
    monkeypatch.setattr(type(model.train_network), "__call__", lambda self, *a: calls.append(a))
    model.train(2, data, dataset_sink_mode=True, sink_size=3)
    assert calls == []
    model.train(1, data)                                 # the plain loop calls the cell every step
    assert len(calls) == 6


def test_a_sink_with_dropout_and_a_dynamic_loss_scale_equals_plain_steps(cpu):
    def build():
        ms.set_seed(3)
        net = nn.SequentialCell([nn.Dense(4, 8, activation="relu"), nn.Dropout(p=0.25), nn.Dense(8, 2)])
        manager = DynamicLossScaleManager(init_loss_scale=2.0 ** 8, scale_factor=2, scale_window=2)
        return Model(net, nn.MSELoss(), nn.Adam(net.trainable_params(), 1e-2), loss_scale_manager=manager), net

    x, y = _data()
    data = NumpySlicesDataset((x, y), shuffle=False).batch(4)
    plain, plain_net = build()
    losses = []

    class Grab(Callback):
        def on_train_step_end(self, run_context):
            losses.append(run_context.original_args().net_outputs[0].asnumpy().copy())

    plain.train(1, data, callbacks=Grab())
    sunk, sunk_net = build()
    seen = {}

    class GrabSink(Callback):
        def on_train_step_end(self, run_context):
            seen["all"] = run_context.original_args().sink_outputs

    sunk.train(1, data, callbacks=GrabSink(), dataset_sink_mode=True)
    loss, overflow, scale = seen["all"]                   # every step's outputs, stacked
    assert loss.shape == (6,) and overflow.shape == (6,)
    assert_close(loss.asnumpy(), np.array(losses), bitwise=True)
    # the scale each step returns is scale_sense after its update cell ran, as MindSpore 2.10's cell returns it
    assert_close(scale.asnumpy(), np.array([256, 512, 512, 1024, 1024, 2048], np.float32), bitwise=True)
    for a, b in zip(_params(sunk_net), _params(plain_net)):
        assert_close(a, b, bitwise=True)
    assert sunk._loss_scale_manager.get_loss_scale() == plain._loss_scale_manager.get_loss_scale() == 2048


def test_eval_with_a_given_eval_network_and_indexes(cpu):
    class Eval(ms.nn.Cell):
        """(label, outputs, loss): the indexes say where each is."""

        def __init__(self, net):
            super().__init__()
            self.net, self.loss = net, nn.MSELoss()

        def construct(self, x, y):
            out = self.net(x)
            return y, out, self.loss(out, y)

    x, y = _data(rows=8)
    net = _net()
    model = Model(net, metrics={"mse", "loss"}, eval_network=Eval(net), eval_indexes=[2, 1, 0])
    result = model.eval([(x, y)])
    pred = net(Tensor(x)).asnumpy()
    assert_close(np.float32(result["mse"]), np.float32(((pred - y) ** 2).sum() / 8))
    assert_close(np.float32(result["loss"]), np.float32(((pred - y) ** 2).mean()))
    assert ms.Model is Model
    with pytest.raises(ModelError, match="eval_indexes must be a list of three indexes"):
        Model(net, metrics={"mse"}, eval_network=Eval(net), eval_indexes=[0, 1])


def test_eval_and_predict_leave_the_training_mode_as_it_was(cpu):
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(4, 8), nn.Dropout(p=0.5), nn.Dense(8, 2)])
    model = Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9), metrics={"mse"})
    x, y = _data(rows=8)
    assert net.training                                  # the train network set it
    w1, b1, w2, b2 = (p.asnumpy() for p in net.trainable_params())
    expected = (x @ w1.T + b1) @ w2.T + b2              # no dropout while predicting
    assert_close(model.predict(x).asnumpy(), expected.astype(np.float32))
    model.eval([(x, y)])
    assert net.training
