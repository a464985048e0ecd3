"""MindSpore's composite-function API and module paths, as real training scripts use them:
MultitypeFuncGraph, HyperMap, Map, partial, the functional forms, trace-time queries, the stand-alone
parallel context, and the Cell/Parameter contract (to_float, value(), scope names, jit methods)."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Parameter, Tensor, context, nn
from graphkernel.common import dtype as mstype
from graphkernel.communication import management
from graphkernel.ops import composite as C
from graphkernel.ops import functional as F
from graphkernel.ops import operations as P
from graphkernel.ops.multitype import CompositeError
from ir.errors import GraphKernelError
from tolerance import assert_close


@pytest.fixture(autouse=True)
def fresh_context():
    context.reset_context()
    management.release()
    yield
    context.reset_context()
    management.release()


def _overloads():
    f = C.MultitypeFuncGraph("pick")

    @f.register("Number")
    def _number(x):
        return "Number"

    @f.register("Bool")
    def _bool(x):
        return "Bool"

    @f.register("Tensor")
    def _tensor(x):
        return "Tensor"

    @f.register("Tensor", "Tuple")
    def _tensor_tuple(x, t):
        return "Tensor, Tuple"

    @f.register("Function", "Tensor")
    def _function(fn, x):
        return fn(x)
    return f


def test_multitype_chooses_by_kind():
    f = _overloads()
    assert f(True) == "Bool", "a bool matches Bool before Number"
    assert f(3) == "Number" and f(2.5) == "Number"
    assert f(Tensor(np.ones(2, np.float32))) == "Tensor"
    assert f(Parameter(np.ones(2, np.float32), name="w")) == "Tensor", "a Parameter is a Tensor"
    assert f(Tensor(np.ones(2, np.float32)), (1, 2)) == "Tensor, Tuple"
    assert f(F.partial(lambda a, x: a * 2, 1), Tensor(np.ones(1, np.float32))) == 2


def test_multitype_without_an_overload_names_itself_and_its_signatures():
    with pytest.raises(CompositeError, match=r"'pick' has no overload for arguments of kinds \(String\); its "
                                             r"registered signatures: \(Number\); \(Bool\); \(Tensor\)"):
        _overloads()("text")


def test_register_refuses_an_unknown_type_name():
    f = C.MultitypeFuncGraph("f")
    with pytest.raises(CompositeError, match="unknown type name 'Tensr' \\(did you mean 'Tensor'\\?\\)"):
        f.register("Tensr")
    f.register("RowTensor")(lambda g: g)   # MindSpore's sparse kinds: registered, never chosen
    with pytest.raises(CompositeError, match="no overload"):
        f(Tensor(np.ones(1, np.float32)))


def test_hypermap_recurses_and_map_does_not():
    add = C.MultitypeFuncGraph("add")

    @add.register("Number", "Number")
    def _add(a, b):
        return a + b

    @add.register("Tuple", "Tuple")
    def _concat(a, b):
        return a + b

    assert C.HyperMap()(add, (1, (2, 3)), (10, (20, 30))) == (11, (22, 33))
    assert C.Map()(add, (1, (2, 3)), (10, (20, 30))) == (11, (2, 3, 20, 30))
    assert C.HyperMap(add)((1, 2), (3, 4)) == (4, 6), "the function given at construction"
    assert C.Map(add, reverse=True)((1, 2), (3, 4)) == (4, 6)


def test_hypermap_mixes_tensors_with_python_bools():
    scale = C.MultitypeFuncGraph("scale")

    @scale.register("Tensor", "Bool")
    def _scale(x, flag):
        return x * 2.0 if flag else x

    xs = (Tensor(np.ones(2, np.float32)), Tensor(np.ones(3, np.float32)))
    out = C.HyperMap()(scale, xs, (True, False))
    assert_close(out[0].asnumpy(), np.full(2, 2.0, np.float32), bitwise=True)
    assert_close(out[1].asnumpy(), np.ones(3, np.float32), bitwise=True)


def test_hypermap_refuses_different_lengths_and_mixed_kinds():
    with pytest.raises(CompositeError, match="HyperMap: the tuples have different lengths \\(2, 3\\)"):
        C.HyperMap()(lambda a, b: a, (1, 2), (1, 2, 3))
    with pytest.raises(CompositeError, match="mix sequences and non-sequences"):
        C.HyperMap()(lambda a, b: a, (1, 2), 5)
    with pytest.raises(CompositeError, match="first argument"):
        C.HyperMap()((1, 2), (3, 4))


def test_trace_time_values():
    x = Tensor(np.zeros((3, 4), np.float32))
    assert F.shape(x) == (3, 4) and P.Shape()(x) == (3, 4)
    assert F.dtype(x) == mstype.float32 and P.DType()(x) == mstype.float32
    assert F.tuple_to_array((1, 2)).dtype == mstype.int32, "MindSpore 2.10: an int tuple gives int32"
    assert F.tuple_to_array((1.0,)).dtype == mstype.float32
    assert F.make_range(3) == (0, 1, 2) and F.make_range(1, 7, 2) == (1, 3, 5)
    assert_close(F.fill(mstype.int32, (2,), 1).asnumpy(), np.ones(2, np.int32), bitwise=True)
    assert F.depend(x, 3) is x
    assert_close(F.identity(x).asnumpy(), x.asnumpy(), bitwise=True)
    assert mstype.dtype_to_nptype(mstype.float16) is np.float16
    with pytest.raises(GraphKernelError, match="tuple_to_array: elements must be Python numbers"):
        F.tuple_to_array((x,))
    with pytest.raises(GraphKernelError, match="make_range: delta must not be 0"):
        F.make_range(0, 3, 0)


class _Offsets(nn.Cell):
    """GetMaskedLMOutput's offsets: Python values from P.Shape, an int tensor from them, int32 + int64."""

    def construct(self, x, positions):
        input_shape = P.Shape()(x)
        rng = F.tuple_to_array(F.make_range(input_shape[0]))
        flat_offsets = P.Reshape()(rng * input_shape[1], (-1, 1))
        flat = P.Reshape()(positions + flat_offsets, (-1,))
        return P.Gather()(P.Reshape()(x, (-1, input_shape[2])), flat, 0), flat


