"""The functional forms, `ops.exp(x)`, `ops.add(x, y)`, `ops.cast(x, dtype)`: one per op row whose
`api.functional` names one (ir/ops), each calling the op's primitive with its default attributes;
and MindSpore's `ops.functional` (`F`) forms that are not ops: `F.depend`, `F.assign`, `F.assign_add`,
`F.partial`, and the trace-time values `F.shape`, `F.dtype`, `F.fill`, `F.tuple_to_array`,
`F.make_range` (graphkernel/ops/static.py); `ops.one_hot` with Python on and off values.

    from graphkernel import ops
    y = ops.tanh(ops.add(x, 1.0))
"""
from __future__ import annotations

from ir.ops import OPS, OpDef
from graphkernel.assign import assign, assign_add, assign_sub, depend
from graphkernel.ops import operations
from graphkernel.ops.multitype import partial
from graphkernel.ops.static import dtype, fill, make_range, rank, shape, size, tuple_to_array
from graphkernel.tensor import Tensor, TensorOps


def _functional(d: OpDef):
    """ops.<name>(tensors..., [attributes...]): the tensors, then the call-time attributes and the
    construction attributes, positionally or by name (`ops.softmax(x, axis=0)`)."""
    cls = getattr(operations, d.name)
    default = cls()
    made = [a.name for a in d.attrs if a.name not in d.api.call_attrs]
    arity = d.arity if d.arity is not None else None

    def fn(*args, **kwargs):
        tensors = list(args) if arity is None else list(args[:arity])
        extra = [] if arity is None else list(args[arity:])
        call = dict(zip(d.api.call_attrs, extra))
        construct = dict(zip(made, extra[len(d.api.call_attrs):]))
        for key, value in kwargs.items():
            (construct if key in made else call)[key] = value
        prim = cls(**construct) if construct else default
        return prim(*tensors, **call)
    fn.__name__ = fn.__qualname__ = d.api.functional
    fn.__module__ = __name__
    fn.__doc__ = f"ops.{d.api.functional}: P.{d.name} called on the arguments. {default.__doc__}"
    return fn


FUNCTIONS = {d.api.functional: _functional(d) for d in OPS.values() if d.api.functional}
globals().update(FUNCTIONS)


def one_hot(indices, depth, on_value=1, off_value=0, axis=-1):
    """MindSpore 2.x's ops.one_hot: P.OneHot(axis) with on_value and off_value as Tensors or Python
    numbers (an int gives int64, a float float32, as MindSpore makes scalar tensors)."""
    values = [v if isinstance(v, TensorOps) else Tensor(v) for v in (on_value, off_value)]
    return operations.OneHot(axis=axis)(indices, depth, *values)


__all__ = sorted(FUNCTIONS) + ["one_hot", "assign", "assign_add", "assign_sub", "depend", "dtype", "fill",
                               "make_range", "partial", "rank", "shape", "size", "tuple_to_array"]
