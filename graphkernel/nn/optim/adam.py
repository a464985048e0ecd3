"""Adam, AdamWeightDecay and AdamW (g: the gradient; t: the step, from 1; all in float32).

    Adam(params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, use_locking=False,
         use_nesterov=False, weight_decay=0.0, loss_scale=1.0)           MindSpore's (ApplyAdam)
        g = g + weight_decay * p (L2, as decay_weight), divided by loss_scale
        m = m + (g - m) * (1 - beta1);  v = v + (g * g - v) * (1 - beta2)
        lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
        p = p - lr_t * m / (sqrt(v) + eps)        (use_nesterov: m * beta1 + (1 - beta1) * g for m)
    AdamWeightDecay(params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0)
        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
        p = p - lr * (m / (sqrt(v) + eps) + weight_decay * p)   MindSpore's: no bias correction
    AdamW(params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2)
        p = p * (1 - lr * weight_decay)                            torch's formula
        m, v as AdamWeightDecay;  p = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
"""
from __future__ import annotations

import numpy as np

from graphkernel.nn.optim.optimizer import Optimizer, OptimizerError, _check_float, f32, write
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter


def _betas(cls, beta1, beta2, eps):
    return (_check_float(cls, "beta1", beta1, 0.0, 1.0, low_open=True, high_open=True),
            _check_float(cls, "beta2", beta2, 0.0, 1.0, low_open=True, high_open=True),
            _check_float(cls, "eps", eps, 0.0, low_open=True))


class _AdamBase(Optimizer):
    def __init__(self, cls, params, learning_rate, beta1, beta2, eps, weight_decay, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.beta1, self.beta2, self.eps = _betas(cls, beta1, beta2, eps)
        self.moment1 = self.parameters.clone(prefix="moment1", init="zeros")
        self.moment2 = self.parameters.clone(prefix="moment2", init="zeros")

    def _moments(self, m, v, g):
        m_new = f32(m) * self.beta1 + g * (1.0 - self.beta1)
        v_new = f32(v) * self.beta2 + P.Square()(g) * (1.0 - self.beta2)
        write(m, m_new)
        write(v, v_new)
        return m_new, v_new

    def _powers(self):
        """beta1^t and beta2^t of this step (their Parameters advance)."""
        beta1_power = self.beta1_power * self.beta1
        beta2_power = self.beta2_power * self.beta2
        self.beta1_power = beta1_power
        self.beta2_power = beta2_power
        return beta1_power, beta2_power


class Adam(_AdamBase):
    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, use_locking=False,
                 use_nesterov=False, weight_decay=0.0, loss_scale=1.0, use_amsgrad=False):
        super().__init__("Adam", params, learning_rate, beta1, beta2, eps, weight_decay, loss_scale)
        for name, value in (("use_locking", use_locking), ("use_nesterov", use_nesterov),
                            ("use_amsgrad", use_amsgrad)):
            if not isinstance(value, bool):
                raise OptimizerError(f"Adam: {name} must be a bool, got {type(value).__name__}")
        if use_amsgrad:
            raise OptimizerError("Adam: use_amsgrad is not supported")
        self.use_nesterov = use_nesterov
        self.beta1_power = Parameter(np.array(1.0, np.float32), name="beta1_power", requires_grad=False)
        self.beta2_power = Parameter(np.array(1.0, np.float32), name="beta2_power", requires_grad=False)

    def construct(self, gradients):
        gradients = self.scale_grad(self.decay_weight(gradients))
        lrs = self._lrs(self.get_lr())
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        beta1_power, beta2_power = self._powers()
        correction = P.Sqrt()(1.0 - beta2_power) / (1.0 - beta1_power)
        for p, m, v, g, lr in zip(self.parameters, self.moment1, self.moment2, gradients, lrs):
            g = f32(g)
            m_new, v_new = self._moments(m, v, g)
            direction = m_new * self.beta1 + g * (1.0 - self.beta1) if self.use_nesterov else m_new
            write(p, f32(p) - direction * (lr * correction) / (P.Sqrt()(v_new) + self.eps))
        return True


class AdamWeightDecay(_AdamBase):
    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0):
        super().__init__("AdamWeightDecay", params, learning_rate, beta1, beta2, eps, weight_decay)

    def construct(self, gradients):
        lrs = self._lrs(self.get_lr())
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        for p, m, v, g, lr, wd, flag in zip(self.parameters, self.moment1, self.moment2, gradients, lrs,
                                            self.weight_decays, self.decay_flags):
            m_new, v_new = self._moments(m, v, f32(g))
            update = m_new / (P.Sqrt()(v_new) + self.eps)
            p32 = f32(p)
            if flag and wd > 0:
                update = update + p32 * wd
            write(p, p32 - update * lr)
        return True


class AdamW(_AdamBase):
    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2):
        super().__init__("AdamW", params, learning_rate, beta1, beta2, eps, weight_decay)
        self.beta1_power = Parameter(np.array(1.0, np.float32), name="beta1_power", requires_grad=False)
        self.beta2_power = Parameter(np.array(1.0, np.float32), name="beta2_power", requires_grad=False)
        if not self.is_group:   # torch's AdamW decays every Parameter
            self.decay_flags = (True,) * self.param_length

    def construct(self, gradients):
        lrs = self._lrs(self.get_lr())
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        beta1_power, beta2_power = self._powers()
        for p, m, v, g, lr, wd, flag in zip(self.parameters, self.moment1, self.moment2, gradients, lrs,
                                            self.weight_decays, self.decay_flags):
            p32 = f32(p)
            if flag and wd > 0:
                p32 = p32 * (1.0 - lr * wd)
            m_new, v_new = self._moments(m, v, f32(g))
            denom = P.Sqrt()(v_new / (1.0 - beta2_power)) + self.eps
            write(p, p32 - (m_new / (1.0 - beta1_power)) * lr / denom)
        return True
