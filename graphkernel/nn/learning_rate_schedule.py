"""MindSpore's learning-rate schedules: Cells whose `construct(global_step)` gives the learning rate of a
step, written with primitives so the step is a run-time value of the graph (one compile serves every
step; GRAPH_MODE traces it into a training graph, PYNATIVE_MODE runs it op by op).

global_step is an integer Tensor (int32 or int64; float steps are accepted too), usually of shape () or
(1,) (an optimizer's global_step Parameter is int32 (1,)); the result is a float32 Tensor of the same
shape, computed in float32 as MindSpore does (s = float32(global_step)):

    ExponentialDecayLR(learning_rate, decay_rate, decay_steps, is_stair=False)
        learning_rate * decay_rate ** p,            p = s / decay_steps (is_stair: floor of it);
                                                    evaluated as exp(p ln decay_rate) (see the class)
    NaturalExpDecayLR(learning_rate, decay_rate, decay_steps, is_stair=False)
        learning_rate * exp(-decay_rate * q),       q = s (is_stair: floor(s / decay_steps) * decay_steps)
    InverseDecayLR(learning_rate, decay_rate, decay_steps, is_stair=False)
        learning_rate / (1 + decay_rate * p),       p as ExponentialDecayLR's
    CosineDecayLR(min_lr, max_lr, decay_steps)
        min_lr + 0.5 (max_lr - min_lr) (1 + cos(pi min(s, decay_steps) / decay_steps))
    PolynomialDecayLR(learning_rate, end_learning_rate, decay_steps, power, update_decay_steps=False)
        (learning_rate - end_learning_rate) (1 - t / d) ** power + end_learning_rate,
        t = min(s, decay_steps), d = decay_steps; update_decay_steps: t = s,
        d = decay_steps * max(ceil(s / decay_steps), 1) (the decay restarts every decay_steps)
    WarmUpLR(learning_rate, warmup_steps)
        learning_rate * min(s, warmup_steps) / warmup_steps

NaturalExpDecayLR follows MindSpore's code, not its docstring: the docstring writes p = s / decay_steps,
but MindSpore computes exp(-decay_rate * s) (decay_steps only sets the stair width), as its
nn.natural_exp_decay_lr does per epoch.

Arguments are checked as MindSpore checks them (graphkernel/nn/lr_checks.py): TypeError for a wrong
type (an int where a float is expected too), ValueError for a value out of range.
"""
from __future__ import annotations

import math

from graphkernel import dtype as mstype
from graphkernel.cell import Cell
from graphkernel.nn.lr_checks import (LearningRateTypeError, check_bool, check_float, check_min_below_max,
                                      check_positive_int)
from graphkernel.ops import operations as P


class LearningRateSchedule(Cell):
    """Base of the schedules: `construct(global_step)` returns the learning rate of that step."""

    def construct(self, global_step):
        raise NotImplementedError(f"{type(self).__name__} must define construct(global_step)")

    def _float_step(self, global_step):
        """global_step as float32, after checking it is a number Tensor."""
        return P.Cast()(self._checked(global_step), mstype.float32)

    def _checked(self, global_step):
        dtype = getattr(global_step, "dtype", None)
        if dtype is None or not (dtype.is_int or dtype.is_float):
            raise LearningRateTypeError(f"{type(self).__name__}: global_step must be an int or float Tensor, "
                                        f"got {dtype if dtype is not None else type(global_step).__name__}")
        return global_step


def _check_decay(owner, learning_rate, decay_rate, decay_steps, is_stair) -> None:
    """The arguments of the exponential, natural-exponential and inverse-time schedules, in MindSpore's
    order (so the same bad call reports the same argument first)."""
    check_positive_int(owner, "decay_steps", decay_steps)
    check_float(owner, "learning_rate", learning_rate, positive=True)
    check_float(owner, "decay_rate", decay_rate, positive=True)
    check_bool(owner, "is_stair", is_stair)


class _DecayLR(LearningRateSchedule):
    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__()
        _check_decay(type(self).__name__, learning_rate, decay_rate, decay_steps, is_stair)
        self.learning_rate = learning_rate
        self.decay_rate = decay_rate
        self.decay_steps = decay_steps
        self.is_stair = is_stair

    def _p(self, global_step):
        """s / decay_steps, floored when is_stair."""
        p = self._float_step(global_step) / float(self.decay_steps)
        return P.Floor()(p) if self.is_stair else p


