"""The loss primitives of MindSpore's `ops`, as composite ops: a numpy reference here, an expander into
primitives (graphkernel/expanders/losses.py), so a loss and its gradient fuse with what is around them.

    SigmoidCrossEntropyWithLogits(x, label)       max(x, 0) - x * label + log(1 + exp(-|x|)), elementwise
    SoftmaxCrossEntropyWithLogits(logits, labels) -> (loss, backprop)
                                                  logits and labels [N, C]: loss [N] =
                                                  -sum(labels * log_softmax(logits), -1), backprop [N, C] =
                                                  softmax(logits) - labels
    SparseSoftmaxCrossEntropyWithLogits(logits, labels) {is_grad=False}
                                                  labels [N] int32/int64 class ids: the mean over N of
                                                  -log_softmax(logits)[i, labels[i]], a 0-d result; with
                                                  is_grad=True the gradient in the logits instead,
                                                  (softmax(logits) - one_hot(labels)) / N
A label outside [0, C) has an all-zero one-hot row: that row adds nothing to the loss and gets no gradient
(the gradient is (softmax * sum(one_hot row) - one_hot) / N).
float16 inputs are computed in float32 and rounded once.
"""
from __future__ import annotations

import numpy as np

from ir.errors import ShapeError
from ir.graph import TensorType
from ir.ops.checks import fmt, is_bool, require, same_dtype
from ir.ops.composite import composite
from ir.ops.registry import Api, Attr, Precision


def _wide(*arrays):
    return [a.astype(np.float32) if a.dtype == np.float16 else a for a in arrays]


