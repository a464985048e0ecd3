"""Python scalars as Cell arguments in GRAPH_MODE: constants of the compiled graph and part of its compile
key (one compile per value, as MindSpore compiles them); `ms.mutable` makes one a run-time input instead."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import GraphKernelError, Tensor, context
from graphkernel.nn import Cell
from graphkernel.ops import operations as P

X = np.arange(12, dtype=np.float32).reshape(3, 4)


class SumScale(Cell):
    """ReduceSum over `axis` (an int or a tuple: must be a constant), times `factor`, negated if `flip`,
    plus `bias` unless it is None."""

    def construct(self, x, axis, factor, flip, bias=None):
        y = P.ReduceSum()(x, axis) * factor
        if flip:
            y = -y
        if bias is not None:
            y = y + bias
        return y


def expected(axis, factor, flip, bias=None):
    y = X.sum(axis=axis) * np.float32(factor)
    y = -y if flip else y
    return y if bias is None else y + np.float32(bias)


@pytest.mark.parametrize("args", [(1, 2.0, False), (0, 0.5, True), ((0, 1), 3.0, False, 1.5), (-1, 2, True, None)])
def test_scalars_are_constants_of_the_graph(setting, args):
    out = SumScale()(Tensor(X), *args)
    np.testing.assert_allclose(out.asnumpy(), expected(*args), rtol=1e-6)


def test_one_compile_per_value(cpu):
    net = SumScale()
    x = Tensor(X)
    for axis, factor, flip in [(1, 2.0, False), (1, 2.0, False), (0, 2.0, False), (1, 2.0, True), (1, 2.0, False)]:
        np.testing.assert_allclose(net(x, axis, factor, flip).asnumpy(), expected(axis, factor, flip))
    assert net.trace_count == 3
    net(x, 1, 2, False)      # 2 and 2.0 are different constants (an int and a float), as True and 1 are
    assert net.trace_count == 4
    compiled = net.compile(x, 1, 2.0, False)
    assert len(compiled.graph.inputs) == 1      # the constants are not inputs of the compiled graph


class Scale(Cell):
    def construct(self, x, factor):
        return x * factor


def test_mutable_is_a_run_time_value(cpu):
    net = Scale()
    x = Tensor(X)
    for factor in (1.5, 2.5, -1.0):
        np.testing.assert_array_equal(net(x, ms.mutable(factor)).asnumpy(), X * np.float32(factor))
    assert net.trace_count == 1
    compiled = net.compile(x, ms.mutable(2.0))
    assert [v.type for v in compiled.graph.inputs][1].shape == ()   # a 0-d float32 input
    for factor in (1.5, 2.5):
        net(x, factor)
    assert net.trace_count == 3   # as constants, each value compiles


def test_mutable_tuple_and_int(cpu):
    class AddBoth(Cell):
        def construct(self, x, pair):
            return x + P.Cast()(pair[0], ms.float32) + pair[1]

    net = AddBoth()
    for a, b in [(1, 0.5), (2, 1.5)]:
        np.testing.assert_array_equal(net(Tensor(X), ms.mutable((a, b))).asnumpy(), X + np.float32(a) + np.float32(b))
    assert net.trace_count == 1
    assert ms.mutable(3).tensors[0].dtype == ms.int64   # as MindSpore: a mutable int is int64


def test_pynative_takes_the_same_arguments():
    context.set_context(mode=context.PYNATIVE_MODE, device_target="CPU")
    np.testing.assert_allclose(SumScale()(Tensor(X), 1, 2.0, True).asnumpy(), expected(1, 2.0, True))
    np.testing.assert_array_equal(Scale()(Tensor(X), ms.mutable(2.0)).asnumpy(), X * 2)


def test_jit_function_takes_constants(cpu):
    @ms.jit
    def f(x, axis):
        return P.ReduceSum()(x, axis)

    np.testing.assert_array_equal(f(Tensor(X), 0).asnumpy(), X.sum(0))
    np.testing.assert_array_equal(f(Tensor(X), 1).asnumpy(), X.sum(1))


def test_bad_arguments_are_named(cpu):
    with pytest.raises(GraphKernelError, match=r"Scale: argument 1 is the int 2\*\*70|Scale: argument 1 is the int "
                       r"1180591620717411303424, outside int64"):
        Scale()(Tensor(X), 2 ** 70)   # as MindSpore 2.10, which cannot cast it to a C++ long
    with pytest.raises(GraphKernelError, match=r"mutable: got a NoneType; accepted: a bool, int, float, Tensor"):
        ms.mutable(None)    # as MindSpore 2.10: mutable(None) is a TypeError there too
    with pytest.raises(GraphKernelError, match="ReduceSum"):   # a run-time axis cannot be an attribute
        SumScale()(Tensor(X), ms.mutable(1), 2.0, False)
