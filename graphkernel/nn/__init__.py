"""MindSpore's `nn`: Cell, the layers, containers, losses and learning-rate schedules.

    from graphkernel import nn
    net = nn.SequentialCell([nn.Dense(16, 32, activation="gelu"), nn.Dense(32, 4)])
    loss = nn.WithLossCell(net, nn.MSELoss())
"""
from graphkernel.cell import Cell
from graphkernel.nn.container import CellList, SequentialCell
from graphkernel.nn.dynamic_lr import (cosine_decay_lr, exponential_decay_lr, inverse_decay_lr,
                                       natural_exp_decay_lr, piecewise_constant_lr, polynomial_decay_lr, warmup_lr)
from graphkernel.nn.learning_rate_schedule import (CosineDecayLR, ExponentialDecayLR, InverseDecayLR,
                                                   LearningRateSchedule, NaturalExpDecayLR, PolynomialDecayLR,
                                                   WarmUpLR)
from graphkernel.nn.layers import (GELU, BatchNorm1d, BatchNorm2d, ClipByNorm, Dense, Dropout, Embedding, LayerError,
                                   LayerNorm, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh, get_activation)
from graphkernel.nn.loss import (BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, LossBase, LossError, MSELoss,
                                 SoftmaxCrossEntropyWithLogits, WithLossCell)
from graphkernel.nn.spatial import AdaptiveAvgPool2d, AvgPool2d, Conv2d, Flatten, MaxPool2d, Pad
from graphkernel.nn.lr_checks import LearningRateError, LearningRateTypeError, LearningRateValueError
from graphkernel.nn.optim import SGD, Adam, AdamW, AdamWeightDecay, Lamb, Momentum, Optimizer, OptimizerError
from graphkernel.nn.wrap import (DistributedGradReducer, DynamicLossScaleUpdateCell, FixedLossScaleUpdateCell,
                                 TrainCellError, TrainOneStepCell, TrainOneStepWithLossScaleCell)

__all__ = ["Cell", "CellList", "SequentialCell", "Dense", "Dropout", "Embedding", "GELU", "LayerNorm", "BatchNorm1d",
           "BatchNorm2d",
           "LogSoftmax", "ReLU", "Sigmoid", "Softmax", "Tanh", "get_activation", "LayerError", "LossBase",
           "LossError", "MSELoss", "L1Loss", "SoftmaxCrossEntropyWithLogits", "CrossEntropyLoss",
           "BCEWithLogitsLoss", "WithLossCell", "Optimizer", "OptimizerError", "SGD", "Momentum", "Adam",
           "AdamWeightDecay", "AdamW", "Lamb", "TrainOneStepCell", "TrainOneStepWithLossScaleCell",
           "DynamicLossScaleUpdateCell", "FixedLossScaleUpdateCell", "TrainCellError", "DistributedGradReducer",
           "ClipByNorm", "Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Flatten", "Pad",
           "LearningRateSchedule", "PolynomialDecayLR", "WarmUpLR",
           "CosineDecayLR", "ExponentialDecayLR", "NaturalExpDecayLR", "InverseDecayLR", "LearningRateError",
           "LearningRateTypeError", "LearningRateValueError", "piecewise_constant_lr", "exponential_decay_lr",
           "natural_exp_decay_lr", "inverse_decay_lr", "cosine_decay_lr", "polynomial_decay_lr", "warmup_lr"]
