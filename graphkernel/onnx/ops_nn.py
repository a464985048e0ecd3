"""ONNX normalizations, Softmax and Gelu: the nn ops of a transformer layer (and BatchNormalization).

    Softmax, LogSoftmax      version 13: one axis (-1 by default); versions 1 and 11: the input coerced
                             to 2-D at `axis` (1 by default), normalized over axis and every axis after it
    LayerNormalization       from primitives, as the ONNX reference computes it: mean = sum/n,
                             d = x - mean, inv = 1/sqrt(sum(d*d)/n + eps), Y = d*inv*Scale + B; computed in
                             float32 for a float16 X when stash_type=1 (Mean and InvStdDev then float32)
    Gelu                     approximate "none": (x*0.5)*(1+erf(x/sqrt(2))) from primitives;
                             "tanh": our GeLU op (BERT's tanh form)
    Dropout                  the identity and a mask of ones: inference (versions 7 and 10 have no
                             training mode), or training mode with ratio 0; training mode with a ratio
                             above 0 draws random numbers and is refused. Version 7's mask has the data's
                             type (its schema's T; version 10 made it bool)
    BatchNormalization       inference: Y = scale * (X - mean) / sqrt(var + epsilon) + B per channel;
                             training_mode=1 (version 14 on): our BatchNorm composite in training (the
                             batch's mean and biased variance), running_mean = input_mean * momentum +
                             batch mean * (1 - momentum), running_var likewise with the batch variance.
                             Versions 7 to 13 compute in training mode when they have outputs beyond Y, whose
                             saved_mean and saved_var ONNX leaves to the implementation: refused.
                             Version 7's spatial=0 (statistics per element) is refused.
"""
from __future__ import annotations

import math

import numpy as np

from ir.dtypes import DType
from ir.symbolic import Dim
from graphkernel.onnx.builder import Builder, NodeInfo, dtype_of, shape_of
from graphkernel.onnx.registry import converter


def _softmax(ir_name: str):
    def convert(b: Builder, n: NodeInfo):
        x = n.inputs[0]
        shape, dtype = shape_of(x), dtype_of(x)
        rank = len(shape)
        if n.version >= 13:
            axes = (n.attr("axis", -1),)
        else:   # coerced to 2-D [d0 * ... * d(axis-1), d(axis) * ... * d(rank-1)], normalized along the second
            axis = n.attr("axis", 1)
            if not -rank <= axis < rank:
                raise n.error(f"axis {axis} is out of range for an input of rank {rank}")
            axes = tuple(range(axis % rank, rank))
        if 0 in shape and dtype.is_float and all(-rank <= a < rank for a in axes):
            return [np.zeros(shape, dtype.np)]  # empty: no reduction over nothing (max has no identity)
        return [b.op(ir_name, [x], axis=axes)]
    return convert


converter("Softmax", min_version=1)(_softmax("Softmax"))
converter("LogSoftmax", min_version=1)(_softmax("LogSoftmax"))


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


@converter("Dropout", static=(1, 2), min_version=7)
def dropout(b: Builder, n: NodeInfo):
    """The identity and a mask of ones, in inference or in training mode with ratio 0."""
    x = n.inputs[0]
    if n.version >= 12 and n.input(2) is not None:
        training = b.static(n.input(2), "training_mode")
        if training.size != 1:
            raise n.error(f"input 'training_mode' must be one bool, got shape {list(training.shape)}")
        ratio = b.static(n.input(1), "ratio") if n.input(1) is not None else np.float32(0.5)
        if bool(training) and ratio.size != 1:
            raise n.error(f"input 'ratio' must be one number, got shape {list(ratio.shape)}")
        if bool(training) and float(ratio) != 0:
            raise n.error(f"training mode (training_mode=True) with ratio {float(ratio)} zeroes elements at "
                          "random, which graphkernel does not do (it runs training mode with ratio 0, the "
                          "identity; inference graphs leave training_mode out or false)")
    mask = _filled(b, True, shape_of(x), dtype_of(x) if n.version < 10 else DType.bool)
    return [x, mask][: max(n.num_outputs, 1)]


def _filled(b: Builder, value, shape, dtype: DType):
    """A constant tensor of `shape` holding `value`; broadcast in the graph when a dim is a symbolic size."""
    if any(isinstance(d, Dim) for d in shape):
        return b.op("BroadcastTo", [np.asarray(value, dtype.np)], shape=tuple(shape))
    return np.full(shape, value, dtype.np)


@converter("BatchNormalization", min_version=7)
def batch_normalization(b: Builder, n: NodeInfo):
    """Y, and in training mode the running mean and variance."""
    x = n.inputs[0]
    dtype, rank = dtype_of(x), len(shape_of(x))
    if n.version < 9 and n.attr("spatial", 1) != 1:
        raise n.error("spatial=0 (a mean and variance per element rather than per channel) is not supported")
    training = bool(n.attr("training_mode", 0))
    if n.version < 14 and n.num_outputs > 1:
        raise n.error(f"outputs beyond Y put version {n.version} in training mode, whose saved_mean and "
                      "saved_var ONNX leaves to the implementation; graphkernel implements training mode from "
                      "version 14 (training_mode=1, outputs Y, running_mean, running_var)")
    if not training and n.num_outputs > 1:
        raise n.error("running_mean and running_var are outputs of training mode (training_mode=1) only")
    if rank < 2:
        raise n.error(f"X must have rank >= 2 (N, C, ...), got shape {list(shape_of(x))}")
    if training:
        return _batch_norm_training(b, n, x)
    scale, bias, mean, var = (b.reshape(b.cast(p, dtype), (-1,) + (1,) * (rank - 2)) for p in n.inputs[1:5])
    std = b.op("Sqrt", [b.binary("Add", var, n.attr("epsilon", 1e-5))])
    y = b.op("RealDiv", [b.op("Mul", [scale, b.op("Sub", [x, mean])]), std])
    return [b.op("Add", [y, bias])]


def _batch_norm_training(b: Builder, n: NodeInfo, x):
    """Y normalized by the batch's statistics (our BatchNorm composite in training: its reserve spaces are
    the batch mean and biased variance), and the running statistics moved toward them by 1 - momentum, in
    input_mean's and input_var's dtypes."""
    dtype = dtype_of(x)
    params = [b.cast(p, dtype) for p in n.inputs[1:5]]
    y, _, _, batch_mean, batch_var = b.ops("BatchNorm", [x] + params, is_training=True,
                                           epsilon=float(n.attr("epsilon", 1e-5)), data_format="NCHW")
    momentum = n.attr("momentum", 0.9)
    running = []
    for given, batch in ((n.inputs[3], batch_mean), (n.inputs[4], batch_var)):
        kept = b.binary("Mul", given, momentum)
        running.append(b.op("Add", [kept, b.binary("Mul", b.cast(batch, dtype_of(given)), 1 - momentum)]))
    return [y] + running
