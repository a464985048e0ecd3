"""Metrics for Model.eval, with MindSpore's names and formulas: `clear()`, `update(*inputs)` per batch,
`eval()` at the end.

    Accuracy(eval_type="classification")   update(logits (N, C), labels (N,) or one-hot (N, C))
                                            correct argmax / samples
    Loss()                                  update(loss): mean over batches of each batch's mean loss
    MAE()                                   update(y_pred, y): sum |y_pred - y| / samples (rows)
    MSE()                                   update(y_pred, y): sum (y_pred - y)^2 / samples (rows)

Model(metrics=...) takes a set of names ({"accuracy", "loss", "mae", "mse"}; "acc" is accuracy) or a dict
name -> Metric; Model.eval returns a dict name -> value. A metric evaluated before any update raises,
naming itself.
"""
from __future__ import annotations

import numpy as np

from ir.errors import GraphKernelError
from graphkernel.tensor import Tensor


class MetricError(GraphKernelError, ValueError):
    """A metric given inputs it cannot use, or evaluated with no samples."""


class Metric:
    """Base: subclasses define clear, update and eval."""

    def __init__(self):
        self.clear()

    def clear(self):
        raise NotImplementedError

    def update(self, *inputs):
        raise NotImplementedError

    def eval(self):
        raise NotImplementedError

    @staticmethod
    def _convert_data(data) -> np.ndarray:
        if isinstance(data, Tensor):
            return data.asnumpy()
        if isinstance(data, (np.ndarray, list, tuple, int, float, np.number)):
            return np.asarray(data)
        raise MetricError(f"a metric's input must be a Tensor, a numpy array or a list, got {type(data).__name__}")

    def _inputs(self, inputs, count: int, what: str) -> list:
        if len(inputs) != count:
            raise MetricError(f"{type(self).__name__}.update takes {count} input(s) ({what}), got {len(inputs)}")
        return [self._convert_data(x) for x in inputs]

    def _no_samples(self):
        return MetricError(f"{type(self).__name__} cannot be evaluated: no samples (call update first)")


class Accuracy(Metric):
    def __init__(self, eval_type="classification"):
        if eval_type not in ("classification", "multilabel"):
            raise MetricError(f"Accuracy: eval_type must be 'classification' or 'multilabel', got {eval_type!r}")
        self._type = eval_type
        super().__init__()

    def clear(self):
        self._correct_num = 0
        self._total_num = 0

    def update(self, *inputs):
        y_pred, y = self._inputs(inputs, 2, "logits, labels")
        if y_pred.ndim < 2:
            raise MetricError(f"Accuracy.update: logits must be (N, C), got shape {list(y_pred.shape)}")
        if self._type == "classification":
            if y.ndim == y_pred.ndim:   # one-hot labels
                y = y.argmax(axis=1)
            if y.shape != y_pred.shape[:1] + y_pred.shape[2:]:
                raise MetricError(f"Accuracy.update: labels of shape {list(y.shape)} do not match logits of shape "
                                  f"{list(y_pred.shape)}")
            result = (y_pred.argmax(axis=1) == y).reshape(-1)
        else:
            if y.shape != y_pred.shape:
                raise MetricError(f"Accuracy.update: multilabel labels of shape {list(y.shape)} do not match "
                                  f"predictions of shape {list(y_pred.shape)}")
            classes = y_pred.shape[1]
            result = np.equal(np.moveaxis(y_pred, 1, -1).reshape(-1, classes),
                              np.moveaxis(y, 1, -1).reshape(-1, classes)).all(axis=1)
        self._correct_num += int(result.sum())
        self._total_num += result.shape[0]

    def eval(self):
        if self._total_num == 0:
            raise self._no_samples()
        return self._correct_num / self._total_num


class Loss(Metric):
    def clear(self):
        self._sum_loss = 0.0
        self._total_num = 0

    def update(self, *inputs):
        (loss,) = self._inputs(inputs, 1, "loss")
        if loss.ndim > 1:
            raise MetricError(f"Loss.update: the loss must be a scalar or 1-D, got shape {list(loss.shape)}")
        self._sum_loss += float(loss.reshape(-1).mean())
        self._total_num += 1

    def eval(self):
        if self._total_num == 0:
            raise self._no_samples()
        return self._sum_loss / self._total_num


class _ErrorMetric(Metric):
    def clear(self):
        self._error_sum = 0.0
        self._samples_num = 0

    def update(self, *inputs):
        y_pred, y = self._inputs(inputs, 2, "predictions, targets")
        if y.size != y_pred.size:
            raise MetricError(f"{type(self).__name__}.update: targets of shape {list(y.shape)} do not match "
                              f"predictions of shape {list(y_pred.shape)}")
        self._error_sum += float(self._error(y.reshape(y_pred.shape) - y_pred).sum())
        self._samples_num += y.shape[0] if y.ndim else 1

    def eval(self):
        if self._samples_num == 0:
            raise self._no_samples()
        return self._error_sum / self._samples_num


class MAE(_ErrorMetric):
    _error = staticmethod(np.abs)


class MSE(_ErrorMetric):
    _error = staticmethod(np.square)


NAMES = {"accuracy": Accuracy, "acc": Accuracy, "loss": Loss, "mae": MAE, "mse": MSE}


def get_metrics(metrics) -> dict:
    """name -> Metric from Model's `metrics` argument (None, a set/list of names, or a dict)."""
    if metrics is None:
        return {}
    if isinstance(metrics, dict):
        for name, m in metrics.items():
            if not isinstance(m, Metric):
                raise MetricError(f"Model: metrics[{name!r}] must be a Metric, got {type(m).__name__}")
        return dict(metrics)
    if isinstance(metrics, (set, list, tuple)):
        out = {}
        for name in metrics:
            if name not in NAMES:
                raise MetricError(f"Model: unknown metric {name!r}; accepted names: {', '.join(sorted(NAMES))}")
            out[name] = NAMES[name]()
        return out
    raise MetricError(f"Model: metrics must be a set of names or a dict name -> Metric, got {type(metrics).__name__}")
