"""MindSpore's `mindspore.train.callback` path: `Callback` (the base a user subclasses), RunContext and
the callbacks of graphkernel.train.callbacks and checkpoint_callback."""
from graphkernel.train.callback.base import (Callback, LearningRateScheduler, LossMonitor, ProgressBar, RunContext,
                                         TimeMonitor)
from graphkernel.train.callback.model_checkpoint import CheckpointConfig, ModelCheckpoint

__all__ = ["Callback", "RunContext", "LossMonitor", "TimeMonitor", "LearningRateScheduler", "ProgressBar",
           "ModelCheckpoint", "CheckpointConfig"]
