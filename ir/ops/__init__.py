"""The op registry: one table row (an OpDef) per primitive and composite op.

Every op declares its pattern kind, arity, attributes (with defaults and checks), shape/dtype inference
and numpy reference here, so no other module switches on op names to learn these facts. Kernels add
their scalar emitters in `kernels/`; expanders live in `graphkernel/expanders/`.

    make_node("Mul", (x, two), name=...)  ->  Node with inferred types, or a ShapeError/DTypeError
                                               naming the op, the node, the shapes and the rule
    evaluate(node, arrays)                ->  the numpy reference results
    evaluate_any_shape(node, arrays)      ->  the same shaped by the operands (a node run on slices)
"""
from ir.ops.registry import (
    Api, Attr, Cost, Form, OpDef, Pattern, Precision, OPS, ALIASES, canonical_name, get, register, make_node, evaluate,
    evaluate_any_shape, pattern_of,
)
from ir.ops import elementwise, reduce, shape, linalg, composite  # noqa: F401  (they register ops)
from ir.ops import injective  # noqa: F401  (Slice, Concat, Split, Gather)
from ir.ops import strided_slice  # noqa: F401  (StridedSlice over Slice and Reshape)
from ir.ops import shape_composites  # noqa: F401  (Squeeze, ExpandDims, Tile, ZerosLike)
from ir.ops import selection  # noqa: F401  (Argmax, OneHot)
from ir.ops import updates  # noqa: F401  (AdamWeightDecay, ScatterAdd: results written into Parameters)
from ir.ops import optimizer_updates  # noqa: F401  (ApplyMomentum, Adam, FusedCastAdamWeightDecay, Lamb*)
from ir.ops import float_status  # noqa: F401  (FloatStatus, NPUAllocFloatStatus, NPUClear/GetFloatStatus[V2])
from ir.ops import gradient, grad_ops  # noqa: F401  (Gradient, StopGradient, Bprop; LayerNormGrad, ...)
from ir.ops import elementwise_grads  # noqa: F401  (TanhGrad, SqrtGrad, MaximumGrad, DropoutGrad, ...)
from ir.ops import math_composites  # noqa: F401  (Erfc, Softsign, SquaredDifference, OnesLike, ...)
from ir.ops import losses  # noqa: F401  (SigmoidCrossEntropyWithLogits, SoftmaxCrossEntropyWithLogits, ...)
from ir.ops import mindspore_composites, batch_norm  # noqa: F401  (Identity, FastGeLU, SoftmaxGradExt; BatchNorm)
from ir.ops import state, random  # noqa: F401  (Assign; Dropout)
from ir.ops import control  # noqa: F401  (If)
from ir.ops import collective  # noqa: F401  (AllReduce, AllGather, ReduceScatter, Broadcast, Barrier, buckets)
from ir.ops import conv, pool  # noqa: F401  (Conv2D and its gradients; MaxPool, AvgPool, Flatten, Pad, ...)
from ir.ops.control import branches, map_branches
from ir.ops.state import assigned_inputs
from ir.ops.host import is_host, placement  # noqa: F401  (PyFunc, HostCall, CopyToHost/CopyToDevice)

__all__ = ["Api", "Attr", "Cost", "Form", "OpDef", "Pattern", "Precision", "OPS", "ALIASES", "canonical_name", "get", "register",
           "make_node", "evaluate", "evaluate_any_shape", "pattern_of", "is_host", "placement", "assigned_inputs",
           "branches", "map_branches"]
