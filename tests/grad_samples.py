"""Sample calls for gradient tests, generated from the op table: every row with a gradient rule gets cases
here, by existing (elementwise and broadcast rows without attributes), or from the table of
attribute-carrying cases below. `tests/test_gradients.py` checks each against float64 finite differences.

    grad_cases()  -> [GradCase(op, arrays, attrs, id)]
    without_rule  -> ops whose float results have no rule, and why (checked: nothing else may lack one)

Values avoid the points where an op is not differentiable (|x| near 0 for Abs, ties for Maximum, integers
and halves for Floor/Round), so a central difference of step 1e-6 measures the derivative.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ir.dtypes import DType
from ir.errors import IRError
from ir.graph import TensorType
from ir.ops import OPS, Pattern

# ops with float results and no gradient rule, and why
without_rule = {
    "Gradient": "replaced by the autodiff stage (a gradient of it is a gradient of the backward nodes)",
    "PyFunc": "a host function: its Cell's bprop gives its gradient",
    "HostCall": "an op kept on the host by host_scope: differentiate outside it",
    "CopyToHost": "inserted after the autodiff stage by the partition pass",
    "CopyToDevice": "inserted after the autodiff stage by the partition pass",
    "Const": "no inputs",
    "Barrier": "its i32[1] token orders it; it carries no value",
    "AllReduceStart": "the gradient reducer's bucket, applied to gradients (ir/ops/collective.py)",
    "AllReduceWait": "the gradient reducer's bucket, applied to gradients (ir/ops/collective.py)",
    "SizeValue": "no inputs: a size's value at each call",
    "SizeRange": "no inputs: a range of a size's length",
    "AdamWeightDecay": "an optimizer update, written into its Parameters after the gradients",
    "ApplyMomentum": "an optimizer update, written into its Parameters after the gradients",
    "Adam": "an optimizer update, written into its Parameters after the gradients",
    "FusedCastAdamWeightDecay": "an optimizer update, written into its Parameters after the gradients",
    "LambApplyOptimizerAssign": "an optimizer update, written into its Parameters after the gradients",
    "LambApplyWeightAssign": "an optimizer update, written into its Parameters after the gradients",
    "FloatStatus": "an overflow flag",
    "NPUAllocFloatStatus": "an overflow status",
    "NPUClearFloatStatus": "an overflow status",
    "NPUGetFloatStatus": "an overflow status",
    "NPUClearFloatStatusV2": "an overflow status",
    "NPUGetFloatStatusV2": "an overflow status",
    "If": "differentiated as it is traced, along the branch taken: tests/test_control_flow.py",
    "LayerNormGrad": "a gradient op: second derivatives of LayerNorm are not supported yet",
    "SoftmaxGrad": "a gradient op: second derivatives of Softmax are not supported yet",
    "LogSoftmaxGrad": "a gradient op: second derivatives of LogSoftmax are not supported yet",
    "GeLUGrad": "a gradient op: second derivatives of GeLU are not supported yet",
    "SigmoidGrad": "a gradient op: second derivatives of Sigmoid are not supported yet",
    "BiasAddGrad": "a gradient op: second derivatives of BiasAdd are not supported yet",
    "TanhGrad": "a gradient op: second derivatives of Tanh are not supported yet",
    "SqrtGrad": "a gradient op: second derivatives of Sqrt are not supported yet",
    "SigmoidCrossEntropyWithLogitsGrad": "a gradient op: second derivatives of the loss are not supported yet",
    "DropoutGrad": "a gradient op: second derivatives of Dropout are not supported yet",
    "MaximumGrad": "a gradient op: second derivatives of Maximum are not supported yet",
    "MinimumGrad": "a gradient op: second derivatives of Minimum are not supported yet",
    "FastGeLUGrad": "a gradient op: second derivatives of FastGeLU are not supported yet",
    "SoftmaxGradExt": "a gradient op: second derivatives of Softmax are not supported yet",
    "BatchNormGrad": "a gradient op: second derivatives of BatchNorm are not supported yet",
    "MaxPoolGrad": "a gradient op: second derivatives of MaxPool are not supported yet",
}

# rules that are, on purpose, not the derivative of the op's reference (tested on their own)
not_the_derivative = {
    "StopGradient": "blocks the gradient: tests/test_gradients.py test_stop_gradient_blocks_and_is_removed",
    "Bprop": "a Cell's own bprop: tests/test_grad_api.py test_cell_bprop_gives_the_gradient",
    "Assign": "a Parameter update, after the gradients: no gradient flows through it (tests/test_train_step.py)",
}


@dataclass
class GradCase:
    op: str
    arrays: list
    attrs: dict = field(default_factory=dict)
    id: str = ""


def _values(rng, shape, domain: str) -> np.ndarray:
    """float64 values from the domain, away from 0 and from integers and halves by more than 1e-3."""
    low, high = {"positive": (0.2, 2.0), "unit": (-0.9, 0.9)}.get(domain, (-2.0, 2.0))
    x = rng.uniform(low, high, size=shape)
    frac = np.abs(x * 2 - np.round(x * 2))
    return np.asarray(np.where(frac < 1e-2, x + 0.05, x))


def _broadcast_shapes(arity: int) -> list[tuple]:
    if arity == 1:
        return [((3, 4),), ((),), ((2, 3, 5),)]
    if arity == 2:
        return [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (2, 3)), ((1, 5), (3, 1))]
    return [((3, 4),) * 3, ((3, 1), (1, 4), ())]


def _float_result(d) -> bool:
    try:
        types = d.infer(tuple(TensorType((3, 4), DType.float64) for _ in range(d.arity)), {})
    except (IRError, ValueError):
        return False
    return any(t.dtype.is_float for t in types)


def _attribute_cases(rng) -> list[GradCase]:
    f = lambda *shape: _values(rng, shape, "real")  # noqa: E731
    cases = [
        GradCase("Reshape", [f(3, 4)], {"shape": (2, 6)}),
        # collectives in a process that is its group (ir/ops/collective.py's Alone): MindSpore's rules there;
        # two ranks: tests/test_dist_collectives.py
        *[GradCase("AllReduce", [f(3, 4)], {"op": op}) for op in ("sum", "max", "min")],
        GradCase("AllReduce", [_values(rng, (3, 4), "positive")], {"op": "prod"}),
        GradCase("AllGather", [f(3, 2)], {}),
        GradCase("ReduceScatter", [f(4, 2)], {}),
        GradCase("Broadcast", [f(3), f(2, 2)], {}),
        GradCase("Reshape", [f(2, 3, 2)], {"shape": (-1,)}),
        GradCase("Transpose", [f(2, 3, 4)], {"perm": (2, 0, 1)}),
        GradCase("Transpose", [f(2, 3, 4, 5)], {"perm": (1, 3, 0, 2)}),
        GradCase("BroadcastTo", [f(3, 1)], {"shape": (2, 3, 4)}),
        GradCase("BroadcastTo", [f()], {"shape": (3,)}),
        GradCase("Cast", [f(3, 4)], {"dtype": DType.float64}),
        GradCase("MatMul", [f(3, 4), f(4, 5)], {}),
        GradCase("Slice", [f(5, 6)], {"begin": (1, 0), "end": (4, 6), "strides": (1, 1)}),
        GradCase("Slice", [f(7, 6)], {"begin": (1, 5), "end": (7, -1), "strides": (2, -2)}),
        GradCase("Slice", [f(5, 4)], {"begin": (4, 1), "end": (-1, 3), "strides": (-1, 3)}),
        GradCase("Slice", [f(4, 3)], {"begin": (2, 0), "end": (2, 3), "strides": (1, 1)}),
        GradCase("Concat", [f(2, 3), f(4, 3), f(1, 3)], {"axis": 0}),
        GradCase("Concat", [f(2, 3), f(2, 1)], {"axis": -1}),
        GradCase("Split", [f(6, 4)], {"axis": 0, "sizes": (1, 3, 2)}),
        GradCase("Split", [f(2, 5)], {"axis": 1, "sizes": (5,)}),
        GradCase("Select", [rng.random((3, 4)) < 0.5, f(3, 4), f(4)]),
        GradCase("Select", [rng.random((3, 1)) < 0.5, f(), f(1, 4)]),
        GradCase("Gather", [f(5, 3), np.array([[0, 4], [4, -1], [2, 2]], np.int32)], {"axis": 0}),
        GradCase("Gather", [f(2, 5, 3), np.array([1, 3, 1], np.int64)], {"axis": 1}),
        GradCase("Gather", [f(2, 5), np.array([[4, -5], [0, 0]], np.int32)], {"axis": -1}),
        GradCase("Gather", [f(3, 4, 5), np.array(2, np.int32)], {"axis": 1}),
        GradCase("Slice", [f(6)], {"begin": (5,), "end": (-1,), "strides": (-1,)}),
        GradCase("StridedSlice", [f(4, 5, 3)], {"begin": (1, 0, 0), "end": (4, 5, 2), "strides": (2, -2, 1),
                                                "begin_mask": 2, "end_mask": 2}),
        GradCase("StridedSlice", [f(4, 5, 3)], {"begin": (0, 2), "end": (0, 3), "strides": (1, 1),
                                                "shrink_axis_mask": 2, "new_axis_mask": 1}),
        GradCase("Squeeze", [f(3, 1, 4, 1)], {"axis": (-1,)}),
        GradCase("AddN", [f(3, 4), f(3, 4), f(3, 4)], {}),
        GradCase("ScatterAdd", [f(4, 3), np.array([[0, 2], [2, 3]], np.int32), f(2, 2, 3)], {}),
        GradCase("OneHot", [np.array([[0, 3], [-1, 2]], np.int32), f(), f()], {"depth": 3}),
        GradCase("OneHot", [np.array([1, 0, 5], np.int64), f(1), f(1)], {"depth": 2, "axis": 0}),
        GradCase("ExpandDims", [f(3, 4)], {"axis": 1}),
        GradCase("Tile", [f(2, 1, 3)], {"multiples": (2, 3, 1)}),
        GradCase("Tile", [f(3)], {"multiples": (2, 2)}),
        GradCase("StridedSlice", [f(3, 4)], {"begin": (0, 1), "end": (0, 3), "strides": (1, 1),
                                             "ellipsis_mask": 1}),
        GradCase("UnsortedSegmentSum", [f(5, 3), np.array([0, 2, 2, -1, 7], np.int32)], {"num_segments": 4}),
        GradCase("UnsortedSegmentSum", [f(2, 3, 2), np.array([[1, 0, 1], [0, 0, 3]], np.int64)],
                 {"num_segments": 2}),
        GradCase("ReluGrad", [f(3, 4), f(3, 4)], {}),
        GradCase("ArgMaxWithValue", [f(3, 4)], {}),
        GradCase("ArgMaxWithValue", [f(2, 3, 4)], {"axis": -1, "keep_dims": True}),
        GradCase("SparseSoftmaxCrossEntropyWithLogits", [f(4, 5), np.array([0, 4, 2, 2], np.int32)], {}),
        GradCase("SparseSoftmaxCrossEntropyWithLogits", [f(3, 6), np.array([5, 7, -1], np.int64)], {}),
        GradCase("Dropout", [f(4, 6), np.array([3], np.int32)], {"keep_prob": 0.7, "seed": 1, "op_id": 9}),
    ]
    for ta in (False, True):
        for tb in (False, True):
            a = f(4, 3) if ta else f(3, 4)
            b = f(5, 4) if tb else f(4, 5)
            cases.append(GradCase("MatMul", [a, b], {"transpose_a": ta, "transpose_b": tb}))
            a = f(2, 4, 3) if ta else f(2, 3, 4)
            b = f(1, 5, 4) if tb else f(1, 4, 5)
            cases.append(GradCase("BatchMatMul", [a, b], {"transpose_a": ta, "transpose_b": tb}))
    cases.append(GradCase("BatchMatMul", [f(3, 2, 3, 4), f(2, 4, 5)], {}))
    for op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"):
        for axis, keep in (((), False), ((1,), True), ((0, 2), False), ((-1,), False)):
            cases.append(GradCase(op, [f(3, 4, 5)], {"axis": axis, "keep_dims": keep}))
    cases += [
        GradCase("Softmax", [f(3, 5)], {}), GradCase("Softmax", [f(2, 3, 4)], {"axis": (1,)}),
        GradCase("LogSoftmax", [f(3, 5)], {}), GradCase("LogSoftmax", [f(2, 3, 4)], {"axis": (0,)}),
        GradCase("LayerNorm", [f(4, 8), f(8), f(8)], {}),
        GradCase("LayerNorm", [f(2, 3, 4), f(3, 4), f(3, 4)], {"begin_norm_axis": 1, "begin_params_axis": 1}),
        GradCase("BiasAdd", [f(2, 3, 4), f(3)], {}),
        GradCase("BiasAdd", [f(2, 3, 4), f(4)], {"data_format": "NHWC"}),
    ]
    positive = lambda *shape: _values(rng, shape, "positive")  # noqa: E731  (a variance)
    for x, fmt in ((f(4, 3), "NCHW"), (f(2, 3, 2, 2), "NCHW"), (f(2, 2, 3), "NHWC")):
        c = x.shape[1] if fmt == "NCHW" else x.shape[-1]
        for training in (True, False):
            cases.append(GradCase("BatchNorm", [x, f(c), f(c), f(c), positive(c)],
                                  {"is_training": training, "data_format": fmt, "epsilon": 0.01}))
    conv = dict(out_channel=4, kernel_size=3)
    cases += [
        GradCase("Conv2D", [f(2, 3, 5, 6), f(4, 3, 3, 3)], conv),
        GradCase("Conv2D", [f(1, 4, 6, 5), f(4, 2, 2, 3)], dict(out_channel=4, kernel_size=(2, 3), pad_mode="same",
                                                                stride=2, group=2)),
        GradCase("Conv2D", [f(1, 2, 7, 7), f(4, 2, 3, 3)], dict(conv, pad_mode="pad", pad=(1, 0, 2, 1), dilation=2,
                                                                stride=(3, 1))),
        GradCase("Conv2D", [f(1, 3, 5, 5), f(3, 1, 3, 3)], dict(out_channel=3, kernel_size=3, pad_mode="same",
                                                                group=3)),
        GradCase("Conv2DBackpropInput", [f(1, 4, 3, 3), f(4, 3, 3, 3)], dict(conv, pad_mode="same", stride=2,
                                                                           input_size=(1, 3, 5, 6))),
        GradCase("Conv2DBackpropFilter", [f(1, 4, 3, 3), f(1, 3, 5, 6)], dict(conv, pad_mode="same", stride=2,
                                                                            filter_size=(4, 3, 3, 3))),
        GradCase("MaxPool", [f(2, 2, 5, 6)], dict(kernel_size=3, strides=2, pad_mode="same")),
        GradCase("MaxPool", [f(1, 2, 5, 5)], dict(kernel_size=2, strides=3)),
        GradCase("AvgPool", [f(2, 2, 5, 6)], dict(kernel_size=3, strides=2, pad_mode="same")),
        GradCase("AvgPool", [f(1, 2, 6, 5)], dict(kernel_size=(2, 1), strides=(1, 2))),
        GradCase("AvgPoolGrad", [f(1, 2, 5, 6), f(1, 2, 3, 3), f(1, 2, 3, 3)], dict(kernel_size=3, strides=2,
                                                                                    pad_mode="same")),
        GradCase("AdaptiveAvgPool2D", [f(2, 3, 5, 4)], dict(output_size=(2, 3))),
        GradCase("Flatten", [f(2, 3, 4)], {}),
        GradCase("Pad", [f(2, 3, 4)], dict(paddings=((1, 0), (0, 0), (2, 3)))),
    ]
    return cases


def grad_cases() -> list[GradCase]:
    rng = np.random.default_rng(0)
    cases = []
    for name, d in sorted(OPS.items()):
        if d.grad is None or d.attrs or d.arity is None or not _float_result(d) or name in not_the_derivative:
            continue
        if d.pattern > Pattern.BROADCAST and not d.expandable:
            continue
        for shapes in _broadcast_shapes(d.arity):
            try:
                d.infer(tuple(TensorType(s, DType.float64) for s in shapes), {})
            except (IRError, ValueError):
                continue
            cases.append(GradCase(name, [_values(rng, s, d.domain) for s in shapes]))
    cases += [c for c in _attribute_cases(rng) if c.op in OPS and OPS[c.op].grad is not None]
    seen = {}
    for c in cases:
        seen[c.op] = seen.get(c.op, 0) + 1
        c.id = f"{c.op}-{seen[c.op]}"
    return cases
