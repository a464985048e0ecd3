"""Lamb(params, learning_rate, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0), MindSpore's formula
(t: the step, from 1; norms are each Parameter's L2 norm):

    m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g
    r = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay * p
    trust = ||p|| / ||r||, or 1 when either norm is 0
    p = p - lr * trust * r
"""
from __future__ import annotations

from graphkernel.nn.optim.adam import _betas
from graphkernel.nn.optim.optimizer import Optimizer, f32, write
from graphkernel.ops import operations as P


class Lamb(Optimizer):
    def __init__(self, params, learning_rate, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self.beta1, self.beta2, self.eps = _betas("Lamb", beta1, beta2, eps)
        self.moments1 = self.parameters.clone(prefix="lamb_m", init="zeros")
        self.moments2 = self.parameters.clone(prefix="lamb_v", init="zeros")

    def construct(self, gradients):
        lrs = self._lrs(self.get_lr())
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        t = P.Cast()(P.Reshape()(self.global_step, ()), "float32")
        c1 = 1.0 - P.Pow()(self.beta1, t)   # bias corrections
        c2 = 1.0 - P.Pow()(self.beta2, t)
        norm = lambda x: P.Sqrt()(P.ReduceSum()(P.Square()(x), ()))  # noqa: E731
        for p, m, v, g, lr, wd, flag in zip(self.parameters, self.moments1, self.moments2, gradients, lrs,
                                            self.weight_decays, self.decay_flags):
            g, p32 = f32(g), f32(p)
            m_new = f32(m) * self.beta1 + g * (1.0 - self.beta1)
            v_new = f32(v) * self.beta2 + P.Square()(g) * (1.0 - self.beta2)
            write(m, m_new)
            write(v, v_new)
            r = (m_new / c1) / (P.Sqrt()(v_new / c2) + self.eps)
            if flag and wd > 0:
                r = r + p32 * wd
            w_norm, r_norm = norm(p32), norm(r)
            ok = P.LogicalAnd()(P.Greater()(w_norm, 0.0), P.Greater()(r_norm, 0.0))
            trust = P.Select()(ok, w_norm / P.Select()(ok, r_norm, 1.0), 1.0)
            write(p, p32 - r * (trust * lr))
        return True
