"""Every kind of Python value MindSpore 2.10 takes as a construct argument in GRAPH_MODE, traced as it
traces it: each row of KINDS was passed to `construct(self, x, a): return x, a` in MindSpore 2.10 on the
CPU, and what came back is recorded in `returned` (Tensors nested in tuples, lists and dicts are run-time
inputs; everything else is a constant of the graph and comes back as it went in, numpy scalars as Python
numbers). One difference, on purpose: a Python number construct returns comes back as a 0-d Tensor here
(so results of tensor conditions' branches merge), as a Python number in MindSpore; `describe` reads a
0-d Tensor as the number it holds. What MindSpore refuses is refused here with its reason."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import GraphKernelError, Tensor
from graphkernel.nn import Cell, ReLU
from graphkernel.ops import operations as P

X = np.arange(6, dtype=np.float32).reshape(2, 3)
F32, I32 = np.ones(2, np.float32), np.zeros(3, np.int32)


class Obj:
    v = 2


OBJ, SLICE = Obj(), slice(0, 2)

# (id, argument, what MindSpore 2.10 returned for it: "T<dtype><shape>" for a Tensor)
KINDS = [
    ("int", 1, "int:1"), ("float", 2.5, "float:2.5"), ("bool", True, "bool:True"), ("None", None, "NoneType:None"),
    ("str", "abc", "str:'abc'"), ("complex", 1 + 2j, "complex:(1+2j)"), ("nan", float("nan"), "float:nan"),
    ("tuple-of-tensors", (Tensor(F32), Tensor(I32)), "tuple(Tfloat32[2],Tint32[3])"),
    ("list-of-tensors", [Tensor(F32), Tensor(I32)], "list(Tfloat32[2],Tint32[3])"),
    ("nested", (Tensor(F32), [1, (2.0, Tensor(F32[:1]))]), "tuple(Tfloat32[2],list(int:1,tuple(float:2.0,Tfloat32[1])))"),
    ("tuple-of-scalars", (1, 2.0, True), "tuple(int:1,float:2.0,bool:True)"),
    ("tuple-with-None", (None, Tensor(F32)), "tuple(NoneType:None,Tfloat32[2])"),
    ("empty-tuple", (), "tuple()"), ("empty-list", [], "list()"),
    ("dtype", ms.float32, "DType:float32"), ("dtype-in-tuple", (ms.float16, 1), "tuple(DType:float16,int:1)"),
    ("dict", {"a": Tensor(F32), "b": 1}, "dict{a:Tfloat32[2],b:int:1}"),
    ("dict-int-key", {1: Tensor(F32)}, "dict{1:Tfloat32[2]}"), ("dict-nested", {"a": {"b": 1}}, "dict{a:dict{b:int:1}}"),
    ("numpy-array", F32, "ndarray"), ("numpy-float32", np.float32(1.5), "float:1.5"), ("numpy-int64", np.int64(3), "int:3"),
    ("numpy-bool", np.bool_(True), "bool:True"), ("slice", SLICE, "slice:slice(0, 2, None)"),
    ("ellipsis", ..., "ellipsis:Ellipsis"), ("set", {1, 2}, "set:{1, 2}"), ("frozenset", frozenset({1}), "frozenset:frozenset({1})"),
    ("range", range(3), "range:range(0, 3)"), ("type", int, "type:<class 'int'>"), ("object", OBJ, "Obj"),
    ("Parameter", ms.Parameter(Tensor(F32), name="pp"), "Tfloat32[2]"),
]


def describe(o) -> str:
    if isinstance(o, Tensor) and o.shape == () and o.dtype in (ms.int64, ms.float32, ms.bool_):
        return describe({ms.int64: int, ms.float32: float, ms.bool_: bool}[o.dtype](o.asnumpy()))
    if isinstance(o, Tensor):
        return f"T{o.dtype.value}{list(o.shape)}"
    if isinstance(o, (tuple, list)):
        return type(o).__name__ + "(" + ",".join(describe(i) for i in o) + ")"
    if isinstance(o, dict):
        return "dict{" + ",".join(f"{k}:{describe(v)}" for k, v in o.items()) + "}"
    if isinstance(o, np.ndarray) or isinstance(o, Obj):
        return type(o).__name__
    if isinstance(o, ms.dtype.DType):
        return f"DType:{o.value}"
    return f"{type(o).__name__}:{o!r}"


class Identity(Cell):
    def construct(self, x, a):
        return x * 2.0, a


def leaves(o):
    if isinstance(o, (tuple, list)):
        return [t for i in o for t in leaves(i)]
    if isinstance(o, dict):
        return [t for v in o.values() for t in leaves(v)]
    return [o] if isinstance(o, Tensor) else []


@pytest.mark.parametrize("arg, returned", [k[1:] for k in KINDS], ids=[k[0] for k in KINDS])
def test_each_kind_comes_back_as_in_mindspore(cpu, arg, returned):
    y, a = Identity()(Tensor(X), arg)
    np.testing.assert_array_equal(y.asnumpy(), X * 2)
    assert describe(a) == returned
    for got, given in zip(leaves(a), leaves(arg)):   # Tensors pass through the graph unchanged
        np.testing.assert_array_equal(got.asnumpy(), given.asnumpy())
    if isinstance(arg, np.ndarray):
        np.testing.assert_array_equal(a, arg)


class Mixed(Cell):
    """Uses tensors from a dict and a nested tuple, a dtype, a slice, a numpy array, a Cell and an object."""

    def construct(self, x, d, pair, dtype, index, array, act, obj):
        y = x[index] * d["scale"] + pair[1][0]
        return act(P.Cast()(y, dtype) + array) * obj.v


def test_tensors_in_containers_are_run_time_inputs(two_settings):
    net, act = Mixed(), ReLU()   # a Cell argument is keyed by its identity: the same one each call
    for k in range(3):
        scale, shift = np.full((3,), k + 1, np.float32), np.float32(k)
        d = {"scale": Tensor(scale), "unused": None}
        pair = (1, (Tensor(np.array([shift])),))
        out = net(Tensor(X), d, pair, ms.float32, SLICE, np.float32(-3.0) * np.ones(3, np.float32), act, OBJ)
        want = np.maximum(X[SLICE] * scale + shift - 3, 0) * 2
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-6)
    assert net.trace_count == (1 if two_settings[0] == ms.GRAPH_MODE else 0)


def test_constants_are_part_of_the_key(cpu):
    net = Identity()
    x = Tensor(X)
    for a in (1, 1.0, True, np.float32(1.0), 0.0, -0.0, float("nan"), float("nan"), (1, 2), [1, 2], {"a": 1},
              {"a": 2}, ms.float16, ms.float32, F32, F32.copy(), F32 + 1):
        net(x, a)
    # 1 | 1.0 = np.float32(1.0) | True | 0.0 | -0.0 | nan (twice) | (1, 2) | [1, 2] | two dicts | two
    # dtypes | three arrays, two of equal bytes (one key)
    assert net.trace_count == 14


def test_an_int_outside_int64_is_refused_as_mindspore_refuses_it(cpu):
    for bad in (2 ** 70, (1, -(2 ** 64))):
        with pytest.raises(GraphKernelError, match=r"outside int64.*C\+\+ type 'long'"):
            Identity()(Tensor(X), bad)


def test_a_function_returned_is_refused_with_mindspores_reason(cpu):
    class Back(Cell):
        def construct(self, x, f):
            return f(x), f

    class Apply(Cell):
        def construct(self, x, f):
            return f(x)

    np.testing.assert_array_equal(Apply()(Tensor(X - 2), ReLU()).asnumpy(), np.maximum(X - 2, 0))   # passed in: fine
    with pytest.raises(GraphKernelError, match="Function in output is not supported"):
        Back()(Tensor(X), ReLU())


def test_pynative_gets_the_same_values():
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    y, a = Identity()(Tensor(X), (np.float32(1.5), {"k": Tensor(F32)}))
    assert describe(a) == "tuple(float:1.5,dict{k:Tfloat32[2]})"
