"""Loss scaling, MindSpore's (`mindspore.nn.wrap.loss_scale`).

    TrainOneStepWithLossScaleCell(network, optimizer, scale_sense)        -> (loss, overflow, scale)
        scale_sense: a DynamicLossScaleUpdateCell / FixedLossScaleUpdateCell, or a Tensor of one element
        the loss's gradient is seeded with the scale; the gradients are divided by it; `overflow` says
        whether the backward overflowed; on overflow the optimizer's updates do not happen (every
        Parameter keeps its bits) and a dynamic scale is lowered. The scale returned is the
        `scale_sense` Parameter after the update cell ran (MindSpore returns it so).
    DynamicLossScaleUpdateCell(loss_scale_value, scale_factor, scale_window)
        on overflow: scale = max(scale / scale_factor, 1); after scale_window steps without one:
        scale = scale * scale_factor
    FixedLossScaleUpdateCell(loss_scale_value)                            the scale never changes

Its construct is MindSpore's, written from its three methods, which subclasses (the official BERT
cells) call in their own constructs:

    status, scaling_sens = self.start_overflow_check(loss, scaling_sens)
    cond = self.get_overflow_status(status, grads)
    overflow = self.process_loss_scale(cond)      # the update cell on scale_sense
    if not overflow:                              # a tensor condition (graphkernel/tracing/branching.py)
        self.optimizer(grads)

How the overflow is found follows MindSpore's targets, chosen by the same attributes: on the emulated
AI Core the default is `ascend_910b_target` with the INFNAN check over the gradients
(`enable_allfinite`: one fused IsNan/IsInf reduction; False: IsFinite per gradient, summed);
`ascend_910a_target = True` or `_ascend_check_overflow_mode = "SATURATION_MODE"` checks the sticky
float status instead (NPUClearFloatStatusV2 after the loss, NPUGetFloatStatusV2 after the gradients:
any kernel between them that produced an inf or a NaN); `gpu_target = True` sums FloatStatus per
gradient. Under DATA_PARALLEL (`is_distributed`) each path sums its flag over the ranks with
`self.allreduce` (P.AllReduce), as MindSpore's cell does, so an overflow on one rank makes every rank
skip the update and lower its scale (docs/distributed.md).
"""
from __future__ import annotations

import os

import numpy as np

from ir.dtypes import DType
from graphkernel.assign import assign, depend
from graphkernel.cell import Cell
from graphkernel.nn.wrap.cell_wrapper import TrainCellError, TrainOneStepCell
from graphkernel.ops import operations as P
from graphkernel.ops.multitype import HyperMap, MultitypeFuncGraph, partial
from graphkernel.communication.parallel_context import ParallelMode
from graphkernel.tensor import Parameter, Tensor

_grad_scale = MultitypeFuncGraph("grad_scale")


@_grad_scale.register("Tensor", "Tensor")
def _tensor_grad_scale(scale, grad):
    return grad * P.Cast()(P.Reciprocal()(scale), grad.dtype)


_grad_overflow = MultitypeFuncGraph("_grad_overflow")


@_grad_overflow.register("Tensor")
def _tensor_grad_overflow(grad):
    return P.FloatStatus()(grad)


_ascend_grad_overflow = MultitypeFuncGraph("_ascend_grad_overflow")


@_ascend_grad_overflow.register("Tensor")
def _tensor_ascend_grad_overflow(grad):
    finite = P.Cast()(P.IsFinite()(grad), DType.float32)
    return P.Reshape()(1.0 - P.ReduceMin()(finite, ()), (-1,))


def all_finite_violated(grads):
    """A bool scalar: whether any gradient holds an inf or a NaN (MindSpore's AllFinite, negated)."""
    count = None
    for g in grads:
        bad = P.Cast()(P.LogicalOr()(P.IsNan()(g), P.IsInf()(g)), DType.float32)
        total = P.ReduceSum()(bad, ())
        count = total if count is None else count + total
    return P.Greater()(count, 0.0)


