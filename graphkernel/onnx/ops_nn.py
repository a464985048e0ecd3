"""ONNX normalizations, Softmax and Gelu: the nn ops of a transformer layer (and BatchNormalization).

    Softmax, LogSoftmax      version 13 semantics: one axis (-1 by default)
    LayerNormalization       from primitives, as the ONNX reference computes it: mean = sum/n,
                             d = x - mean, inv = 1/sqrt(sum(d*d)/n + eps), Y = d*inv*Scale + B; computed in
                             float32 for a float16 X when stash_type=1 (Mean and InvStdDev then float32)
    Gelu                     approximate "none": (x*0.5)*(1+erf(x/sqrt(2))) from primitives;
                             "tanh": our GeLU op (BERT's tanh form)
"""
from __future__ import annotations

import math

import numpy as np

from ir.dtypes import DType
from graphkernel.onnx.builder import Builder, NodeInfo, dtype_of, shape_of
from graphkernel.onnx.registry import converter


def _softmax(ir_name: str):
    def convert(b: Builder, n: NodeInfo):
        x, axis = n.inputs[0], n.attr("axis", -1)
        shape, dtype = shape_of(x), dtype_of(x)
        if 0 in shape and dtype.is_float and -len(shape) <= axis < len(shape):
            return [np.zeros(shape, dtype.np)]  # empty: no reduction over nothing (max has no identity)
        return [b.op(ir_name, [x], axis=(axis,))]
    return convert


converter("Softmax")(_softmax("Softmax"))
converter("LogSoftmax")(_softmax("LogSoftmax"))


@converter("LayerNormalization", min_version=17)
def layer_normalization(b: Builder, n: NodeInfo):
    x, scale, bias = n.inputs[0], n.input(1), n.input(2)
    if scale is None:
        raise n.error("input 'Scale' is missing")
    shape, dtype = shape_of(x), dtype_of(x)
    if not dtype.is_float:
        raise n.error(f"X must be a float tensor, got {dtype}")
    rank = len(shape)
    axis = n.attr("axis", -1)
    if not -rank <= axis < rank:
        raise n.error(f"axis {axis} is out of range for X of rank {rank}")
    axis %= rank
    stash = DType.float32 if n.attr("stash_type", 1) == 1 and dtype == DType.float16 else dtype
    axes = tuple(range(axis, rank))
    count = b.size(math.prod(shape[axis:]), stash)
    xs = b.cast(x, stash)
    mean = b.op("RealDiv", [b.op("ReduceSum", [xs], axis=axes, keep_dims=True), count])
    d = b.op("Sub", [xs, mean])
    var = b.op("RealDiv", [b.op("ReduceSum", [b.op("Mul", [d, d])], axis=axes, keep_dims=True), count])
    std = b.op("Sqrt", [b.op("Add", [var, b.const(n.attr("epsilon", 1e-5), var)])])
    inv = b.op("RealDiv", [b.const(1, std), std])
    y = b.cast(b.op("Mul", [d, inv]), dtype)
    y = b.op("Mul", [y, scale])
    if bias is not None:
        y = b.op("Add", [y, bias])
    return [y, mean, inv][: max(n.num_outputs, 1)]


@converter("Gelu", min_version=20)
def gelu(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    approximate = n.attr("approximate", "none")
    if approximate == "tanh":
        return [b.op("GeLU", [x])]
    if approximate != "none":
        raise n.error(f"attribute approximate={approximate!r}; expected 'none' or 'tanh'")
    phi = b.binary("Add", b.op("Erf", [b.binary("RealDiv", x, math.sqrt(2))]), 1)
    return [b.op("Mul", [b.binary("Mul", x, 0.5), phi])]


@converter("Dropout", static=(1, 2))
def dropout(b: Builder, n: NodeInfo):
    """Inference: the identity, and a mask of ones; training mode is not supported."""
    x, training = n.inputs[0], n.input(2)
    if training is not None and b.static(training, "training_mode").size != 1:
        raise n.error(f"input 'training_mode' must be one bool, got shape {list(training.shape)}")
    if training is not None and bool(training):
        raise n.error("training mode (training_mode=True) is not supported; graphkernel runs inference "
                      "graphs")
    return [x, np.ones(shape_of(x), np.bool_)][: max(n.num_outputs, 1)]


@converter("BatchNormalization", min_version=9)
def batch_normalization(b: Builder, n: NodeInfo):
    """Inference: Y = scale * (X - mean) / sqrt(var + epsilon) + B, per channel (axis 1)."""
    if n.attr("training_mode", 0) or n.num_outputs > 1:
        raise n.error("training mode (running statistics as outputs) is not supported; graphkernel runs "
                      "inference graphs")
    x = n.inputs[0]
    dtype, rank = dtype_of(x), len(shape_of(x))
    if rank < 2:
        raise n.error(f"X must have rank >= 2 (N, C, ...), got shape {list(shape_of(x))}")
    scale, bias, mean, var = (b.reshape(b.cast(p, dtype), (-1,) + (1,) * (rank - 2)) for p in n.inputs[1:5])
    std = b.op("Sqrt", [b.binary("Add", var, n.attr("epsilon", 1e-5))])
    y = b.op("RealDiv", [b.op("Mul", [scale, b.op("Sub", [x, mean])]), std])
    return [b.op("Add", [y, bias])]