@pytest.mark.parametrize("target", ["CPU", "Ascend"])
def test_shapes_are_python_values_in_graph_mode(target):
    context.set_context(mode=context.GRAPH_MODE, device_target=target)
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    positions = np.array([[0, 2], [1, 1]], np.int64)
    rows, flat = _Offsets()(Tensor(x), Tensor(positions))
    assert flat.dtype == mstype.int64, "int32 with int64 promotes to int64"
    assert_close(flat.asnumpy(), np.array([0, 2, 4, 4], np.int64), bitwise=True)
    assert_close(rows.asnumpy(), x.reshape(-1, 4)[[0, 2, 4, 4]], bitwise=True)


def test_stand_alone_parallel_context():
    assert context.get_auto_parallel_context("parallel_mode") == context.ParallelMode.STAND_ALONE
    with pytest.raises(GraphKernelError, match="'semi_auto_parallel' shards operators"):
        context.set_auto_parallel_context(parallel_mode=context.ParallelMode.SEMI_AUTO_PARALLEL)
    context.set_auto_parallel_context(gradients_mean=True)
    assert context.get_auto_parallel_context("gradients_mean") is True
    for query in (management.get_group_size, management.get_rank):
        with pytest.raises(management.CommunicationError, match="init\\(\\)"):
            query()
    management.init()
    assert management.get_group_size() == 1 and management.get_rank() == 0
    grads = (Tensor(np.ones(2, np.float32)),)
    assert nn.DistributedGradReducer([Parameter(np.ones(2, np.float32), name="w")])(grads)[0] is grads[0]
    assert_close(P.AllReduce()(grads[0]).asnumpy(), grads[0].asnumpy(), bitwise=True)   # a group of one
    context.set_context(device_id=3, reserve_class_name_in_scope=False)
    assert context.get_context("device_id") == 3


class _Scaled(nn.Cell):
    def __init__(self):
        super().__init__()
        self.scale = Parameter(np.array(2.0, np.float32), name="scale", requires_grad=False)
        self.inner = nn.Dense(2, 2, weight_init="ones", bias_init="zeros").to_float(mstype.float16)

    @ms.jit
    def doubled(self, x):
        return x * 2.0

    def construct(self, x, new_scale):
        s = self.scale
        F.assign(self.scale, new_scale)
        return s.value(), self.inner(self.doubled(x))


def test_value_after_an_assign_to_float_and_a_jit_method_inline():
    context.set_context(mode=context.GRAPH_MODE, device_target="CPU")
    net = _Scaled()
    value, y = net(Tensor(np.ones((1, 2), np.float32)), Tensor(np.array(5.0, np.float32)))
    assert float(value.asnumpy()) == 5.0, "value() reads the Parameter after the assign, as MindSpore"
    assert y.dtype == mstype.float16, "to_float(float16) casts the Dense's input"
    assert_close(y.asnumpy(), np.full((1, 2), 4.0, np.float16), bitwise=True)
    graph, *_ = net._trace([Tensor(np.ones((1, 2), np.float32)), Tensor(np.array(5.0, np.float32))])
    assert any(n.op == "Mul" for n in graph.nodes), "the jit method's Mul is inlined into construct's graph"


def test_scope_names_without_class_names():
    class Outer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.inner = nn.ReLU()

        def construct(self, x):
            return self.inner(x)

    def scope_of(reserve):
        context.set_context(mode=context.GRAPH_MODE, device_target="CPU", reserve_class_name_in_scope=reserve)
        net = Outer()
        graph, *_ = net._trace([Tensor(np.ones(2, np.float32))])
        return next(n.name for n in graph.nodes if n.op == "ReLU")

    assert scope_of(True).startswith("Default/inner-ReLU/")
    assert scope_of(False).startswith("Default/inner/")


def test_an_optimizer_of_two_groups_of_one_parameter_each():
    """Groups are told apart by identity (== on their Parameter lists would compare tensors)."""
    a, b = Parameter(np.ones(2, np.float32), name="a.weight"), Parameter(np.ones(2, np.float32), name="a.bias")
    opt = nn.SGD([{"params": [a], "weight_decay": 0.5}, {"params": [b]}], 0.1)
    assert opt.decay_flags == (True, False) and opt.optim_filter == (True, True) and not opt.use_parallel
    assert [float(w.asnumpy()) for w in opt.weight_decay] == [0.5, 0.0]
    assert [m.name for m in opt.parameters.clone(prefix="adam_m", init="zeros")] == ["adam_m.a.weight",
                                                                                      "adam_m.a.bias"]


def test_functional_one_hot_takes_python_values():
    """Dtypes and values printed from MindSpore 2.10's ops.one_hot (an out-of-range index: an off row)."""
    indices = Tensor(np.array([0, 2, 5, -1], np.int32))
    assert ms.ops.one_hot(indices, 3).dtype == mstype.int64
    out = ms.ops.one_hot(indices, 3, 1.0, 0.0)
    assert out.dtype == mstype.float32
    assert_close(out.asnumpy(), np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]], np.float32), bitwise=True)
    half = ms.ops.one_hot(indices, 3, Tensor(1.0, mstype.float16), Tensor(0.0, mstype.float16))
    assert half.dtype == mstype.float16
