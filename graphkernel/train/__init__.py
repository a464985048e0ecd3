"""MindSpore's `mindspore.train`: Model, datasets, metrics, callbacks and loss scale managers.

    from graphkernel.train import Model, LossMonitor, NumpySlicesDataset
    model = Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.01, 0.9), metrics={"mse"})
    model.train(2, NumpySlicesDataset((x, y)).batch(8), callbacks=[LossMonitor()], dataset_sink_mode=True)
    model.eval(dataset)        # {"mse": ...}

    model.py                 Model (train with loop sinking, eval, predict, amp_level)
    dataset.py               NumpySlicesDataset, GeneratorDataset, batch, shuffle
    metrics.py               Metric, Accuracy, Loss, MAE, MSE
    callback/                Callback, RunContext, LossMonitor, TimeMonitor, LearningRateScheduler, ProgressBar,
                             ModelCheckpoint, CheckpointConfig (MindSpore's mindspore.train.callback)
    loss_scale.py            FixedLossScaleManager, DynamicLossScaleManager
"""
from graphkernel.train.callback import (Callback, CallbackError, CheckpointConfig, LearningRateScheduler, LossMonitor,
                                        ModelCheckpoint, ProgressBar, RunContext, TimeMonitor)
from graphkernel.train.dataset import Dataset, DatasetError, GeneratorDataset, NumpySlicesDataset
from graphkernel.train.loss_scale import (DynamicLossScaleManager, FixedLossScaleManager, LossScaleError,
                                          LossScaleManager)
from graphkernel.train.metrics import MAE, MSE, Accuracy, Loss, Metric, MetricError
from graphkernel.train.model import Model, ModelError, WithEvalCell

__all__ = ["Model", "ModelError", "WithEvalCell", "Callback", "CallbackError", "RunContext", "LossMonitor",
           "TimeMonitor", "LearningRateScheduler", "ProgressBar", "ModelCheckpoint", "CheckpointConfig", "Dataset",
           "DatasetError", "NumpySlicesDataset", "GeneratorDataset", "LossScaleManager", "FixedLossScaleManager",
           "DynamicLossScaleManager", "LossScaleError", "Metric", "MetricError", "Accuracy", "Loss", "MAE", "MSE"]
