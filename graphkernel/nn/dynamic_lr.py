"""MindSpore's per-step learning-rate lists (`nn.dynamic_lr`): plain Python, one float per step, computed
in Python floats (float64) before training; an optimizer takes the list as its learning_rate.

Step i belongs to epoch e = floor(i / step_per_epoch):

    piecewise_constant_lr(milestone, learning_rates)
        learning_rates[t] for i in [milestone[t-1], milestone[t]); milestone[-1] steps in all
    exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False)
        learning_rate * decay_rate ** (e / decay_epoch)          (is_stair: floor(e / decay_epoch))
    natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False)
        learning_rate * e_ ** (-decay_rate * e)                   (is_stair: e -> floor(e / decay_epoch)
                                                                   * decay_epoch; e_ is Euler's number)
    inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False)
        learning_rate / (1 + decay_rate * e / decay_epoch)       (is_stair: floor(e / decay_epoch))
    cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch)
        min_lr + 0.5 (max_lr - min_lr) (1 + cos(pi min(e, decay_epoch) / decay_epoch))
    polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch, decay_epoch, power,
                        update_decay_epoch=False)
        (learning_rate - end_learning_rate) (1 - t / d) ** power + end_learning_rate,
        t = min(e, decay_epoch), d = decay_epoch; update_decay_epoch: t = e,
        d = decay_epoch * max(ceil(e / decay_epoch), 1)
    warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch)
        learning_rate * min(e, warmup_epoch) / warmup_epoch

The expressions are evaluated in MindSpore's order, so the lists equal MindSpore's float for float
(its documented examples are checked literally in tests/test_lr_schedule.py). Arguments are checked as
MindSpore checks them (graphkernel/nn/lr_checks.py).
"""
from __future__ import annotations

import math

from graphkernel.nn.lr_checks import (LearningRateValueError, check_bool, check_float, check_min_below_max,
                                      check_positive_int, check_sequence)


def piecewise_constant_lr(milestone, learning_rates):
    owner = "piecewise_constant_lr"
    check_sequence(owner, "milestone", milestone)
    check_sequence(owner, "learning_rates", learning_rates)
    if len(milestone) != len(learning_rates):
        raise LearningRateValueError(f"{owner}: milestone and learning_rates must have one length, got "
                                     f"{len(milestone)} and {len(learning_rates)}")
    lr, last = [], 0
    for i, (end, rate) in enumerate(zip(milestone, learning_rates)):
        check_positive_int(owner, f"milestone[{i}]", end)
        check_float(owner, f"learning_rates[{i}]", rate)
        if end < last:   # equal milestones are allowed (an empty piece), as in MindSpore
            raise LearningRateValueError(f"{owner}: milestone must not decrease, got milestone[{i}]={end} after "
                                         f"milestone[{i - 1}]={last}")
        lr += [rate] * (end - last)
        last = end
    return lr


def _epochs(total_step: int, step_per_epoch: int):
    return (i // step_per_epoch for i in range(total_step))


def _check_decay(owner, learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair) -> None:
    """MindSpore's order: the ints, then the floats, then the flag."""
    check_positive_int(owner, "total_step", total_step)
    check_positive_int(owner, "step_per_epoch", step_per_epoch)
    check_positive_int(owner, "decay_epoch", decay_epoch)
    check_float(owner, "learning_rate", learning_rate, positive=True)
    check_float(owner, "decay_rate", decay_rate, positive=True)
    check_bool(owner, "is_stair", is_stair)


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    _check_decay("exponential_decay_lr", learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                 is_stair)
    if is_stair:
        return [learning_rate * decay_rate ** (e // decay_epoch) for e in _epochs(total_step, step_per_epoch)]
    return [learning_rate * decay_rate ** (e / decay_epoch) for e in _epochs(total_step, step_per_epoch)]


def natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    _check_decay("natural_exp_decay_lr", learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                 is_stair)
    lr = []
    for e in _epochs(total_step, step_per_epoch):
        q = e // decay_epoch * decay_epoch if is_stair else e
        lr.append(learning_rate * math.e ** (-decay_rate * q))
    return lr


def inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    _check_decay("inverse_decay_lr", learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                 is_stair)
    if is_stair:
        return [learning_rate / (1 + decay_rate * (e // decay_epoch)) for e in _epochs(total_step, step_per_epoch)]
    return [learning_rate / (1 + decay_rate * e / decay_epoch) for e in _epochs(total_step, step_per_epoch)]


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch):
    owner = "cosine_decay_lr"
    check_float(owner, "min_lr", min_lr, non_negative=True)
    check_float(owner, "max_lr", max_lr, positive=True)
    check_positive_int(owner, "total_step", total_step)
    check_positive_int(owner, "step_per_epoch", step_per_epoch)
    check_positive_int(owner, "decay_epoch", decay_epoch)
    check_min_below_max(owner, min_lr, max_lr)
    delta = 0.5 * (max_lr - min_lr)
    return [min_lr + delta * (1 + math.cos(math.pi * min(e, decay_epoch) / decay_epoch))
            for e in _epochs(total_step, step_per_epoch)]


def polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch, decay_epoch, power,
                        update_decay_epoch=False):
    owner = "polynomial_decay_lr"
    check_float(owner, "learning_rate", learning_rate, positive=True)
    check_float(owner, "end_learning_rate", end_learning_rate, non_negative=True)
    check_float(owner, "power", power, positive=True)
    check_positive_int(owner, "total_step", total_step)
    check_positive_int(owner, "step_per_epoch", step_per_epoch)
    check_positive_int(owner, "decay_epoch", decay_epoch)
    check_bool(owner, "update_decay_epoch", update_decay_epoch)
    delta = learning_rate - end_learning_rate
    lr = []
    for e in _epochs(total_step, step_per_epoch):
        if update_decay_epoch:   # the decay restarts at each multiple of decay_epoch
            t, d = e, decay_epoch * max(math.ceil(e / decay_epoch), 1)
        else:
            t, d = min(e, decay_epoch), decay_epoch
        lr.append(delta * (1 - t / d) ** power + end_learning_rate)
    return lr


def warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch):
    """learning_rate may be 0.0: MindSpore checks it is >= 0."""
    owner = "warmup_lr"
    check_float(owner, "learning_rate", learning_rate, non_negative=True)
    check_positive_int(owner, "warmup_epoch", warmup_epoch)
    check_positive_int(owner, "total_step", total_step)
    check_positive_int(owner, "step_per_epoch", step_per_epoch)
    return [learning_rate * min(e, warmup_epoch) / warmup_epoch for e in _epochs(total_step, step_per_epoch)]


__all__ = ["piecewise_constant_lr", "exponential_decay_lr", "natural_exp_decay_lr", "inverse_decay_lr",
           "cosine_decay_lr", "polynomial_decay_lr", "warmup_lr"]
