"""The primitives of SPEC §3, with MindSpore's names, aliases and signatures.

    P.Mul()(x, 2.0)                 tensors at the call, attributes at construction
    P.ReduceSum(keep_dims=True)(x, axis=1)
    P.Cast()(x, mstype.float16)     call-time attributes follow the tensors
    P.LayerNorm(begin_norm_axis=-1)(x, gamma, beta) -> (y, mean, variance)
"""
from __future__ import annotations

from graphkernel.ops.primitive import Primitive, PrimitiveCallError


def _prim(name: str, op: str | None = None, tensors: int = 1, call_attrs: tuple[str, ...] = (),
          call_defaults: dict | None = None, doc: str = "") -> type:
    return type(name, (Primitive,), {"op": op or name, "num_tensors": tensors, "call_attrs": call_attrs,
                                     "call_defaults": call_defaults or {},
                                     "__doc__": doc or f"MindSpore's {name}: see SPEC §3.",
                                     "__module__": __name__})


# elementwise with broadcasting: (x, y)
Add = _prim("Add", tensors=2)
Sub = _prim("Sub", tensors=2)
Mul = _prim("Mul", tensors=2)
RealDiv = _prim("RealDiv", tensors=2)
Pow = _prim("Pow", tensors=2)
Maximum = _prim("Maximum", tensors=2)
Minimum = _prim("Minimum", tensors=2)
Greater = _prim("Greater", tensors=2)
Less = _prim("Less", tensors=2)
Equal = _prim("Equal", tensors=2)
Select = _prim("Select", tensors=3, doc="Select()(cond, x, y): x where cond else y.")

# unary: (x)
Exp = _prim("Exp")
Log = _prim("Log")
Sqrt = _prim("Sqrt")
Rsqrt = _prim("Rsqrt")
Neg = _prim("Neg")
Abs = _prim("Abs")
Tanh = _prim("Tanh")
Erf = _prim("Erf")
Cast = _prim("Cast", call_attrs=("dtype",), doc="Cast()(x, dtype).")

# reductions: ReduceX(keep_dims=False)(x, axis=()), () meaning every axis
ReduceSum = _prim("ReduceSum", call_attrs=("axis",), call_defaults={"axis": ()})
ReduceMax = _prim("ReduceMax", call_attrs=("axis",), call_defaults={"axis": ()})
ReduceMin = _prim("ReduceMin", call_attrs=("axis",), call_defaults={"axis": ()})
ReduceMean = _prim("ReduceMean", call_attrs=("axis",), call_defaults={"axis": ()})

# data movement
Reshape = _prim("Reshape", call_attrs=("shape",), doc="Reshape()(x, shape); one dim may be -1.")
Transpose = _prim("Transpose", call_attrs=("perm",), doc="Transpose()(x, perm).")
BroadcastTo = _prim("BroadcastTo", doc="BroadcastTo(shape)(x); -1 keeps the input's dim.")

# opaque
MatMul = _prim("MatMul", tensors=2, doc="MatMul(transpose_a=False, transpose_b=False)(a, b), 2-D.")
BatchMatMul = _prim("BatchMatMul", tensors=2,
                    doc="BatchMatMul(transpose_a=False, transpose_b=False)(a, b), batch dims broadcast.")

# composite ops (expanded into primitives by the expanders)
Square = _prim("Square")
Sigmoid = _prim("Sigmoid")
ReLU = _prim("ReLU")
GeLU = _prim("GeLU", doc="GeLU()(x), tanh form as in BERT.")
BiasAdd = _prim("BiasAdd", tensors=2, doc="BiasAdd(data_format='NCHW')(x, bias): bias on the channel axis.")
Softmax = _prim("Softmax", doc="Softmax(axis=-1)(x).")
LogSoftmax = _prim("LogSoftmax", doc="LogSoftmax(axis=-1)(x).")
LayerNorm = _prim("LayerNorm", tensors=3,
                  doc="LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=1e-7)(x, gamma, beta) "
                      "-> (y, mean, variance).")



class PyFunc(Primitive):
    """PyFunc(fn, in_types, in_shapes, out_types, out_shapes, stateful=True)(*inputs): MindSpore's PyFunc.

    fn runs on the host (SPEC §8, graphkernel/host.py) on one read-only numpy array per input and
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


# MindSpore aliases
TensorAdd = Add
Div = RealDiv

__all__ = [name for name, obj in list(globals().items())
           if isinstance(obj, type) and issubclass(obj, Primitive) and obj is not Primitive]


def __getattr__(name: str):
    import difflib
    from graphkernel.ops.primitive import UnknownPrimitiveError
    if name.startswith("__"):
        raise AttributeError(name)
    near = difflib.get_close_matches(name, __all__, n=1)
    hint = f" (did you mean P.{near[0]}?)" if near else ""
    raise UnknownPrimitiveError(f"graphkernel has no primitive P.{name}{hint}; available: {', '.join(sorted(__all__))}")
