"""The callbacks that come with the package, printing what MindSpore's print.

    LossMonitor(per_print_times=1)   "epoch: 1 step: 5, loss is 0.123" every per_print_times steps; a NaN
                                     or inf loss stops training with a ValueError naming epoch and step
    TimeMonitor(data_size=None)      "Train epoch time: 12.345 ms, per step time: 1.234 ms" per epoch
    LearningRateScheduler(fn)        after each step: lr = fn(lr, cur_step_num), written into the
                                     optimizer's learning_rate Parameter (read at run time: no recompile)
    ProgressBar()                    on a terminal, a tqdm bar with steps/s and the loss; otherwise one
                                     plain line per epoch (log files stay readable)

ModelCheckpoint is in model_checkpoint.py; the base they share, Callback, in base.py.
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from graphkernel.tensor import Parameter
from graphkernel.train.callback.base import Callback, CallbackError, loss_value


def _non_negative_int(cls: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CallbackError(f"{cls}: {name} must be a non-negative int, got {value!r}")
    return value


class LossMonitor(Callback):
    def __init__(self, per_print_times=1):
        self._per_print_times = _non_negative_int("LossMonitor", "per_print_times", per_print_times)
        self._last_print_time = 0

    def step_end(self, run_context):
        cb_params = run_context.original_args()
        epoch = cb_params.get("cur_epoch_num", 1)
        step_in_epoch = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
        loss = loss_value(cb_params.net_outputs)
        if isinstance(loss, float) and not math.isfinite(loss) and not isinstance(cb_params.net_outputs, tuple):
            raise ValueError(f"In epoch: {epoch} step: {step_in_epoch}, loss is NAN or INF, training process cannot "
                             "continue, terminating training.")
        if self._per_print_times and cb_params.cur_step_num - self._last_print_time >= self._per_print_times:
            self._last_print_time = cb_params.cur_step_num
            print(f"epoch: {epoch} step: {step_in_epoch}, loss is {loss}", flush=True)


class TimeMonitor(Callback):
    def __init__(self, data_size=None):
        if data_size is not None and (isinstance(data_size, bool) or not isinstance(data_size, int)
                                      or data_size < 1):
            raise CallbackError(f"TimeMonitor: data_size must be a positive int or None, got {data_size!r}")
        self.data_size = data_size
        self.epoch_time = time.time()

    def epoch_begin(self, run_context):
        self.epoch_time = time.time()

    def epoch_end(self, run_context):
        epoch_ms = (time.time() - self.epoch_time) * 1000
        cb_params = run_context.original_args()
        steps = cb_params.get("batch_num") or self.data_size
        if not steps:
            raise CallbackError("TimeMonitor: the steps of an epoch are unknown; give data_size")
        mode = cb_params.get("mode", "")
        print(f"{mode.title()} epoch time: {epoch_ms:5.3f} ms, per step time: {epoch_ms / steps:5.3f} ms", flush=True)


class LearningRateScheduler(Callback):
    def __init__(self, learning_rate_function):
        if not callable(learning_rate_function):
            raise CallbackError("LearningRateScheduler: learning_rate_function must be callable (lr, step) -> lr")
        self.learning_rate_function = learning_rate_function

    def step_end(self, run_context):
        cb_params = run_context.original_args()
        rate = getattr(cb_params.optimizer, "learning_rate", None)
        if not isinstance(rate, Parameter) or rate.asnumpy().size != 1:
            raise CallbackError("LearningRateScheduler needs an optimizer with one float learning rate (a "
                                "Parameter learning_rate), not a per-step list, a schedule or groups of rates")
        lr = float(rate.asnumpy().reshape(-1)[0])
        new_lr = self.learning_rate_function(lr, cb_params.cur_step_num)
        if not math.isclose(lr, new_lr, rel_tol=1e-10):
            rate.set_data(np.full(rate.shape, new_lr, rate.asnumpy().dtype))


class ProgressBar(Callback):
    """Steps done, steps/s and the loss: a tqdm bar on a terminal, else one plain line per epoch."""

    def __init__(self, file=None):
        self.file = file
        self._bar = None

    def on_train_begin(self, run_context):
        cb_params = run_context.original_args()
        out = self.file if self.file is not None else sys.stderr
        self._total = cb_params.epoch_num * cb_params.batch_num
        self._done = 0
        self._start = time.perf_counter()
        if hasattr(out, "isatty") and out.isatty():
            from tqdm import tqdm   # a third-party import on first use: `import graphkernel` stays quick
            self._bar = tqdm(total=self._total, unit="step", file=out, dynamic_ncols=True)
        else:
            self._bar, self._out = None, out

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        done, self._done = cb_params.cur_step_num - self._done, cb_params.cur_step_num
        if self._bar is not None:
            self._bar.update(done)
            self._bar.set_postfix(loss=f"{loss_value(cb_params.net_outputs):.6g}", refresh=False)

    def on_train_epoch_end(self, run_context):
        if self._bar is not None:
            return
        cb_params = run_context.original_args()
        seconds = time.perf_counter() - self._start
        rate = self._done / seconds if seconds > 0 else float("inf")
        print(f"epoch {cb_params.cur_epoch_num}/{cb_params.epoch_num}: step {self._done}/{self._total}, "
              f"{rate:.1f} steps/s, loss {loss_value(cb_params.net_outputs):.6g}", file=self._out, flush=True)

    def on_train_end(self, run_context):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