class ExponentialDecayLR(_DecayLR):
    """decay_rate ** p is computed as exp(p ln(decay_rate)), ln taken in float64 on the host: for a
    decay_rate near 1 this is more accurate than float32 pow of float32(decay_rate), and it gives the
    value MindSpore's documented example prints (0.09486833; float32 pow gives 0.094868325)."""

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__(learning_rate, decay_rate, decay_steps, is_stair)
        self.log_decay_rate = math.log(decay_rate)

    def construct(self, global_step):
        return self.learning_rate * P.Exp()(self._p(global_step) * self.log_decay_rate)


class NaturalExpDecayLR(_DecayLR):
    def construct(self, global_step):
        q = self._float_step(global_step)
        if self.is_stair:
            q = P.Floor()(q / float(self.decay_steps)) * float(self.decay_steps)
        return self.learning_rate * P.Exp()(q * -self.decay_rate)


class InverseDecayLR(_DecayLR):
    def construct(self, global_step):
        return self.learning_rate / (self._p(global_step) * self.decay_rate + 1.0)


class CosineDecayLR(LearningRateSchedule):
    def __init__(self, min_lr, max_lr, decay_steps):
        super().__init__()
        owner = type(self).__name__
        check_float(owner, "min_lr", min_lr, non_negative=True)
        check_float(owner, "max_lr", max_lr, positive=True)
        check_positive_int(owner, "decay_steps", decay_steps)
        check_min_below_max(owner, min_lr, max_lr)
        self.min_lr = min_lr
        self.max_lr = max_lr
        self.decay_steps = decay_steps
        self.delta = 0.5 * (max_lr - min_lr)

    def construct(self, global_step):
        t = P.Cast()(P.Minimum()(self._checked(global_step), self.decay_steps), mstype.float32)
        return (P.Cos()(t * math.pi / float(self.decay_steps)) + 1.0) * self.delta + self.min_lr


class PolynomialDecayLR(LearningRateSchedule):
    def __init__(self, learning_rate, end_learning_rate, decay_steps, power, update_decay_steps=False):
        super().__init__()
        owner = type(self).__name__
        check_float(owner, "learning_rate", learning_rate, positive=True)
        check_float(owner, "end_learning_rate", end_learning_rate, non_negative=True)
        check_positive_int(owner, "decay_steps", decay_steps)
        check_bool(owner, "update_decay_steps", update_decay_steps)
        check_float(owner, "power", power, positive=True)
        self.learning_rate = learning_rate
        self.end_learning_rate = end_learning_rate
        self.decay_steps = decay_steps
        self.power = power
        self.update_decay_steps = update_decay_steps
        self.diff_learning_rate = learning_rate - end_learning_rate

    def construct(self, global_step):
        s = self._float_step(global_step)
        steps = float(self.decay_steps)
        if self.update_decay_steps:   # the decay restarts at each multiple of decay_steps
            cycles = P.Maximum()(P.Ceil()(s / steps), 1.0)
            p = s / (cycles * steps)
        else:
            p = P.Minimum()(s, steps) / steps
        return P.Pow()(1.0 - p, self.power) * self.diff_learning_rate + self.end_learning_rate


class WarmUpLR(LearningRateSchedule):
    """learning_rate may be 0.0: MindSpore's code checks it is >= 0 (its docstring says > 0)."""

    def __init__(self, learning_rate, warmup_steps):
        super().__init__()
        owner = type(self).__name__
        check_float(owner, "learning_rate", learning_rate, non_negative=True)
        check_positive_int(owner, "warmup_steps", warmup_steps)
        self.learning_rate = learning_rate
        self.warmup_steps = warmup_steps

    def construct(self, global_step):
        done = P.Cast()(P.Minimum()(self._checked(global_step), self.warmup_steps), mstype.float32)
        return self.learning_rate * (done / float(self.warmup_steps))


__all__ = ["LearningRateSchedule", "ExponentialDecayLR", "NaturalExpDecayLR", "InverseDecayLR", "CosineDecayLR",
           "PolynomialDecayLR", "WarmUpLR"]
