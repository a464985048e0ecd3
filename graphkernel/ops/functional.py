"""The functional forms, `ops.exp(x)`, `ops.add(x, y)`, `ops.cast(x, dtype)`, `ops.sum(x, dim, keepdim)`:
one per op row's `api.functional` and `api.forms` in "ops" (ir/ops), with MindSpore's parameter names
(graphkernel/ops/forms.py), each calling the op's primitive;
and MindSpore's `ops.functional` (`F`) forms that are not ops: `F.depend`, `F.assign`, `F.assign_add`,
`F.partial`, and the trace-time values `F.shape`, `F.dtype`, `F.fill`, `F.tuple_to_array`,
`F.make_range` (graphkernel/ops/static.py); `ops.one_hot` with Python on and off values.

    from graphkernel import ops
    y = ops.tanh(ops.add(x, 1.0))
"""
from __future__ import annotations

from graphkernel.assign import assign, assign_add, assign_sub, depend
from graphkernel.ops import operations
from graphkernel.ops.forms import namespace
from graphkernel.ops.multitype import partial
from graphkernel.ops.static import dtype, fill, make_range, rank, shape, size, tuple_to_array
from graphkernel.tensor import Tensor, TensorOps


FUNCTIONS = namespace("ops")   # graphkernel/ops/forms.py: MindSpore's names and parameters
globals().update(FUNCTIONS)


def gelu(input, approximate="none"):
    """MindSpore 2.x's `ops.gelu(input, approximate='none')`: "none" (its default) is erf's GELU,
    x * (1 + erf(x / sqrt(2))) / 2, written with primitives; "tanh" is P.GeLU (the tanh approximation,
    MindSpore's P.GeLU too)."""
    if approximate == "tanh":
        return operations.GeLU()(input)
    if approximate != "none":
        raise ValueError(f"ops.gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    half = operations.Mul()(input, 0.5)
    return operations.Mul()(half, operations.Add()(operations.Erf()(operations.Mul()(input, 0.7071067811865476)), 1.0))


def one_hot(indices, depth, on_value=1, off_value=0, axis=-1):
    """MindSpore 2.x's ops.one_hot: P.OneHot(axis) with on_value and off_value as Tensors or Python
    numbers (an int gives int64, a float float32, as MindSpore makes scalar tensors)."""
    values = [v if isinstance(v, TensorOps) else Tensor(v) for v in (on_value, off_value)]
    return operations.OneHot(axis=axis)(indices, depth, *values)


__all__ = sorted(FUNCTIONS) + ["gelu", "one_hot", "assign", "assign_add", "assign_sub", "depend", "dtype", "fill",
                               "make_range", "partial", "rank", "shape", "size", "tuple_to_array"]
