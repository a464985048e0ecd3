"""MindSpore's `mindspore.nn.metrics` path: `Metric` (the base a user subclasses) and the metrics of
graphkernel.train.metrics."""
from graphkernel.train.metrics import MAE, MSE, Accuracy, Loss, Metric, MetricError

__all__ = ["Metric", "MetricError", "Accuracy", "Loss", "MAE", "MSE"]