def _log_softmax_rows(z: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        s = z - np.max(z, axis=-1, keepdims=True)
        return s - np.log(np.sum(np.exp(s), axis=-1, keepdims=True))


# --- SigmoidCrossEntropyWithLogits -----------------------------------------------------------------------

def _sigmoid_ce_infer(types, attrs):
    dtype = same_dtype(types)
    require(dtype, "float")
    if types[0].shape != types[1].shape:
        raise ShapeError(f"logits {fmt(types[0].shape)} and label {fmt(types[1].shape)} must have one shape")
    return (types[0],)


def _sigmoid_ce(a, attrs):
    x, label = _wide(*a)
    with np.errstate(over="ignore"):
        return (np.maximum(x, 0) - x * label + np.log1p(np.exp(-np.abs(x)))).astype(a[0].dtype)


def _sigmoid_ce_grad(b, node, douts):
    """d/dx: MindSpore's SigmoidCrossEntropyWithLogitsGrad; d/dlabel: -x * dout (MindSpore's bprop gives
    the label no gradient; here it is the derivative, which the finite-difference tests check)."""
    (x, label), (d,) = node.inputs, douts
    return (b.op("SigmoidCrossEntropyWithLogitsGrad", x, label, d), b.op("Neg", b.op("Mul", x, d)))


composite("SigmoidCrossEntropyWithLogits", 2, _sigmoid_ce_infer, _sigmoid_ce, grad=_sigmoid_ce_grad,
          why="a log and an exp of bounded arguments",
          doc="max(x, 0) - x * label + log(1 + exp(-|x|)), elementwise", api=Api(inputs=("logits", "label")))


# --- SoftmaxCrossEntropyWithLogits ------------------------------------------------------------------------

def _softmax_ce_infer(types, attrs):
    logits, labels = types
    dtype = same_dtype(types)
    require(dtype, "float")
    if logits.rank != 2 or labels.shape != logits.shape:
        raise ShapeError(f"logits {fmt(logits.shape)} and labels {fmt(labels.shape)} must be [N, C], one shape")
    return (TensorType(logits.shape[:1], dtype), logits)


def _softmax_ce(a, attrs):
    z, labels = _wide(*a)
    log_sm = _log_softmax_rows(z)
    loss = -np.sum(labels * log_sm, axis=-1)
    return loss.astype(a[0].dtype), (np.exp(log_sm) - labels).astype(a[0].dtype)


def _softmax_ce_grad(b, node, douts):
    """loss = -sum_j l_j log_softmax(z)_j: dz_k = dloss (softmax_k sum_j l_j - l_k), dl = -dloss log_softmax;
    backprop = softmax - labels: dz = SoftmaxGrad(softmax, dbackprop), dl = -dbackprop."""
    (z, labels), (loss, backprop) = node.inputs, node.outputs
    dloss, dbp = douts
    softmax = b.op("Add", backprop, labels)
    dz = dl = None
    if dloss is not None:
        d = b.op("Reshape", dloss, shape=loss.shape + (1,))
        total = b.reduce("ReduceSum", labels, (1,))
        dz = b.op("Mul", d, b.op("Sub", b.op("Mul", softmax, total), labels))
        dl = b.op("Neg", b.op("Mul", d, b.op("LogSoftmax", z, axis=(1,))))
    if dbp is not None:
        through = b.op("SoftmaxGrad", softmax, dbp, axis=(1,))
        dz = through if dz is None else b.op("Add", dz, through)
        dl = b.op("Neg", dbp) if dl is None else b.op("Sub", dl, dbp)
    return dz, dl


composite("SoftmaxCrossEntropyWithLogits", 2, _softmax_ce_infer, _softmax_ce, grad=_softmax_ce_grad,
          precision=Precision("black", True, "exp, log and a long sum; its expansion stays float32"),
          doc="(loss [N], backprop [N, C]) of logits and labels [N, C]", api=Api(inputs=("logits", "labels")))


# --- SparseSoftmaxCrossEntropyWithLogits ------------------------------------------------------------------

def _sparse_ce_infer(types, attrs):
    logits, labels = types
    require(logits.dtype, "float")
    if not labels.dtype.is_int:
        raise ShapeError(f"labels must be int32 or int64 class ids, got {labels.dtype}")
    if logits.rank != 2 or labels.shape != logits.shape[:1]:
        raise ShapeError(f"logits {fmt(logits.shape)} must be [N, C] and labels {fmt(labels.shape)} [N]")
    return (logits if attrs["is_grad"] else TensorType((), logits.dtype),)


def one_hot(labels: np.ndarray, classes: int, dtype) -> np.ndarray:
    return (labels.reshape(-1, 1) == np.arange(classes).reshape(1, -1)).astype(dtype)


def _sparse_ce(a, attrs):
    (z,) = _wide(a[0])
    hot = one_hot(a[1], z.shape[1], z.dtype)
    log_sm = _log_softmax_rows(z)
    n = z.shape[0]
    if attrs["is_grad"]:
        valid = np.sum(hot, axis=1, keepdims=True)
        return ((np.exp(log_sm) * valid - hot) / np.asarray(n, z.dtype)).astype(a[0].dtype)
    return np.asarray(-np.sum(hot * log_sm) / np.asarray(n, z.dtype)).astype(a[0].dtype)


def _sparse_ce_grad(b, node, douts):
    if node.attr("is_grad"):
        raise ShapeError("SparseSoftmaxCrossEntropyWithLogits(is_grad=True) is a gradient already: its own "
                         "gradient is not supported")
    (z, labels), (d,) = node.inputs, douts
    grad = b.op("SparseSoftmaxCrossEntropyWithLogits", z, labels, is_grad=True)
    return b.op("Mul", grad, b.op("BroadcastTo", d, shape=z.shape)), None


composite("SparseSoftmaxCrossEntropyWithLogits", 2, _sparse_ce_infer, _sparse_ce,
          (Attr("is_grad", False, is_bool),), grad=_sparse_ce_grad,
          precision=Precision("black", True, "exp, log and long sums; its expansion stays float32"),
          doc="the mean cross entropy of logits [N, C] and int class ids [N] (is_grad: its gradient in the "
              "logits)", api=Api(inputs=("logits", "labels")))
