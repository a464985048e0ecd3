"""Cell tracing: scalars, *args, several outputs, Python loops over shapes, nested cells and scope names,
Parameters, the signature cache, GRAPH == PYNATIVE, and the errors a user can cause."""
import numpy as np
import pytest

from graphkernel import GraphKernelError, Parameter, Tensor, context, float64
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from tolerance import assert_close

rng = np.random.default_rng(1)
X = rng.standard_normal((4, 4)).astype(np.float32)


class Seed(Cell):
    def __init__(self):
        super().__init__()
        self.add, self.mul, self.pow = P.TensorAdd(), P.Mul(), P.Pow()

    def construct(self, x):
        return self.pow(self.add(self.mul(x, 2.0), 1.0), 3.0)


class Inner(Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(np.full((4,), 0.5, np.float32))
        self.mul = P.Mul()

    def construct(self, x):
        return self.mul(x, self.w)


class Outer(Cell):
    def __init__(self):
        super().__init__()
        self.block = Inner()
        self.exp = P.Exp()

    def construct(self, *xs):
        total = xs[0]
        for x in xs[1:]:          # a Python loop over the (static) argument list
            total = total + x
        for _ in range(total.shape[0] // 2):  # a loop over a shape
            total = total * 0.5
        return self.exp(self.block(total)), (total, [self.block.w])


def test_seed_net_matches_numpy(cpu):
    out = Seed()(Tensor(X))
    assert_close(out.asnumpy(), np.power(X * np.float32(2) + np.float32(1), np.float32(3)))


def test_nested_cells_args_and_structured_outputs(cpu):
    net = Outer()
    a, b, c = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3))
    y, (total, [w]) = net(Tensor(a), Tensor(b), Tensor(c))
    t = (a + b + c) * np.float32(0.5) * np.float32(0.5)
    assert_close(total.asnumpy(), t)
    assert_close(y.asnumpy(), np.exp(t * np.float32(0.5)))
    assert_close(w.asnumpy(), np.full((4,), 0.5, np.float32))


def test_scope_names_follow_mindspore(cpu):
    compiled = Outer().compile(Tensor(X), Tensor(X))
    names = [n.name for n in compiled.stages["validate"].nodes if n.op != "Const"]
    assert names == ["Default/Add-op0", "Default/Mul-op1", "Default/Mul-op2",
                     "Default/block-Inner/Mul-op3", "Default/Exp-op4"]


def test_signature_cache_does_not_retrace(cpu):
    net = Seed()
    for _ in range(3):
        net(Tensor(X))
    assert net.trace_count == 1
    net(Tensor(X.astype(np.float64)))
    assert net.trace_count == 2
    net(Tensor(np.ones((2, 8), np.float32)))
    assert net.trace_count == 3
    context.set_context(enable_graph_kernel=True)   # compile-relevant context: compiles anew
    net(Tensor(X))
    assert net.trace_count == 4


def test_parameter_values_are_read_at_call_time(cpu):
    net = Outer()
    before = net(Tensor(X))[0].asnumpy()
    net.block.w.set_data(np.full((4,), 2.0, np.float32))
    after = net(Tensor(X))[0].asnumpy()
    assert net.trace_count == 1
    assert not np.allclose(before, after)


def test_graph_equals_pynative(cpu):
    args = [Tensor(rng.standard_normal((4, 4)).astype(np.float32)) for _ in range(2)]
    graph_out = Outer()(*args)
    context.set_context(mode=context.PYNATIVE_MODE)
    eager_out = Outer()(*args)
    assert_close(graph_out[0].asnumpy(), eager_out[0].asnumpy())
    assert_close(graph_out[1][0].asnumpy(), eager_out[1][0].asnumpy())


def test_each_compile_takes_the_next_graph_id(cpu):
    ids = [Seed().compile(Tensor(X)).graph_id for _ in range(3)]
    assert ids == [0, 1, 2]
    context.reset_graph_id()
    assert Seed().compile(Tensor(X)).graph_id == 0


# ---- errors a user can cause ------------------------------------------------------------------

class TwoInputs(Cell):
    def __init__(self, prim):
        super().__init__()
        self.prim = prim

    def construct(self, x, y):
        return self.prim(x, y)


def test_shape_mismatch_names_op_shapes_and_rule(cpu):
    with pytest.raises(GraphKernelError, match=r"Add \(Default/Add-op0\): shapes \(4, 4\), \(3,\) do not "
                                                r"broadcast"):
        TwoInputs(P.Add())(Tensor(X), Tensor(np.ones(3, np.float32)))


def test_reduction_axis_out_of_range(cpu):
    class R(Cell):
        def construct(self, x):
            return P.ReduceSum()(x, 2)
    with pytest.raises(GraphKernelError, match=r"ReduceSum .*axis 2 out of range for rank 2"):
        R()(Tensor(X))


def test_dtype_mix_promotes_as_mindspore(cpu):
    """float32 with float64 computes in float64 (MindSpore's implicit type promotion)."""
    out = TwoInputs(P.Mul())(Tensor(X), Tensor(X.astype(np.float64)))
    assert out.dtype == float64
    np.testing.assert_array_equal(out.asnumpy(), X.astype(np.float64) * X.astype(np.float64))


def test_non_tensor_argument_and_wrong_count(cpu):
    # a numpy array is a constant argument, as in MindSpore 2.10; a primitive then asks for a Tensor
    with pytest.raises(GraphKernelError, match=r"P.Mul needs at least one tensor operand.*\(wrap an array: Tensor\(array\)\)"):
        Seed()(X)
    with pytest.raises(GraphKernelError, match=r"Seed.construct: too many positional arguments"):
        Seed()(Tensor(X), Tensor(X))
    with pytest.raises(GraphKernelError, match=r"missing a required argument: 'y'"):
        TwoInputs(P.Add())(Tensor(X))
    with pytest.raises(GraphKernelError, match=r"TwoInputs.construct: missing a required argument: 'y'"):
        Nested()(Tensor(X))     # a sub-cell called wrongly inside a trace
    with pytest.raises(GraphKernelError, match=r"P.Mul: unexpected keyword argument 'y' \(tensors are "
                                                r"positional\)"):
        P.Mul()(Tensor(X), y=Tensor(X))


