"""MindSpore's `nn`: Cell, the layers, containers and losses.

    from graphkernel import nn
    net = nn.SequentialCell([nn.Dense(16, 32, activation="gelu"), nn.Dense(32, 4)])
    loss = nn.WithLossCell(net, nn.MSELoss())
"""
from graphkernel.cell import Cell
from graphkernel.nn.container import CellList, SequentialCell
from graphkernel.nn.layers import (GELU, Dense, Dropout, Embedding, LayerError, LayerNorm, LogSoftmax, ReLU,
                                   Sigmoid, Softmax, Tanh, get_activation)
from graphkernel.nn.loss import (BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, LossBase, LossError, MSELoss,
                                 SoftmaxCrossEntropyWithLogits, WithLossCell)
from graphkernel.nn.optim import SGD, Adam, AdamW, AdamWeightDecay, Lamb, Momentum, Optimizer, OptimizerError
from graphkernel.nn.wrap import (DynamicLossScaleUpdateCell, FixedLossScaleUpdateCell, TrainCellError,
                                 TrainOneStepCell, TrainOneStepWithLossScaleCell)

__all__ = ["Cell", "CellList", "SequentialCell", "Dense", "Dropout", "Embedding", "GELU", "LayerNorm",
           "LogSoftmax", "ReLU", "Sigmoid", "Softmax", "Tanh", "get_activation", "LayerError", "LossBase",
           "LossError", "MSELoss", "L1Loss", "SoftmaxCrossEntropyWithLogits", "CrossEntropyLoss",
           "BCEWithLogitsLoss", "WithLossCell", "Optimizer", "OptimizerError", "SGD", "Momentum", "Adam",
           "AdamWeightDecay", "AdamW", "Lamb", "TrainOneStepCell", "TrainOneStepWithLossScaleCell",
           "DynamicLossScaleUpdateCell", "FixedLossScaleUpdateCell", "TrainCellError"]
