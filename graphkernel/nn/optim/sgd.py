"""SGD and Momentum, MindSpore's formulas (g: the gradient after weight decay and loss scale).

    SGD(params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
        loss_scale=1.0)
        momentum > 0:  v = g on the first step, then v = momentum * v + (1 - dampening) * g
                       p = p - lr * (g + momentum * v) with nesterov, else p = p - lr * v
        momentum = 0:  p = p - lr * g
    Momentum(params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0, use_nesterov=False)
        v = momentum * v + g
        p = p - lr * (g + momentum * v) with use_nesterov, else p = p - lr * v
"""
from __future__ import annotations

import numpy as np

from graphkernel.nn.optim.optimizer import Optimizer, OptimizerError, _check_float, f32, write
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter


class SGD(Optimizer):
    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.momentum_value = _check_float("SGD", "momentum", momentum, 0.0)
        self.dampening = _check_float("SGD", "dampening", dampening, 0.0)
        if not isinstance(nesterov, bool):
            raise OptimizerError(f"SGD: nesterov must be a bool, got {type(nesterov).__name__}")
        if nesterov and (self.momentum_value <= 0.0 or self.dampening != 0.0):
            raise OptimizerError(f"SGD: nesterov needs momentum > 0 and dampening 0, got momentum "
                                 f"{self.momentum_value}, dampening {self.dampening}")
        self.nesterov = nesterov
        self.momentum = Parameter(np.array(self.momentum_value, np.float32), name="momentum", requires_grad=False)
        if self.momentum_value > 0.0:
            self.accum = self.parameters.clone(prefix="accum", init="zeros")
            self.stat = self.parameters.clone(prefix="stat", init="ones")   # 1 until the first step

    def construct(self, gradients):
        gradients = self.scale_grad(self.decay_weight(gradients))
        lrs = self._lrs(self.get_lr())
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        for k, (p, g, lr) in enumerate(zip(self.parameters, gradients, lrs)):
            g = f32(g)
            if self.momentum_value > 0.0:
                accum, stat = self.accum[k], self.stat[k]
                first = P.Greater()(stat, 0.0)
                v = P.Select()(first, g, self.momentum * f32(accum) + g * (1.0 - self.dampening))
                write(accum, v)
                write(stat, stat * 0.0)
                step = g + self.momentum * v if self.nesterov else v
            else:
                step = g
            write(p, f32(p) - step * lr)
        return True


class Momentum(Optimizer):
    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0, use_nesterov=False):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if not isinstance(momentum, float):
            raise OptimizerError(f"Momentum: momentum must be a float, got {type(momentum).__name__}")
        self.momentum_value = _check_float("Momentum", "momentum", momentum, 0.0)
        if not isinstance(use_nesterov, bool):
            raise OptimizerError(f"Momentum: use_nesterov must be a bool, got {type(use_nesterov).__name__}")
        self.use_nesterov = use_nesterov
        self.momentum = Parameter(np.array(self.momentum_value, np.float32), name="momentum", requires_grad=False)
        self.moments = self.parameters.clone(prefix="moments", init="zeros")

    def construct(self, gradients):
        gradients = self.scale_grad(self.decay_weight(gradients))
        lrs = self._lrs(self.get_lr())
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        for p, v, g, lr in zip(self.parameters, self.moments, gradients, lrs):
            g = f32(g)
            v_new = f32(v) * self.momentum + g
            write(v, v_new)
            step = g + v_new * self.momentum if self.use_nesterov else v_new
            write(p, f32(p) - step * lr)
        return True
