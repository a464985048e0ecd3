"""Callbacks during Model.train: MindSpore's aliases and context-manager protocol, TimeMonitor's line,
LearningRateScheduler (the rate read at run time: no recompile), ModelCheckpoint (names, keep_checkpoint_max,
the files load back), the progress bar (a tqdm bar on a terminal, plain lines otherwise)."""
import io
import os
import re

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import nn, train
from graphkernel.train import callback
from graphkernel.train import (Callback, CallbackError, CheckpointConfig, LearningRateScheduler, Model,
                               ModelCheckpoint, NumpySlicesDataset, ProgressBar, TimeMonitor)


def test_mindspore_callback_path_is_the_package_of_the_callbacks():
    """`mindspore.train.callback` (a package in MindSpore 2.x) names every callback graphkernel.train does."""
    assert callback.__path__, "graphkernel.train.callback is a package"
    for name in ("Callback", "RunContext", "LossMonitor", "TimeMonitor", "LearningRateScheduler", "ProgressBar",
                 "ModelCheckpoint", "CheckpointConfig", "CallbackError"):
        assert getattr(callback, name) is getattr(train, name), name


@pytest.fixture
def setup(cpu):
    ms.set_seed(0)
    net = nn.Dense(3, 2)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    rng = np.random.default_rng(0)
    data = NumpySlicesDataset((rng.standard_normal((12, 3)).astype(np.float32),
                               rng.standard_normal((12, 2)).astype(np.float32)), shuffle=False).batch(4)
    return Model(net, nn.MSELoss(), opt), net, opt, data


def test_old_aliases_and_context_manager_protocol(setup):
    model, _, _, data = setup
    events = []

    class Old(Callback):
        def __enter__(self):
            events.append("enter")
            return self

        def __exit__(self, *exc):
            events.append("exit")

        def begin(self, run_context):
            events.append("begin")

        def step_end(self, run_context):
            events.append(run_context.original_args().cur_step_num)

        def end(self, run_context):
            events.append("end")

    model.train(1, data, callbacks=Old())
    assert events == ["enter", "begin", 1, 2, 3, "end", "exit"]
    with pytest.raises(CallbackError, match="int is not a graphkernel.train.Callback"):
        model.train(1, data, callbacks=[Old(), 3])


def test_time_monitor_prints_mindspores_line(setup, capsys):
    model, _, _, data = setup
    model.train(2, data, callbacks=TimeMonitor())
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for line in lines:
        m = re.fullmatch(r"Train epoch time: (\d+\.\d{3}) ms, per step time: (\d+\.\d{3}) ms", line)
        assert m and float(m[2]) == pytest.approx(float(m[1]) / 3, abs=1e-3)


def test_learning_rate_scheduler_changes_the_rate_without_recompiling(setup):
    model, _, opt, data = setup
    seen = []

    def halve_every_two(lr, step):
        seen.append((round(lr, 6), step))
        return lr * 0.5 if step % 2 == 0 else lr

    model.train(1, data, callbacks=LearningRateScheduler(halve_every_two))
    assert seen == [(0.1, 1), (0.1, 2), (0.05, 3)]
    assert float(opt.learning_rate.asnumpy()) == pytest.approx(0.05)
    assert model.train_network.trace_count == 1
    with pytest.raises(CallbackError, match="must be callable"):
        LearningRateScheduler(0.1)


def test_learning_rate_scheduler_refuses_a_per_step_list(cpu):
    net = nn.Dense(3, 2)
    model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), [0.1, 0.1, 0.1]))
    x, y = np.zeros((2, 3), np.float32), np.zeros((2, 2), np.float32)
    with pytest.raises(CallbackError, match="one float learning rate"):
        model.train(1, [(x, y)], callbacks=LearningRateScheduler(lambda lr, step: lr))


def test_model_checkpoint_names_keeps_and_loads(setup, tmp_path):
    model, net, _, data = setup
    config = CheckpointConfig(save_checkpoint_steps=2, keep_checkpoint_max=2, append_info=["epoch_num"])
    ckpt = ModelCheckpoint(prefix="net", directory=tmp_path, config=config)
    model.train(2, data, callbacks=ckpt)        # steps 1..6: saves at 2, 4, 6 (6 is the end too)
    assert sorted(os.listdir(tmp_path)) == ["net-2_1.ckpt", "net-2_3.ckpt"]
    assert ckpt.latest_ckpt_file_name == str(tmp_path / "net-2_3.ckpt")
    saved = ms.load_checkpoint(ckpt.latest_ckpt_file_name)
    for p in net.get_parameters():
        assert np.array_equal(saved[p.name].asnumpy(), p.asnumpy())
    assert int(saved["epoch_num"].asnumpy()) == 2
    assert "moments.weight" in saved and "global_step" in saved      # the optimizer's state: training resumes
    assert int(saved["global_step"].asnumpy()[0]) == 6
    again = ModelCheckpoint(prefix="net", directory=tmp_path, config=CheckpointConfig(save_checkpoint_steps=3))
    model.train(1, data, callbacks=again)
    assert "net_1-1_3.ckpt" in os.listdir(tmp_path)      # the first run's files are kept: a new prefix


def test_checkpoint_config_and_prefix_errors(tmp_path):
    with pytest.raises(CallbackError, match="cannot both be 0"):
        CheckpointConfig(save_checkpoint_steps=0, save_checkpoint_seconds=0)
    with pytest.raises(CallbackError, match="keep_checkpoint_max must be a non-negative int"):
        CheckpointConfig(keep_checkpoint_max=-1)
    with pytest.raises(CallbackError, match="prefix must be a file name part"):
        ModelCheckpoint(prefix="a/b", directory=tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CallbackError, match="is a file"):
        ModelCheckpoint(directory=tmp_path / "file")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_plain_lines_off_a_terminal(setup):
    model, _, _, data = setup
    out = io.StringIO()
    model.train(2, data, callbacks=ProgressBar(file=out))
    lines = out.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == ["epoch 1/2: step 3/6", "epoch 2/2: step 6/6"]
    assert all(re.search(r"\d+\.\d steps/s, loss \S+$", line) for line in lines)


def test_progress_bar_on_a_terminal_is_a_tqdm_bar(setup):
    model, _, _, data = setup
    out = _Terminal()
    model.train(2, data, callbacks=ProgressBar(file=out))
    text = out.getvalue()
    assert "\r" in text and "6/6" in text and "step/s" in text and "loss=" in text
    assert "epoch 1/2" not in text
