"""Losses with MindSpore's names, arguments and formulas, written with primitives (differentiable).

    MSELoss(reduction='mean')                       (x - y)^2
    L1Loss(reduction='mean')                        |x - y|
    SoftmaxCrossEntropyWithLogits(sparse=False, reduction='none')
                                                    -sum(labels * log_softmax(logits), -1); sparse: labels
                                                    are class indices (int), one-hot inside
    CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)
                                                    logits (N, C); labels class indices (N,) (int) or
                                                    class probabilities (N, C) (float); 'mean' over
                                                    indices divides by the sum of the weights of the
                                                    labels not ignored (torch's and MindSpore's rule)
    BCEWithLogitsLoss(reduction='mean', weight=None, pos_weight=None)
                                                    w (pos_weight y softplus(-x) + (1 - y) softplus(x)):
                                                    -[p y log s(x) + (1 - y) log(1 - s(x))] without overflow
    WithLossCell(backbone, loss_fn)                 loss_fn(backbone(data), label)

reduction: 'mean', 'sum' or 'none'.
"""
from __future__ import annotations

import numpy as np

from ir.errors import GraphKernelError
from graphkernel.cell import Cell
from graphkernel.ops import operations as P
from graphkernel.tensor import Tensor


class LossError(GraphKernelError, ValueError):
    """A loss built or called with arguments it cannot take."""


REDUCTIONS = ("mean", "sum", "none")


class LossBase(Cell):
    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise LossError(f"{type(self).__name__}: reduction {reduction!r}; accepted: {', '.join(REDUCTIONS)}")
        self.reduction = reduction

    def get_loss(self, x):
        if self.reduction == "mean":
            return P.ReduceMean()(x, ())
        if self.reduction == "sum":
            return P.ReduceSum()(x, ())
        return x


def _same_shape(cls, logits, labels):
    if tuple(logits.shape) != tuple(labels.shape):
        raise LossError(f"{cls}: logits {list(logits.shape)} and labels {list(labels.shape)} must have one shape")


class MSELoss(LossBase):
    def construct(self, logits, labels):
        diff = logits - labels
        return self.get_loss(diff * diff)


class L1Loss(LossBase):
    def construct(self, logits, labels):
        return self.get_loss(P.Abs()(logits - labels))


def _one_hot(labels, classes: int, dtype):
    """labels (int, any shape) -> one-hot of shape labels.shape + (classes,), in dtype (an index outside
    [0, classes) gives a row of zeros)."""
    if not labels.dtype.is_int:
        raise LossError(f"class-index labels must be int32 or int64, got {labels.dtype}")
    column = P.Reshape()(labels, tuple(labels.shape) + (1,))
    hit = P.Equal()(column, Tensor(np.arange(classes, dtype=labels.dtype.np)))
    return P.Cast()(hit, dtype)


class SoftmaxCrossEntropyWithLogits(LossBase):
    def __init__(self, sparse=False, reduction="none"):
        super().__init__(reduction)
        self.sparse = sparse

    def construct(self, logits, labels):
        if len(logits.shape) != 2:
            raise LossError(f"SoftmaxCrossEntropyWithLogits: logits must be (N, C), got {list(logits.shape)}")
        if self.sparse:
            labels = _one_hot(labels, logits.shape[-1], logits.dtype)
        else:
            _same_shape("SoftmaxCrossEntropyWithLogits", logits, labels)
        loss = -P.ReduceSum()(labels * P.LogSoftmax(axis=-1)(logits), -1)
        return self.get_loss(loss)


class CrossEntropyLoss(LossBase):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise LossError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing}")
        self.weight = weight
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def construct(self, logits, labels):
        if len(logits.shape) != 2:
            raise LossError(f"CrossEntropyLoss: logits must be (N, C), got {list(logits.shape)} (class axis 1 "
                            "of higher ranks is not supported here)")
        classes = logits.shape[1]
        log_p = P.LogSoftmax(axis=-1)(logits)
        weight = P.Cast()(self.weight, logits.dtype) if self.weight is not None else None
        if labels.dtype.is_float:        # class probabilities
            _same_shape("CrossEntropyLoss", logits, labels)
            target = labels
            if self.label_smoothing:
                target = target * (1 - self.label_smoothing) + self.label_smoothing / classes
            per_class = target * log_p if weight is None else target * log_p * weight
            loss = -P.ReduceSum()(per_class, -1)
            return self.get_loss(loss)
        if tuple(labels.shape) != (logits.shape[0],):
            raise LossError(f"CrossEntropyLoss: class-index labels must have shape ({logits.shape[0]},), got "
                            f"{list(labels.shape)}")
        one_hot = _one_hot(labels, classes, logits.dtype)
        kept = P.Cast()(P.Equal()(P.Equal()(labels, self.ignore_index), False), logits.dtype)
        picked = P.ReduceSum()(one_hot * log_p, -1)
        if self.label_smoothing:
            smooth = P.ReduceMean()(log_p, -1) if weight is None else P.ReduceSum()(log_p * weight, -1) / classes
            picked = picked * (1 - self.label_smoothing) + smooth * self.label_smoothing
        w = kept if weight is None else kept * P.ReduceSum()(one_hot * weight, -1)
        loss = -(picked * w)
        if self.reduction == "mean":
            return P.ReduceSum()(loss, ()) / P.ReduceSum()(w, ())
        return self.get_loss(loss)


class BCEWithLogitsLoss(LossBase):
    def __init__(self, reduction="mean", weight=None, pos_weight=None):
        super().__init__(reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def construct(self, logits, labels):
        _same_shape("BCEWithLogitsLoss", logits, labels)
        positive = P.Softplus()(-logits)      # -log sigmoid(x)
        negative = P.Softplus()(logits)       # -log(1 - sigmoid(x))
        if self.pos_weight is not None:
            positive = positive * P.Cast()(self.pos_weight, logits.dtype)
        loss = labels * positive + (1.0 - labels) * negative
        if self.weight is not None:
            loss = loss * P.Cast()(self.weight, logits.dtype)
        return self.get_loss(loss)


class WithLossCell(Cell):
    """MindSpore's WithLossCell: construct(data, label) = loss_fn(backbone(data), label)."""

    def __init__(self, backbone, loss_fn):
        super().__init__(auto_prefix=False)
        self._backbone = backbone
        self._loss_fn = loss_fn

    def construct(self, data, label):
        return self._loss_fn(self._backbone(data), label)

    @property
    def backbone_network(self):
        return self._backbone