class TrainOneStepWithLossScaleCell(TrainOneStepCell):
    def __init__(self, network, optimizer, scale_sense):
        super().__init__(network, optimizer, sens=None)
        self.hyper_map = HyperMap()
        self.base = Tensor(np.array(1.0, np.float32))
        self.base0 = Tensor(np.array(0, np.int32))
        self.is_distributed = self.parallel_mode != ParallelMode.STAND_ALONE
        self.allreduce = P.AllReduce()   # the overflow flag, summed over the ranks: every rank skips alike
        self.gpu_target = False
        self.ascend_910a_target = False
        self.ascend_910b_target = True
        self._ascend_check_overflow_mode = os.environ.get("MS_ASCEND_CHECK_OVERFLOW_MODE")
        self.enable_allfinite = True
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
        scaling_sens = self.scale_sense
        status, scaling_sens = self.start_overflow_check(loss, scaling_sens)
        scaling_sens_filled = P.OnesLike()(loss) * P.Cast()(scaling_sens, loss.dtype)
        grads = self.grad(self.network, self.weights)(*inputs, scaling_sens_filled)
        grads = self.hyper_map(partial(_grad_scale, scaling_sens), grads)
        grads = self.grad_reducer(grads)
        cond = self.get_overflow_status(status, grads)
        overflow = self.process_loss_scale(cond)
        if not overflow:
            loss = depend(loss, self.optimizer(grads))
        return loss, cond, scaling_sens

    def set_sense_scale(self, sens):
        self.scale_sense.set_data(np.asarray(sens.asnumpy() if isinstance(sens, Tensor) else sens, np.float32)
                                  .reshape(self.scale_sense.shape))

    # -- MindSpore's overflow protocol ------------------------------------------------------------------
    def _saturation_mode(self) -> bool:
        return self.ascend_910a_target or (self.ascend_910b_target and
                                           self._ascend_check_overflow_mode == "SATURATION_MODE")

    def start_overflow_check(self, pre_cond, compute_input):
        """(status, compute_input): in saturation mode the float status is cleared after `pre_cond` and
        before what reads `compute_input`; otherwise status is a zero (8,) int32 tensor, unused."""
        status = Tensor(np.zeros(8, np.int32))
        if self._saturation_mode():
            status = depend(status, pre_cond)
            clear_status = P.NPUClearFloatStatusV2()(status)
            compute_input = depend(compute_input, clear_status)
        return status, compute_input

    def get_overflow_status(self, status, compute_output):
        """A bool: whether the computation of `compute_output` (the gradients) overflowed, on any rank
        when distributed (the flag summed over the group, as MindSpore's cells do)."""
        if self.gpu_target:
            return self._infnan_overflow(_grad_overflow, compute_output)
        if self.ascend_910b_target and not self._saturation_mode():
            if self.enable_allfinite:
                overflow = all_finite_violated(compute_output)
                if self.is_distributed:
                    summed = self.allreduce(P.Cast()(overflow, DType.float32))
                    overflow = P.Cast()(summed, DType.bool)
                return overflow
            return self._infnan_overflow(_ascend_grad_overflow, compute_output)
        status = depend(status, compute_output)
        get_status = P.NPUGetFloatStatusV2()(status)
        if self.is_distributed:
            get_status = self.allreduce(get_status)
        status = depend(status, get_status)
        clear_status = P.NPUClearFloatStatusV2()(status)
        get_status = depend(get_status, clear_status)
        finite = P.Equal()(get_status, self.base0)
        return P.LogicalNot()(P.Cast()(P.ReduceMin()(P.Cast()(finite, DType.float32), ()), DType.bool))

    def _infnan_overflow(self, check, compute_output):
        flag_sum = P.Reshape()(P.AddN()(self.hyper_map(partial(check), compute_output)), ())
        if self.is_distributed:
            flag_sum = self.allreduce(flag_sum)
        return P.GreaterEqual()(flag_sum, self.base)

    def process_loss_scale(self, overflow):
        """The update cell on scale_sense (it lowers or raises the scale); returns the overflow."""
        if self.loss_scaling_manager is not None:
            return self.loss_scaling_manager(self.scale_sense, overflow)
        return overflow


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
