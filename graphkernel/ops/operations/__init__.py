"""The primitives, with MindSpore's names, aliases and signatures: one class per op row of the op table
whose `api.primitive` is set (ir/ops), generated from the row.

    P.Mul()(x, 2.0)                 tensors at the call, attributes at construction
    P.ReduceSum(keep_dims=True)(x, axis=1)
    P.Cast()(x, mstype.float16)     call-time attributes (the row's api.call_attrs) follow the tensors
    P.LayerNorm(begin_norm_axis=-1)(x, gamma, beta) -> (y, mean, variance)

MindSpore's explicit gradient primitives are in the submodule `_grad_ops`, as there
(`from graphkernel.ops.operations import _grad_ops as G`; `G.LayerNormGrad()(x, dy, variance, mean, gamma)`).
"""
from __future__ import annotations

import difflib
import sys

from ir.ops import ALIASES, OPS, OpDef
from ir.ops.registry import REQUIRED
from graphkernel.ops.primitive import Primitive, PrimitiveCallError, UnknownPrimitiveError
from graphkernel.assign import Assign, AssignAdd, AssignSub, Depend  # noqa: F401
from graphkernel.ops.dropout import Dropout  # noqa: F401  (output and mask; ir/ops/random.py draws them)
from graphkernel.ops.static import DType, Rank, Shape, Size  # noqa: F401  (trace-time queries, not ops)
from graphkernel.ops.collective import (AllGather, AllReduce, Barrier, Broadcast, ReduceOp,  # noqa: F401
                                        ReduceScatter)   # collectives (ir/ops/collective.py)
from graphkernel.ops.float_status import (  # noqa: F401  (the sticky overflow status)
    NPUAllocFloatStatus, NPUClearFloatStatus, NPUClearFloatStatusV2, NPUGetFloatStatus, NPUGetFloatStatusV2)
from graphkernel.tensor import use_operations


def signature(d: OpDef) -> str:
    """`P.ReduceSum(keep_dims=False)(x, axis)`: the construction attributes with their defaults, then the
    tensors and the call-time attributes."""
    made = ", ".join(a.name if a.default is REQUIRED else f"{a.name}={a.default!r}"
                     for a in d.attrs if a.name not in d.api.call_attrs)
    tensors = list(d.api.inputs) or (["x", "y", "z"][:d.arity] if d.arity and d.arity <= 3 else ["*xs"])
    if d.api.packed:
        tensors = [f"({', '.join(tensors)}, ...)"]
    return f"P.{d.name}({made})({', '.join(d.api.order or tensors + list(d.api.call_attrs))})"


def _doc(d: OpDef) -> str:
    return f"MindSpore's {d.name}: {signature(d)}." + (f" {d.doc}." if d.doc else "")


def _primitive(d: OpDef, module: str = __name__) -> type:
    defaults = {a.name: a.default for a in d.attrs if a.name in d.api.call_attrs and a.default is not REQUIRED}
    return type(d.name, (Primitive,), {"op": d.name, "num_tensors": d.arity, "call_attrs": d.api.call_attrs,
                                       "call_defaults": defaults, "packed": d.api.packed, "order": d.api.order,
                                       "updates": d.api.updates, "inputs": d.api.inputs,
                                       "casts": d.api.casts, "result_casts": d.api.result_casts,
                                       "returned": d.api.returned,
                                       "__doc__": _doc(d), "__module__": module})


for _d in OPS.values():
    if _d.api.primitive:
        globals()[_d.name] = _primitive(_d)
# classes with MindSpore's signature over a row of another form, after the generated ones so they win
from graphkernel.ops.batch_norm import BatchNorm  # noqa: E402,F401  (five results; moving statistics)
from graphkernel.ops.slice import Slice  # noqa: E402,F401  (begin and size, onto the strided Slice row)

for _alias, _name in ALIASES.items():   # MindSpore's other spellings: P.TensorAdd is P.Add
    globals()[_alias] = globals()[_name]


class PyFunc(Primitive):
    """PyFunc(fn, in_types, in_shapes, out_types, out_shapes, stateful=True)(*inputs): MindSpore's PyFunc.

    fn runs on the host (mixed compute, graphkernel/host.py) on one read-only numpy array per input and
    returns one array per declared output (a tuple or list for several); results are checked against
    the declaration on every call. Several outputs come back as a tuple.
    """
    op = "PyFunc"

    def __init__(self, *args, **attrs):
        super().__init__(*args, **attrs)
        in_types = self.attrs["in_types"]
        if not isinstance(in_types, (list, tuple)):
            raise PrimitiveCallError(f"P.PyFunc(): in_types must be a list of dtypes, got {in_types!r}")
        self.num_tensors = len(in_types)


__all__ = [name for name, obj in list(globals().items())
           if isinstance(obj, type) and issubclass(obj, Primitive) and obj is not Primitive]
__all__ += ["Assign", "AssignAdd", "AssignSub", "Depend"]   # Parameter writes (graphkernel/assign.py)
__all__ += ["Dropout"]   # graphkernel/ops/dropout.py
__all__ += ["Shape", "DType", "Rank", "Size"]   # graphkernel/ops/static.py
__all__ += ["ReduceOp"]   # graphkernel/ops/collective.py
__all__ += ["NPUAllocFloatStatus", "NPUClearFloatStatus", "NPUClearFloatStatusV2", "NPUGetFloatStatus",
            "NPUGetFloatStatusV2"]   # graphkernel/ops/float_status.py

use_operations(sys.modules[__name__])   # Tensor operators and Parameter writes call these primitives


def __getattr__(name: str):
    if name.startswith("_"):   # dunders, and submodules not imported yet (_grad_ops)
        raise AttributeError(name)
    near = difflib.get_close_matches(name, __all__, n=1)
    hint = f" (did you mean P.{near[0]}?)" if near else ""
    raise UnknownPrimitiveError(f"graphkernel has no primitive P.{name}{hint}; available: {', '.join(sorted(__all__))}")