class Nested(Cell):
    def __init__(self):
        super().__init__()
        self.inner = TwoInputs(P.Add())

    def construct(self, x):
        return self.inner(x)


def test_data_dependent_control_flow_compiles(cpu):
    """An `if` on a tensor compiles into a conditional (tests/test_control_flow.py has the rest)."""
    class Branchy(Cell):
        def construct(self, x):
            if P.ReduceSum()(x) > 0:
                return x
            return -x
    x = Tensor(X)
    expect = X if X.sum() > 0 else -X
    np.testing.assert_allclose(Branchy()(x).asnumpy(), expect)
    context.set_context(mode=context.PYNATIVE_MODE)   # the same op by op
    np.testing.assert_allclose(Branchy()(x).asnumpy(), expect)


def test_a_traced_value_refuses_float_and_int(cpu):
    class Scalar(Cell):
        def construct(self, x):
            return x * float(P.ReduceSum()(x))
    with pytest.raises(GraphKernelError, match=r"float\(\) of a traced tensor.*GRAPH_MODE"):
        Scalar()(Tensor(X))


class Compare(Cell):
    def construct(self, x, y):
        return x == y, x != y, x == 0.5, x > y


@pytest.mark.parametrize("mode", ["GRAPH_MODE", "PYNATIVE_MODE"])
def test_equality_operators_compare_elementwise(cpu, mode):
    context.set_context(mode=getattr(context, mode))
    x = np.array([0.5, 1.0, np.nan, 2.0], np.float32)
    y = np.array([0.5, 2.0, np.nan, 2.0], np.float32)
    got = [t.asnumpy() for t in Compare()(Tensor(x), Tensor(y))]
    want = [x == y, x != y, x == np.float32(0.5), x > y]
    for g, w in zip(got, want):
        assert g.dtype == np.bool_ and np.array_equal(g, w)
    assert (Tensor(x) == "x") is False and (Tensor(x) != None) is True   # noqa: E711 - no elementwise meaning
    for got in (Tensor(x) == y, y == Tensor(x)):   # an ndarray on either side is a constant Tensor
        assert np.array_equal(got.asnumpy(), x == y)


@pytest.mark.parametrize("construct, message", [
    (lambda self, x: x if x == 0 else -x, r"shape \(\) or \(1,\)"),   # a (4, 4) condition: no truth value
    (lambda self, x: x[x], "basic indexing .*P.Gather"),   # indexing by a tensor (x[0] is a StridedSlice)
], ids=["if x == 0", "x[x]"])
def test_equality_branches_and_indexing_on_traced_values_are_explained(cpu, construct, message):
    net = type("Net", (Cell,), {"construct": construct})()
    with pytest.raises(GraphKernelError, match=message):
        net(Tensor(X))


def test_a_scalar_takes_the_dtype_of_the_data_it_meets(cpu):
    cond = Tensor(np.array([True, False, True]))
    x = Tensor(np.array([1.0, 2.0, 3.0], np.float16))
    for mode in (context.GRAPH_MODE, context.PYNATIVE_MODE):
        context.set_context(mode=mode)
        got = SelectZero()(cond, x).asnumpy()
        assert got.dtype == np.float16 and np.array_equal(got, [1.0, 0.0, 3.0])


class SelectZero(Cell):
    def construct(self, cond, x):
        return P.Select()(cond, x, 0.0)


def test_bad_primitive_use(cpu):
    with pytest.raises(GraphKernelError, match=r"P.ReduceSum\(\): keep_dims='yes'"):
        P.ReduceSum(keep_dims="yes")
    with pytest.raises(GraphKernelError, match=r"no primitive P.Mull \(did you mean P.Mul\?\)"):
        P.Mull()
    with pytest.raises(GraphKernelError, match=r"needs at least one tensor operand"):
        P.Add()(1.0, 2.0)
    with pytest.raises(GraphKernelError, match=r"scalar 2.5 cannot be represented as int32"):
        P.Mul()(Tensor(np.ones(2, np.int32)), 2.5)
    with pytest.raises(GraphKernelError, match=r"Mul: scalar 1000000.0 overflows float16"):
        P.Mul()(Tensor(np.ones(2, np.float16)), 1e6)
    with pytest.raises(GraphKernelError, match=r"Equal: a numeric scalar 1 cannot be an operand of a bool"):
        P.Equal()(Tensor(np.ones(2, np.bool_)), 1)
    with pytest.raises(GraphKernelError, match=r"cannot reshape \(4, 4\) \(16 elements\) to \(3, -1\)"):
        P.Reshape()(Tensor(X), (3, -1))


def test_missing_super_init_is_explained():
    class NoInit(Cell):
        def __init__(self):
            self.mul = P.Mul()
    with pytest.raises(GraphKernelError, match=r"must call super\(\).__init__\(\)"):
        NoInit()


def test_a_parameter_owns_writable_data():
    """A Parameter made from read-only memory (an ONNX initializer, a memory map) holds a copy, so
    kernels never see a read-only array and the source never changes."""
    src = np.arange(4, dtype=np.float32)
    src.setflags(write=False)
    p = Parameter(src, name="w")
    assert p.asnumpy().flags.writeable and not np.shares_memory(p.asnumpy(), src)
    assert_close(p.asnumpy(), src)
