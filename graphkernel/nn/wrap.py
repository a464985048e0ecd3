"""Training cells with MindSpore's names and contracts: one call is one step (forward, backward, the
optimizer's updates), compiled as one graph in GRAPH_MODE.

    TrainOneStepCell(network, optimizer, sens=None)                       -> loss
    TrainOneStepWithLossScaleCell(network, optimizer, scale_sense)        -> (loss, overflow, scale)
        scale_sense: a DynamicLossScaleUpdateCell / FixedLossScaleUpdateCell, or a Tensor of one element
        the loss's gradient is seeded with the scale; the gradients are divided by it; `overflow` is
        whether any gradient holds an inf or a NaN (one fused check); on overflow the optimizer's
        updates do not happen (every Parameter keeps its bits) and a dynamic scale is lowered
    DynamicLossScaleUpdateCell(loss_scale_value, scale_factor, scale_window)
        on overflow: scale = max(scale / scale_factor, 1); after scale_window steps without one:
        scale = scale * scale_factor
    FixedLossScaleUpdateCell(loss_scale_value)                            the scale never changes

The attributes MindSpore's subclasses read are here: network, optimizer, weights, grad, grad_reducer,
reducer_flag, sens, scale_sense, loss_scaling_manager.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ir.dtypes import DType
from ir.errors import GraphKernelError
from graphkernel.assign import assign
from graphkernel.cell import Cell
from graphkernel.gradients import GradOperation
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter, Tensor
from graphkernel.trace import SymbolicTensor, active_trace


class TrainCellError(GraphKernelError, TypeError):
    """A train cell built from arguments MindSpore refuses."""


def _identity(x):
    return x


@contextlib.contextmanager
def updates_only_if(condition):
    """Parameter updates inside happen only if `condition` (a one-element bool tensor) holds: in a trace,
    each becomes a Select between the new and the old value; run op by op, the body is skipped."""
    trace = active_trace()
    if trace is None:
        yield bool(np.asarray(condition.asnumpy()).reshape(-1)[0])
        return
    value = condition.value if isinstance(condition, SymbolicTensor) else trace.constant(condition.asnumpy())
    trace.update_conditions.append(value)
    try:
        yield True
    finally:
        trace.update_conditions.pop()


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
        self.reducer_flag = False
        self.grad_reducer = _identity

    def _fill(self, like, value):
        return Tensor(np.full(like.shape, value, like.dtype.np))

    def construct(self, *inputs):
        loss = self.network(*inputs)
        grads = self.grad(self.network, self.weights)(*inputs, self._fill(loss, self.sens))
        grads = self.grad_reducer(grads)
        self.optimizer(grads)
        return loss


def _all_finite_violated(grads):
    """A bool scalar: whether any gradient holds an inf or a NaN."""
    count = None
    for g in grads:
        bad = P.Cast()(P.LogicalOr()(P.IsNan()(g), P.IsInf()(g)), DType.float32)
        total = P.ReduceSum()(bad, ())
        count = total if count is None else count + total
    return P.Greater()(count, 0.0)


class TrainOneStepWithLossScaleCell(TrainOneStepCell):
    def __init__(self, network, optimizer, scale_sense):
        super().__init__(network, optimizer, sens=None)
        self.loss_scaling_manager = None
        if isinstance(scale_sense, Cell):
            self.loss_scaling_manager = scale_sense
            value = np.array(scale_sense.get_loss_scale(), np.float32)
        elif isinstance(scale_sense, Tensor):
            if scale_sense.shape not in ((), (1,)):
                raise TrainCellError(f"TrainOneStepWithLossScaleCell: scale_sense must hold one element, got "
                                     f"shape {list(scale_sense.shape)}")
            value = np.asarray(scale_sense.asnumpy(), np.float32)
        else:
            raise TrainCellError("TrainOneStepWithLossScaleCell: scale_sense must be a Cell or a Tensor, got "
                                 f"{type(scale_sense).__name__}")
        self.scale_sense = Parameter(value, name="scale_sense", requires_grad=False)

    def construct(self, *inputs):
        loss = self.network(*inputs)
        scaling_sens = self.scale_sense * 1.0   # the scale this step uses (the Parameter may change below)
        filled = P.Cast()(scaling_sens, loss.dtype) * self._fill(loss, 1.0)
        grads = self.grad(self.network, self.weights)(*inputs, filled)
        grads = tuple(g * P.Cast()(P.Reciprocal()(scaling_sens), g.dtype) for g in grads)
        grads = self.grad_reducer(grads)
        cond = _all_finite_violated(grads)
        overflow = self.process_loss_scale(cond)
        with updates_only_if(P.LogicalNot()(overflow)) as run:
            if run:
                self.optimizer(grads)
        return loss, cond, scaling_sens

    def process_loss_scale(self, overflow):
        if self.loss_scaling_manager is not None:
            return self.loss_scaling_manager(self.scale_sense, overflow)
        return overflow

    def set_sense_scale(self, sens):
        self.scale_sense.set_data(np.asarray(sens.asnumpy() if isinstance(sens, Tensor) else sens, np.float32)
                                  .reshape(self.scale_sense.shape))


class DynamicLossScaleUpdateCell(Cell):
    def __init__(self, loss_scale_value, scale_factor, scale_window):
        super().__init__()
        for name, value in (("loss_scale_value", loss_scale_value), ("scale_factor", scale_factor)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise TrainCellError(f"DynamicLossScaleUpdateCell: {name} must be a positive number, got {value!r}")
        if isinstance(scale_window, bool) or not isinstance(scale_window, int) or scale_window < 1:
            raise TrainCellError(f"DynamicLossScaleUpdateCell: scale_window must be a positive int, got "
                                 f"{scale_window!r}")
        self.loss_scale_value = loss_scale_value
        self.scale_factor = float(scale_factor)
        self.scale_window = int(scale_window)
        self.cur_iter = Parameter(np.array(1, np.int32), name="current_iterator_step", requires_grad=False)
        self.last_overflow_iter = Parameter(np.array(0, np.int32), name="last_overflow_iterator_step",
                                            requires_grad=False)

    def get_loss_scale(self):
        return self.loss_scale_value

    def construct(self, loss_scale, overflow):
        lowered = P.Select()(overflow, P.Maximum()(loss_scale * (1.0 / self.scale_factor), 1.0), loss_scale)
        should_inc = P.LogicalNot()(P.Greater()(self.scale_window, self.cur_iter - self.last_overflow_iter))
        assign(self.last_overflow_iter, P.Select()(P.LogicalOr()(overflow, should_inc), self.cur_iter,
                                                   self.last_overflow_iter))
        raise_it = P.LogicalAnd()(should_inc, P.LogicalNot()(overflow))
        assign(loss_scale, P.Select()(raise_it, lowered * self.scale_factor, lowered))
        assign(self.cur_iter, self.cur_iter + 1)
        return overflow


class FixedLossScaleUpdateCell(Cell):
    def __init__(self, loss_scale_value):
        super().__init__()
        if isinstance(loss_scale_value, bool) or not isinstance(loss_scale_value, (int, float)) \
                or not loss_scale_value > 0:
            raise TrainCellError(f"FixedLossScaleUpdateCell: loss_scale_value must be a positive number, got "
                                 f"{loss_scale_value!r}")
        self.loss_scale_value = loss_scale_value

    def get_loss_scale(self):
        return self.loss_scale_value

    def construct(self, loss_scale, overflow):
        return overflow
