"""MindSpore's `P.BatchNorm(is_training=False, epsilon=1e-5, momentum=0.1, data_format="NCHW")(x, scale, bias,
mean, variance)`, returning its five results (ir/ops/batch_norm.py).

In training the call also updates the moving statistics: a `mean` or `variance` given as a Parameter
takes (1 - momentum) * old + momentum * batch (batch_mean, batch_variance: the unbiased variance), written
as an assign (graphkernel/assign.py): in GRAPH_MODE at the end of the compiled call, into the Parameter's
own storage when nothing reads the old value after (kernels/in_place.py); in PYNATIVE_MODE at once. A
plain Tensor given there is read and left as it is.

In GRAPH_MODE a training call reads the moving statistics as they were when the step began (training's
results do not depend on them) and updates from that value. So a network traced twice in one step, as
TrainOneStepCell does (the loss, then the gradient's own forward), builds the same nodes twice, CSE keeps
one, and the statistics move once per step, as in MindSpore 2.10 (measured: momentum 0.9 from zeros gives
0.1 x the batch mean after one step). A layer called twice in one forward likewise updates once.
"""
from __future__ import annotations

from ir.ops import get
from graphkernel.assign import assign
from graphkernel.ops.primitive import Primitive
from graphkernel.tensor import Parameter
from graphkernel.tracing.trace import SymbolicTensor, active_trace


class BatchNorm(Primitive):
    """MindSpore's BatchNorm: see the module doc."""
    op = "BatchNorm"
    num_tensors = 5
    signature = ("P.BatchNorm(is_training=False, epsilon=1e-05, momentum=0.1, data_format='NCHW')(x, scale, bias, "
                 "mean, variance) -> (y, batch_mean, batch_variance, reserve_space_1, reserve_space_2)")

    def __call__(self, x, scale, bias, mean, variance):
        attrs = get(self.op).check_attrs(self.attrs)   # with the row's defaults
        params = (mean, variance)
        trace = active_trace()
        if attrs["is_training"] and trace is not None:   # the step's starting statistics (the module doc)
            mean, variance = (SymbolicTensor(trace.parameter_input(v)) if isinstance(v, Parameter) else v
                              for v in params)
        outs = super().__call__(x, scale, bias, mean, variance)
        if attrs["is_training"]:
            momentum = attrs["momentum"]
            for param, moving, batch in ((params[0], mean, outs[1]), (params[1], variance, outs[2])):
                if isinstance(param, Parameter):
                    assign(param, moving * (1.0 - momentum) + batch * momentum)
        return outs
