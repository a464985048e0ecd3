"""Loss scale managers for Model(loss_scale_manager=...), with MindSpore's names and rules.

    FixedLossScaleManager(loss_scale=128.0, drop_overflow_update=True)
        drop_overflow_update=True: the step is a TrainOneStepWithLossScaleCell with a
        FixedLossScaleUpdateCell (an overflowing step changes no Parameter);
        False: a TrainOneStepCell whose loss gradient is seeded with loss_scale (give the optimizer
        the same loss_scale so that it divides the gradients back)
    DynamicLossScaleManager(init_loss_scale=2**24, scale_factor=2, scale_window=2000)
        a TrainOneStepWithLossScaleCell with a DynamicLossScaleUpdateCell: on overflow the scale is
        divided by scale_factor (not below 1), after scale_window steps without one multiplied by it

The scale the step uses lives in the train cell's `scale_sense` Parameter (read at run time). Model.train
also keeps the manager's own `loss_scale` in step with it, as MindSpore's does, so
`manager.get_loss_scale()` gives the scale of the next step.
"""
from __future__ import annotations

from ir.errors import GraphKernelError
from graphkernel.nn.wrap import DynamicLossScaleUpdateCell, FixedLossScaleUpdateCell


class LossScaleError(GraphKernelError, ValueError):
    """A loss scale manager built from values MindSpore refuses."""


def _number(cls: str, name: str, value, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low:
        raise LossScaleError(f"{cls}: {name} must be a number >= {low:g}, got {value!r}")
    return value


class LossScaleManager:
    """Base: get_loss_scale, update_loss_scale(overflow), get_update_cell, get_drop_overflow_update."""

    def get_loss_scale(self):
        raise NotImplementedError

    def update_loss_scale(self, overflow):
        raise NotImplementedError

    def get_update_cell(self):
        raise NotImplementedError

    def get_drop_overflow_update(self) -> bool:
        return True


class FixedLossScaleManager(LossScaleManager):
    def __init__(self, loss_scale=128.0, drop_overflow_update=True):
        self._loss_scale = _number("FixedLossScaleManager", "loss_scale", loss_scale, 1.0)
        if not isinstance(drop_overflow_update, bool):
            raise LossScaleError(f"FixedLossScaleManager: drop_overflow_update must be True or False, got "
                                 f"{drop_overflow_update!r}")
        self._drop_overflow_update = drop_overflow_update

    def get_loss_scale(self):
        return self._loss_scale

    def get_drop_overflow_update(self) -> bool:
        return self._drop_overflow_update

    def update_loss_scale(self, overflow):
        pass

    def get_update_cell(self):
        return FixedLossScaleUpdateCell(self._loss_scale) if self._drop_overflow_update else None


class DynamicLossScaleManager(LossScaleManager):
    def __init__(self, init_loss_scale=2 ** 24, scale_factor=2, scale_window=2000):
        cls = "DynamicLossScaleManager"
        self.loss_scale = _number(cls, "init_loss_scale", init_loss_scale, 1.0)
        if isinstance(scale_window, bool) or not isinstance(scale_window, int) or scale_window < 1:
            raise LossScaleError(f"{cls}: scale_window must be a positive int, got {scale_window!r}")
        if isinstance(scale_factor, bool) or not isinstance(scale_factor, (int, float)) or not scale_factor > 0:
            raise LossScaleError(f"{cls}: scale_factor must be a positive number, got {scale_factor!r}")
        self.scale_window = scale_window
        self.scale_factor = scale_factor
        self.increase_ratio = scale_factor
        self.decrease_ratio = 1 / scale_factor
        self.cur_iter = 1
        self.last_overflow_iter = 0

    def get_loss_scale(self):
        return self.loss_scale

    def update_loss_scale(self, overflow):
        """The host's copy of the rule the update cell applies on the device."""
        if overflow:
            self.loss_scale = max(self.loss_scale * self.decrease_ratio, 1)
            self.last_overflow_iter = self.cur_iter
        elif (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
            self.loss_scale *= self.increase_ratio
        self.cur_iter += 1

    def get_update_cell(self):
        return DynamicLossScaleUpdateCell(self.loss_scale, self.scale_factor, self.scale_window)
