"""`TrainOneStepCell(network, optimizer, sens=None) -> loss`, MindSpore's (`mindspore.nn.wrap.cell_wrapper`):
one call is one step (forward, backward, the optimizer's updates), compiled as one graph in GRAPH_MODE.

Its attributes are MindSpore's, which subclasses (the official BERT cells) read and replace: `network`,
`optimizer`, `weights` (the optimizer's Parameters), `grad` (GradOperation(get_by_list=True,
sens_param=True)), `sens`, `grad_reducer`, `reducer_flag`, `mean`, `degree`, `parallel_mode`, `hyper_map`.
Under parallel_mode DATA_PARALLEL (graphkernel/communication/parallel_context.py) `reducer_flag` is True and
`grad_reducer` a DistributedGradReducer(weights, gradients_mean, device_num), as in MindSpore; otherwise
the identity. The loss-scale cells are in loss_scale.py.
"""
from __future__ import annotations

import numpy as np

from graphkernel.cell import Cell
from graphkernel.gradients import GradOperation
from graphkernel.ops.multitype import HyperMap
from graphkernel.communication.parallel_context import ParallelMode, get_auto_parallel_context
from graphkernel.tensor import Tensor
from graphkernel.nn.wrap.grad_reducer import DistributedGradReducer, TrainCellError


def _identity(x):
    return x


class TrainOneStepCell(Cell):
    def __init__(self, network, optimizer, sens=None):
        super().__init__(auto_prefix=False)
        if not isinstance(network, Cell):
            raise TrainCellError(f"TrainOneStepCell: network must be a Cell, got {type(network).__name__}")
        if not callable(optimizer) or not hasattr(optimizer, "parameters"):
            raise TrainCellError(f"TrainOneStepCell: optimizer must be an Optimizer, got {type(optimizer).__name__}")
        self.network = network
        self.network.set_grad()
        self.optimizer = optimizer
        self.weights = self.optimizer.parameters
        self.grad = GradOperation(get_by_list=True, sens_param=True)
        self.sens = 1.0 if sens is None else float(sens)
        self.hyper_map = HyperMap()
        self.parallel_mode = get_auto_parallel_context("parallel_mode")
        self.reducer_flag = self.parallel_mode in (ParallelMode.DATA_PARALLEL, ParallelMode.HYBRID_PARALLEL)
        self.grad_reducer = _identity
        if self.reducer_flag:
            self.mean = get_auto_parallel_context("gradients_mean")
            self.degree = get_auto_parallel_context("device_num")
            self.grad_reducer = DistributedGradReducer(self.weights, self.mean, self.degree)

    def _fill(self, like, value):
        return Tensor(np.full(like.shape, value, like.dtype.np))

    def construct(self, *inputs):
        loss = self.network(*inputs)
        grads = self.grad(self.network, self.weights)(*inputs, self._fill(loss, self.sens))
        grads = self.grad_reducer(grads)
        self.optimizer(grads)
        return loss
