"""Argument checks of the learning-rate schedules (learning_rate_schedule.py) and the per-step lists
(dynamic_lr.py), with MindSpore's rules (its `_checkparam` validators):

    a float argument must be a Python float (an int such as 1 is a TypeError, as in MindSpore; bool
    never counts as a number), finite, and in range (ValueError);
    an int argument must be a Python int, not bool (TypeError), and positive (ValueError);
    a flag must be a bool (TypeError).

Each error names the schedule or function and the argument, and is a LearningRateError (a
GraphKernelError) as well as the builtin TypeError or ValueError MindSpore raises.
"""
from __future__ import annotations

import math

from ir.errors import GraphKernelError


class LearningRateError(GraphKernelError):
    """A learning-rate schedule or list asked for with arguments it cannot take."""


class LearningRateTypeError(LearningRateError, TypeError):
    """An argument of the wrong type (MindSpore raises TypeError)."""


class LearningRateValueError(LearningRateError, ValueError):
    """An argument out of range (MindSpore raises ValueError)."""


def _type_name(value) -> str:
    return type(value).__name__


def check_float(owner: str, name: str, value, *, positive: bool = False, non_negative: bool = False) -> float:
    """A finite Python float; `positive`: > 0, `non_negative`: >= 0."""
    if not isinstance(value, float):
        raise LearningRateTypeError(f"{owner}: {name} must be a float, got {_type_name(value)} {value!r}")
    if not math.isfinite(value):
        raise LearningRateValueError(f"{owner}: {name} must be finite, got {value!r}")
    if positive and not value > 0:
        raise LearningRateValueError(f"{owner}: {name} must be > 0, got {value!r}")
    if non_negative and not value >= 0:
        raise LearningRateValueError(f"{owner}: {name} must be >= 0, got {value!r}")
    return value


def check_positive_int(owner: str, name: str, value) -> int:
    """A Python int (not bool) > 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LearningRateTypeError(f"{owner}: {name} must be an int, got {_type_name(value)} {value!r}")
    if value <= 0:
        raise LearningRateValueError(f"{owner}: {name} must be > 0, got {value!r}")
    return value


def check_bool(owner: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise LearningRateTypeError(f"{owner}: {name} must be a bool, got {_type_name(value)} {value!r}")
    return value


def check_sequence(owner: str, name: str, value) -> None:
    if not isinstance(value, (list, tuple)):
        raise LearningRateTypeError(f"{owner}: {name} must be a list or tuple, got {_type_name(value)}")


def check_min_below_max(owner: str, min_lr: float, max_lr: float) -> None:
    if min_lr >= max_lr:
        raise LearningRateValueError(f"{owner}: max_lr must be greater than min_lr, got max_lr={max_lr!r}, "
                                     f"min_lr={min_lr!r}")
