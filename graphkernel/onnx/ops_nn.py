"""ONNX reductions and the normalization/activation ops of a transformer layer.

    ReduceSum/Mean/Max/Min   axes as an attribute (before version 18; ReduceSum before 13) or as a
                             second input; empty axes reduce everything unless noop_with_empty_axes=1
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


def _reduce(ir_name: str, axes_input_since: int):
    def convert(b: Builder, n: NodeInfo):
        x = n.inputs[0]
        if n.version >= axes_input_since:
            axes = b.ints(n.input(1), "axes") if n.input(1) is not None else []
        else:
            axes = list(n.attr("axes", []))
        shape = shape_of(x)
        if not axes:
            if n.attr("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(len(shape)))
        keep = bool(n.attr("keepdims", 1))
        dtype = dtype_of(x)
        if any(shape[a] == 0 for a in axes):  # an empty reduction: the op's identity (ONNX >= 18)
            out = [1 if i in {a % len(shape) for a in axes} else d for i, d in enumerate(shape)]
            out = out if keep else [d for i, d in enumerate(shape) if i not in {a % len(shape) for a in axes}]
            return [np.full(out, _identity(ir_name, dtype), dtype=dtype.np)]
        if dtype == DType.bool and ir_name in ("ReduceMax", "ReduceMin"):  # any / all
            y = b.op(ir_name, [b.cast(x, DType.int32)], axis=tuple(axes), keep_dims=keep)
            return [b.cast(y, DType.bool)]
        return [b.op(ir_name, [x], axis=tuple(axes), keep_dims=keep)]
    return convert


def _identity(ir_name: str, dtype: DType):
    if ir_name in ("ReduceSum", "ReduceMean"):
        return 0 if ir_name == "ReduceSum" else np.nan
    if dtype == DType.bool:
        return ir_name == "ReduceMin"
    info = np.finfo(dtype.np) if dtype.is_float else np.iinfo(dtype.np)
    low, high = (-np.inf, np.inf) if dtype.is_float else (info.min, info.max)
    return low if ir_name == "ReduceMax" else high


converter("ReduceSum", static=(1,))(_reduce("ReduceSum", 13))
converter("ReduceMean", static=(1,))(_reduce("ReduceMean", 18))
converter("ReduceMax", static=(1,))(_reduce("ReduceMax", 18))
converter("ReduceMin", static=(1,))(_reduce("ReduceMin", 18))


@converter("Softmax")
def softmax(b: Builder, n: NodeInfo):
    return [b.op("Softmax", n.inputs[:1], axis=(n.attr("axis", -1),))]


@converter("LogSoftmax")
def log_softmax(b: Builder, n: NodeInfo):
    return [b.op("LogSoftmax", n.inputs[:1], axis=(n.attr("axis", -1),))]


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
    count = b.const(int(np.prod(shape[axis:], dtype=np.int64)), np.zeros((), stash.np))
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


@converter("LeakyRelu", min_version=6)
def leaky_relu(b: Builder, n: NodeInfo):
    x = n.inputs[0]
    return [b.op("Select", [b.binary("Greater", x, 0), x, b.binary("Mul", x, n.attr("alpha", 0.01))])]


@converter("Softplus", min_version=1)
def softplus(b: Builder, n: NodeInfo):
    return [b.op("Log", [b.binary("Add", b.op("Exp", n.inputs[:1]), 1)])]


@converter("Dropout", static=(1, 2))
def dropout(b: Builder, n: NodeInfo):
    """Inference: the identity, and a mask of ones; training mode is not supported."""
    x, training = n.inputs[0], n.input(2)
    if training is not None and bool(b.static(training, "training_mode")):
        raise n.error("training_mode=True is not supported (graphkernel runs inference graphs)")
    return [x, np.ones(shape_of(x), np.bool_)][: max(n.num_outputs, 1)]
