"""MindSpore's `ops.operations._grad_ops`: the explicit gradient primitives, with its names, signatures,
input orders and results; each is the composite gradient op the autodiff emits (ir/ops/grad_ops.py,
ir/ops/elementwise_grads.py), so it expands and fuses the same way.

    from graphkernel.ops.operations import _grad_ops as G      # or: import graphkernel.ops.operations._grad_ops as G
    dx, dgamma, dbeta = G.LayerNormGrad(begin_norm_axis=1, begin_params_axis=1)(x, dy, variance, mean, gamma)
    dx = G.SoftmaxGrad()(y, dy)
    dx = G.GeLUGrad()(dy, x, y)
"""
from __future__ import annotations

from ir.ops import OPS
from graphkernel.ops.operations import _primitive

# MindSpore 2.10's _grad_ops names graphkernel has a row for, and SoftmaxGradExt
GRAD_PRIMITIVES = ("AvgPoolGrad", "BatchNormGrad", "BiasAddGrad", "Conv2DBackpropFilter", "DropoutGrad",
                   "FastGeLUGrad", "GeLUGrad", "LayerNormGrad", "LogSoftmaxGrad", "MaxPoolGrad", "MaximumGrad",
                   "MinimumGrad", "ReluGrad", "SigmoidCrossEntropyWithLogitsGrad", "SigmoidGrad", "SoftmaxGrad",
                   "SqrtGrad", "TanhGrad",
                   "SoftmaxGradExt")   # the last: MindSpore's graph-kernel composite, no 2.10 primitive

for _name in GRAD_PRIMITIVES:
    globals()[_name] = _primitive(OPS[_name], __name__)

__all__ = list(GRAD_PRIMITIVES)
