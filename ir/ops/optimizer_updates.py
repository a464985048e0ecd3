"""MindSpore's in-place optimizer primitives that its own optimizers are built from (P.ApplyMomentum, P.Adam,
P.FusedCastAdamWeightDecay, P.LambApplyOptimizerAssign, P.LambApplyWeightAssign): each a composite row
computing the new values, its `api.updates` naming the Parameters they are written into (the primitive
assigns them, graphkernel/ops/primitive.py) and `api.returned` the results the call returns, as
MindSpore returns them. Formulas as MindSpore 2.10 documents them and computes them on its CPU (the Lamb
pair, which has no CPU kernel there, as its graph-kernel expanders write them); each is computed in
float32 and rounded once to its output's dtype.

    ApplyMomentum(use_nesterov, use_locking, gradient_scale)(variable, accumulation, learning_rate, gradient, momentum)
        g = gradient * gradient_scale;  accumulation' = accumulation * momentum + g
        variable' = variable - lr * accumulation'   (nesterov: - lr * (g + accumulation' * momentum))
        returns variable'; accumulation is updated too
    Adam(use_locking, use_nesterov)(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, gradient)
        m' = beta1 m + (1 - beta1) g;  v' = beta2 v + (1 - beta2) g^2;  l = lr sqrt(1 - beta2_power) / (1 - beta1_power)
        var' = var - l m' / (sqrt(v') + epsilon)   (nesterov: (beta1 m' + (1 - beta1) g) in place of m')
    FusedCastAdamWeightDecay(use_locking)(var, m, v, lr, beta1, beta2, epsilon, decay, gradient, global_norm)
        g = gradient / global_norm (gradient float16, var float16 or float32, m and v float32), then
        AdamWeightDecay's update: var' = var - lr (m' / (sqrt(v') + epsilon) + decay var)
    LambApplyOptimizerAssign()(gradient, v, m, var, beta1, sub1, beta2, sub2, epsilon, steps, do_use_weight,
                               weight_decay) -> (update, v', m')
        v' = v beta2 + g^2 sub2;  m' = m beta1 + g sub1
        update = (m' / (1 - beta1^steps)) / (sqrt(v' / (1 - beta2^steps)) + epsilon) + var weight_decay do_use_weight
    LambApplyWeightAssign()(w_norm, g_norm, lr, update, var) -> var'
        ratio = w_norm / g_norm where both are > 0, else 1;  var' = var - lr ratio update

None has a gradient through its update (an optimizer step).
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.errors import DTypeError, ShapeError
from ir.ops.checks import fmt, is_bool, is_float, require
from ir.ops.composite import composite
from ir.ops.registry import Api, Attr, Precision

UPDATE = Precision("black", True, "an optimizer update: float32 master weights and moments")
F32 = np.float32


def _scalars(types, names, where):
    for name, t in zip(names, types):
        require(t.dtype, "float")
        if t.size != 1 or t.rank > 1:
            raise ShapeError(f"{name} must be a scalar (shape () or (1,)), got {t}")


def _same(tensors, names):
    first = tensors[0]
    for name, t in zip(names[1:], tensors[1:]):
        if t.shape != first.shape:
            raise ShapeError(f"{names[0]} {fmt(first.shape)} and {name} {fmt(t.shape)} must have one shape")
        if t.dtype != first.dtype:
            raise DTypeError(f"{names[0]} is {first.dtype}, {name} {t.dtype}: they must have one dtype")
    require(first.dtype, "float")


def _scalar(a):
    return np.asarray(a, F32).reshape(())


# --- ApplyMomentum ----------------------------------------------------------------------------------
MOMENTUM_INPUTS = ("variable", "accumulation", "learning_rate", "gradient", "momentum")


def _momentum_infer(types, attrs):
    var, acc, lr, grad, mom = types
    _same((var, acc, grad), ("variable", "accumulation", "gradient"))
    _scalars((lr, mom), ("learning_rate", "momentum"), "ApplyMomentum")
    return var, acc


def _momentum(a, attrs):
    var, acc, grad = (x.astype(F32) for x in (a[0], a[1], a[3]))
    lr, mom = _scalar(a[2]), _scalar(a[4])
    g = grad * F32(attrs["gradient_scale"])
    acc_new = acc * mom + g
    step = g + acc_new * mom if attrs["use_nesterov"] else acc_new
    return (var - lr * step).astype(a[0].dtype), acc_new.astype(a[1].dtype)


composite("ApplyMomentum", 5, _momentum_infer, _momentum,
          (Attr("use_nesterov", False, is_bool), Attr("use_locking", False, is_bool),
           Attr("gradient_scale", 1.0, is_float)),
          precision=UPDATE, doc="MindSpore's momentum update of variable, accumulation updated too",
          api=Api(inputs=MOMENTUM_INPUTS, updates=((0, 0), (1, 1)), returned=1))

# --- Adam -------------------------------------------------------------------------------------------
ADAM_INPUTS = ("var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "gradient")


def _adam_infer(types, attrs):
    var, m, v, *scalars, grad = types
    _same((var, m, v, grad), ("var", "m", "v", "gradient"))
    _scalars(scalars, ADAM_INPUTS[3:9], "Adam")
    return var, m, v


def _adam(a, attrs):
    var, m, v, g = (x.astype(F32) for x in (a[0], a[1], a[2], a[9]))
    b1p, b2p, lr, b1, b2, eps = (_scalar(x) for x in a[3:9])
    one = F32(1)
    m_new = b1 * m + (one - b1) * g
    v_new = b2 * v + (one - b2) * g * g
    step = lr * np.sqrt(one - b2p) / (one - b1p)
    top = b1 * m_new + (one - b1) * g if attrs["use_nesterov"] else m_new
    var_new = var - step * top / (np.sqrt(v_new) + eps)
    return tuple(x.astype(t.dtype) for x, t in zip((var_new, m_new, v_new), a[:3]))


composite("Adam", 10, _adam_infer, _adam, (Attr("use_locking", False, is_bool), Attr("use_nesterov", False, is_bool)),
          precision=UPDATE, doc="MindSpore's fused Adam: (var, m, v) updated with bias correction",
          api=Api(inputs=ADAM_INPUTS, updates=((0, 0), (1, 1), (2, 2))))

# --- FusedCastAdamWeightDecay -----------------------------------------------------------------------
CAST_ADAM_INPUTS = ("var", "m", "v", "lr", "beta1", "beta2", "epsilon", "decay", "gradient", "global_norm")


def _cast_adam_infer(types, attrs):
    var, m, v, *scalars, grad, norm = types
    if var.dtype not in (DType.float16, DType.float32):
        raise DTypeError(f"var must be float16 or float32, got {var.dtype}")
    for name, t in (("m", m), ("v", v)):
        if t.dtype != DType.float32:
            raise DTypeError(f"{name} must be float32, got {t.dtype}")
    if grad.dtype != DType.float16:
        raise DTypeError(f"gradient must be float16 (its cast is fused in), got {grad.dtype}")
    if not var.shape == m.shape == v.shape == grad.shape:
        raise ShapeError(f"var {fmt(var.shape)}, m {fmt(m.shape)}, v {fmt(v.shape)} and gradient {fmt(grad.shape)} "
                         "must have one shape")
    _scalars((*scalars, norm), CAST_ADAM_INPUTS[3:8] + ("global_norm",), "FusedCastAdamWeightDecay")
    return var, m, v


def _cast_adam(a, attrs):
    var, m, v = (x.astype(F32) for x in a[:3])
    lr, b1, b2, eps, decay, norm = (_scalar(x) for x in (*a[3:8], a[9]))
    g = a[8].astype(F32) / norm
    one = F32(1)
    m_new = m * b1 + g * (one - b1)
    v_new = v * b2 + g * g * (one - b2)
    var_new = var - lr * (m_new / (np.sqrt(v_new) + eps) + decay * var)
    return var_new.astype(a[0].dtype), m_new, v_new


composite("FusedCastAdamWeightDecay", 10, _cast_adam_infer, _cast_adam, (Attr("use_locking", False, is_bool),),
          precision=UPDATE, doc="AdamWeightDecay with a float16 gradient scaled by 1 / global_norm",
          api=Api(inputs=CAST_ADAM_INPUTS, updates=((0, 0), (1, 1), (2, 2))))

# --- LAMB -------------------------------------------------------------------------------------------
LAMB_INPUTS = ("gradient", "v", "m", "var", "beta1", "sub1", "beta2", "sub2", "epsilon", "steps", "do_use_weight",
               "weight_decay")


def _lamb_opt_infer(types, attrs):
    grad, v, m, var, *scalars = types
    _same((grad, v, m, var), ("gradient", "v", "m", "var"))
    _scalars(scalars, LAMB_INPUTS[4:], "LambApplyOptimizerAssign")
    return grad, v, m


def _lamb_opt(a, attrs):
    g, v, m, var = (x.astype(F32) for x in a[:4])
    b1, sub1, b2, sub2, eps, steps, use, decay = (_scalar(x) for x in a[4:])
    one = F32(1)
    v_new = v * b2 + g * g * sub2
    m_new = m * b1 + g * sub1
    with np.errstate(divide="ignore", invalid="ignore"):
        m_hat = m_new / (one - np.exp(np.log(b1) * steps))
        v_hat = v_new / (one - np.exp(np.log(b2) * steps))
        update = m_hat / (np.sqrt(v_hat) + eps) + var * decay * use
    return tuple(x.astype(a[0].dtype) for x in (update, v_new, m_new))


composite("LambApplyOptimizerAssign", 12, _lamb_opt_infer, _lamb_opt, precision=UPDATE,
          doc="LAMB's bias-corrected Adam direction plus weight decay; v and m updated",
          api=Api(inputs=LAMB_INPUTS, updates=((1, 1), (2, 2))))


def _lamb_weight_infer(types, attrs):
    w_norm, g_norm, lr, update, var = types
    _same((update, var), ("update", "var"))
    _scalars((w_norm, g_norm, lr), ("w_norm", "g_norm", "lr"), "LambApplyWeightAssign")
    return (var,)


def _lamb_weight(a, attrs):
    w_norm, g_norm, lr = (_scalar(x) for x in a[:3])
    update, var = a[3].astype(F32), a[4].astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where((w_norm > 0) & (g_norm > 0), w_norm / g_norm, F32(1)).astype(F32)
    return (var - lr * ratio * update).astype(a[4].dtype)


composite("LambApplyWeightAssign", 5, _lamb_weight_infer, _lamb_weight, precision=UPDATE,
          doc="LAMB's trust-ratio step of var", api=Api(inputs=("w_norm", "g_norm", "lr", "update", "var"),
                                                        updates=((0, 4),)))
