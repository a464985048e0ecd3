"""Ops whose results MindSpore writes back into their Parameter inputs (its "ref" inputs). Here each is a
pure op computing the new values; its row's `api.updates` says which input each result replaces, and
the primitive (graphkernel/ops/primitive.py) assigns them, under the training step's ordering rules
(graphkernel/assign.py: later reads see the new value; the write lands after every reader of the old).

    AdamWeightDecay(var, m, v, lr, beta1, beta2, epsilon, decay, gradient) -> (var', m', v')
        MindSpore's fused update, computed in float32 (float16 var, m, v read wide, rounded once):
            m' = m * beta1 + g * (1 - beta1)
            v' = v * beta2 + g * g * (1 - beta2)
            var' = var - lr * (m' / (sqrt(v') + epsilon) + decay * var)
        lr, beta1, beta2, epsilon, decay: float32 scalars (shape () or (1,)); g of var's shape and dtype
    ScatterAdd(x, indices, updates) -> x'
        x' = x, then x'[indices[i]] += updates[i] for every i (repeated indices add up, in order);
        updates of shape indices.shape + x.shape[1:]; an index outside [0, x.shape[0]) is an error

Neither has a gradient through its update (an optimizer step; ScatterAdd's is given for its values).
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.errors import DTypeError, IRError, ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_bool, require, same_dtype
from ir.ops.composite import composite
from ir.ops.registry import Api, Attr, OpDef, Pattern, Precision, register

ADAM_INPUTS = ("var", "m", "v", "lr", "beta1", "beta2", "epsilon", "decay", "gradient")


def _adam_infer(types, attrs):
    var, m, v, *scalars, grad = types
    for t in types:
        require(t.dtype, "float")
    if not var.shape == m.shape == v.shape == grad.shape:
        raise ShapeError(f"var {fmt(var.shape)}, m {fmt(m.shape)}, v {fmt(v.shape)} and gradient "
                         f"{fmt(grad.shape)} must have one shape")
    same_dtype((m, v))
    if grad.dtype != var.dtype:
        raise DTypeError(f"gradient is {grad.dtype}, var {var.dtype}: they must have one dtype")
    for name, t in zip(ADAM_INPUTS[3:8], scalars):
        if t.dtype != DType.float32 or t.size != 1 or t.rank > 1:
            raise DTypeError(f"{name} must be a float32 scalar (shape () or (1,)), got {t}")
    return var, m, v


def _adam(a, attrs):
    var, m, v, g = (x.astype(np.float32) for x in (a[0], a[1], a[2], a[8]))
    lr, beta1, beta2, eps, decay = (x.reshape(()) for x in a[3:8])
    one = np.float32(1)
    m_new = m * beta1 + g * (one - beta1)
    v_new = v * beta2 + g * g * (one - beta2)
    update = m_new / (np.sqrt(v_new) + eps) + decay * var
    return (var - lr * update).astype(a[0].dtype), m_new.astype(a[1].dtype), v_new.astype(a[2].dtype)


composite("AdamWeightDecay", 9, _adam_infer, _adam, (Attr("use_locking", False, is_bool),),
          precision=Precision("black", True, "an optimizer update: float32 master weights and moments"),
          doc="MindSpore's fused Adam with weight decay: (var, m, v) updated, written into the Parameters",
          api=Api(inputs=ADAM_INPUTS, updates=((0, 0), (1, 1), (2, 2))))


def _scatter_infer(types, attrs):
    x, indices, updates = types
    if not indices.dtype.is_int:
        raise DTypeError(f"indices must be int32 or int64, got {indices.dtype}")
    if x.rank == 0:
        raise ShapeError("cannot scatter into a 0-d tensor")
    if updates.dtype != x.dtype:
        raise DTypeError(f"updates is {updates.dtype}, input_x {x.dtype}: they must have one dtype")
    if updates.shape != indices.shape + x.shape[1:]:
        raise ShapeError(f"updates {fmt(updates.shape)} must have shape indices.shape + input_x.shape[1:] = "
                         f"{fmt(indices.shape + x.shape[1:])}")
    require(x.dtype, "numeric")
    return (x,)


def _scatter_add(a, attrs):
    x, indices, updates = a
    n = x.shape[0]
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        raise IRError(f"ScatterAdd: an index is outside [0, {n}) for input_x of {n} rows")
    out = x.copy()
    np.add.at(out, indices.astype(np.int64), updates)
    return out


def _scatter_grad(b, node, douts):
    (d,) = douts
    return d, None, b.op("Gather", d, node.inputs[1], axis=0)


register(OpDef("ScatterAdd", Pattern.OPAQUE, 3, _scatter_infer, _scatter_add, (Attr("use_locking", False, is_bool),),
               grad=_scatter_grad, domain="any", precision=Precision("gray", True, "adds rows"),
               doc="input_x with updates[i] added into row indices[i], written into the Parameter input_x",
               api=Api(inputs=("input_x", "indices", "updates"), updates=((0, 0),))))
