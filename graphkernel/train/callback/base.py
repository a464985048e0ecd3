"""Callbacks for Model.train / Model.eval: the base a user subclasses, with MindSpore's hooks and order,
and what Model hands them (the built-in callbacks are in builtin.py).

    Callback                 on_train_begin, on_train_epoch_begin, on_train_step_begin, on_train_step_end,
                             on_train_epoch_end, on_train_end (and on_eval_*); each calls MindSpore's older
                             alias by default (begin, epoch_begin, step_begin, step_end, epoch_end, end)
    CallbackList             the callbacks of a call to Model.train/eval, run in order (Model's side)
    run_context.original_args() -> cb_params, a dict read by attribute: cur_epoch_num, cur_step_num,
                             batch_num, epoch_num, net_outputs, train_network, network, optimizer, loss_fn,
                             mode, dataset_sink_mode, train_dataset, train_dataset_element, list_callback, ...
    run_context.request_stop()   training stops after the current step (epoch in sink mode)

In sink mode a "step" of the hooks is one launch of sink_size steps (MindSpore's rule): cur_step_num
advances by sink_size and net_outputs are the last step's outputs.
"""
from __future__ import annotations

import numpy as np

from ir.errors import GraphKernelError
from graphkernel.tensor import Tensor


class CallbackError(GraphKernelError, ValueError):
    """A callback built from arguments it cannot use."""


class Callback:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    # MindSpore's older names: the on_* hooks call them unless overridden
    def begin(self, run_context):
        pass

    def epoch_begin(self, run_context):
        pass

    def epoch_end(self, run_context):
        pass

    def step_begin(self, run_context):
        pass

    def step_end(self, run_context):
        pass

    def end(self, run_context):
        pass

    def on_train_begin(self, run_context):
        self.begin(run_context)

    def on_train_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_train_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_train_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_train_step_end(self, run_context):
        self.step_end(run_context)

    def on_train_end(self, run_context):
        self.end(run_context)

    def on_eval_begin(self, run_context):
        self.begin(run_context)

    def on_eval_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_eval_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_eval_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_eval_step_end(self, run_context):
        self.step_end(run_context)

    def on_eval_end(self, run_context):
        self.end(run_context)


HOOKS = ("on_train_begin", "on_train_epoch_begin", "on_train_step_begin", "on_train_step_end",
         "on_train_epoch_end", "on_train_end", "on_eval_begin", "on_eval_epoch_begin", "on_eval_step_begin",
         "on_eval_step_end", "on_eval_epoch_end", "on_eval_end")


class CallbackList:
    """The callbacks of one train/eval call, run in the order given; entered as context managers."""

    def __init__(self, callbacks):
        if callbacks is None:
            callbacks = []
        elif isinstance(callbacks, Callback):
            callbacks = [callbacks]
        elif not isinstance(callbacks, (list, tuple)):
            raise CallbackError(f"callbacks must be a Callback or a list of them, got {type(callbacks).__name__}")
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise CallbackError(f"callbacks: {type(cb).__name__} is not a graphkernel.train.Callback")
        self.callbacks = list(callbacks)

    def __getattr__(self, hook):
        if hook not in HOOKS:
            raise AttributeError(hook)

        def run(run_context):
            for cb in self.callbacks:
                getattr(cb, hook)(run_context)
        return run


class CallbackParam(dict):
    """cb_params: a dict whose keys read as attributes."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"cb_params has no {key!r}; it has: {', '.join(sorted(self))}") from None

    def __setattr__(self, key, value):
        self[key] = value


class RunContext:
    def __init__(self, original_args):
        if not isinstance(original_args, dict):
            raise CallbackError(f"RunContext: original_args must be a dict, got {type(original_args).__name__}")
        self._original_args = original_args
        self._stop_requested = False

    def original_args(self):
        return self._original_args

    def request_stop(self):
        self._stop_requested = True

    def get_stop_requested(self) -> bool:
        return self._stop_requested


def loss_value(outputs):
    """The loss a callback shows: a Tensor's mean as a float; of a tuple (a loss-scaled step's (loss,
    overflow, scale)), its first element."""
    if isinstance(outputs, (tuple, list)):
        outputs = outputs[0]
    if isinstance(outputs, Tensor):
        return float(np.mean(outputs.asnumpy()))
    return outputs
