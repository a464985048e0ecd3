"""MindSpore's `mindspore.train.callback`: `Callback` (the base a user subclasses), RunContext, and the
callbacks that come with the package.

    base.py               Callback, RunContext, CallbackParam, CallbackList (what Model runs them with)
    builtin.py            LossMonitor, TimeMonitor, LearningRateScheduler, ProgressBar
    model_checkpoint.py   ModelCheckpoint, CheckpointConfig
"""
from graphkernel.train.callback.base import Callback, CallbackError, RunContext
from graphkernel.train.callback.builtin import LearningRateScheduler, LossMonitor, ProgressBar, TimeMonitor
from graphkernel.train.callback.model_checkpoint import CheckpointConfig, ModelCheckpoint

__all__ = ["Callback", "CallbackError", "RunContext", "LossMonitor", "TimeMonitor", "LearningRateScheduler",
           "ProgressBar", "ModelCheckpoint", "CheckpointConfig"]
