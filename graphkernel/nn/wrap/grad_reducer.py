"""MindSpore's `DistributedGradReducer(parameters, mean=None, degree=None, fusion_type=1, group=...)`
(`mindspore.nn.wrap.grad_reducer`): the AllReduce of the gradients over the data-parallel group, divided
by its size when `mean`. graphkernel runs one device (graphkernel/communication/parallel_context.py): the group is
one member, so the reduced gradients are the gradients."""
from __future__ import annotations

from graphkernel.cell import Cell
from graphkernel.nn.wrap.cell_wrapper import TrainCellError
from graphkernel.communication.parallel_context import get_auto_parallel_context


class DistributedGradReducer(Cell):
    def __init__(self, parameters, mean=None, degree=None, fusion_type=1, group=None):
        super().__init__(auto_prefix=False)
        self.mean = get_auto_parallel_context("gradients_mean") if mean is None else bool(mean)
        if degree is not None and (isinstance(degree, bool) or not isinstance(degree, int) or degree < 1):
            raise TrainCellError(f"DistributedGradReducer: degree must be a positive int, got {degree!r}")
        self.degree = 1 if degree is None else degree
        self.parameter_count = len(tuple(parameters))
        self.split_fusion = False

    def construct(self, grads):
        return grads

    def __call__(self, grads):
        """The identity in any mode (nothing to compile: a group of one device)."""
        return grads
