"""The primitives MindSpore scripts reach for (Erfc, Softsign, SquaredDifference, OnesLike, SquareSumAll,
EqualCount, GreaterEqual), in every mode and target, fused and unfused, against the values MindSpore 2.10
printed for the same inputs on its CPU (pip install mindspore==2.10.0), and against numpy. The generated
tests (op table, expanders, gradients against float64 finite differences) cover them too."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import GraphKernelError, Tensor, ops
from graphkernel.nn import Cell
from tolerance import assert_close

X = np.array([[0.5, -1.0], [2.0, 0.0]], np.float32)
Y = np.array([[0.5, 1.0], [2.0, 3.0]], np.float32)

# name, inputs, what MindSpore 2.10 returned (CPU, PYNATIVE_MODE)
MINDSPORE_2_10 = [
    ("Erfc", (X,), ([[0.47950011, 1.8427008], [0.00467773, 1.0]],)),
    ("Softsign", (X,), ([[0.33333334, -0.5], [0.6666667, 0.0]],)),
    ("SquaredDifference", (X, Y), ([[0.0, 4.0], [0.0, 9.0]],)),
    ("OnesLike", (X,), ([[1.0, 1.0], [1.0, 1.0]],)),
    ("SquareSumAll", (X, Y), (5.25, 14.25)),
    ("EqualCount", (X, Y), ([2.0],)),
    ("GreaterEqual", (X, Y), ([[True, False], [True, False]],)),
]


class Call(Cell):
    def __init__(self, prim):
        super().__init__()
        self.prim = prim

    def construct(self, *xs):
        out = self.prim(*xs)
        return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name, inputs, expected", MINDSPORE_2_10, ids=[c[0] for c in MINDSPORE_2_10])
def test_as_mindspore_2_10_computes_them(setting, name, inputs, expected):
    got = Call(getattr(ops, name)())(*(Tensor(a) for a in inputs))
    assert len(got) == len(expected)
    for g, want in zip(got, expected):
        want = np.asarray(want, dtype=g.asnumpy().dtype)
        assert g.shape == want.shape
        assert_close(g.asnumpy(), want)


def test_equal_count_and_square_sum_all_on_larger_inputs(setting):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, (33, 65)).astype(np.float32)
    b = rng.integers(0, 3, (33, 65)).astype(np.float32)
    (count,) = Call(ops.EqualCount())(Tensor(a), Tensor(b))
    np.testing.assert_array_equal(count.asnumpy(), [np.count_nonzero(a == b)])
    sa, sb = Call(ops.SquareSumAll())(Tensor(a), Tensor(b))
    assert_close(sa.asnumpy(), np.sum(a * a))
    assert_close(sb.asnumpy(), np.sum(b * b))


def test_greater_equal_is_a_basic_fusion_op(cpu):
    ms.set_context(enable_graph_kernel=True)

    class Net(Cell):
        def construct(self, x, y):
            return ops.Select()(ops.GreaterEqual()(x, y), x * 2.0, y)

    compiled = Net().compile(Tensor(X), Tensor(Y))
    assert [k.op_types for k in compiled.kernels] == [("GreaterEqual", "Mul", "Select")]


def test_bad_inputs_are_named(cpu):
    with pytest.raises(GraphKernelError, match=r"SquareSumAll .*x \(2, 2\) and y \(3,\) must have one shape"):
        ops.SquareSumAll()(Tensor(X), Tensor(np.ones(3, np.float32)))
    with pytest.raises(GraphKernelError, match=r"Erfc .*dtype int32 not supported \(needs a float dtype\)"):
        ops.Erfc()(Tensor(np.ones(3, np.int32)))
    with pytest.raises(GraphKernelError, match=r"SquaredDifference .*different dtypes"):
        ops.SquaredDifference()(Tensor(X), Tensor(X.astype(np.float64)))
