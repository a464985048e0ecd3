"""MindSpore's `nn.wrap`: the train cells (`cell_wrapper`), loss scaling (`loss_scale`) and the gradient
reducer of data parallelism (`grad_reducer`)."""
from graphkernel.nn.wrap.cell_wrapper import TrainCellError, TrainOneStepCell
from graphkernel.nn.wrap.grad_reducer import DistributedGradReducer
from graphkernel.nn.wrap.loss_scale import (DynamicLossScaleUpdateCell, FixedLossScaleUpdateCell,
                                            TrainOneStepWithLossScaleCell)

__all__ = ["TrainOneStepCell", "TrainOneStepWithLossScaleCell", "DynamicLossScaleUpdateCell",
           "FixedLossScaleUpdateCell", "DistributedGradReducer", "TrainCellError"]
