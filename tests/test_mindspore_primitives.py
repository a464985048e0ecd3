"""The primitives MindSpore scripts reach for (Erfc, Softsign, SquaredDifference, OnesLike, SquareSumAll,
EqualCount, GreaterEqual, and the losses SigmoidCrossEntropyWithLogits, SoftmaxCrossEntropyWithLogits,
SparseSoftmaxCrossEntropyWithLogits), in every mode and target, fused and unfused, against the values MindSpore 2.10
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
Z = np.array([[1.0, 2.0, 0.5], [-1.0, 0.0, 3.0]], np.float32)
L = np.array([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]], np.float32)
IDS = np.array([1, 2], np.int32)
A = np.array([[1.0, 5.0, 5.0], [7.0, 2.0, 7.0]], np.float32)   # ties: the first index wins

# name, inputs, what MindSpore 2.10 returned (CPU, PYNATIVE_MODE)
MINDSPORE_2_10 = [
    ("Erfc", (X,), ([[0.47950011, 1.8427008], [0.00467773, 1.0]],)),
    ("Softsign", (X,), ([[0.33333334, -0.5], [0.6666667, 0.0]],)),
    ("SquaredDifference", (X, Y), ([[0.0, 4.0], [0.0, 9.0]],)),
    ("OnesLike", (X,), ([[1.0, 1.0], [1.0, 1.0]],)),
    ("SquareSumAll", (X, Y), (5.25, 14.25)),
    ("EqualCount", (X, Y), ([2.0],)),
    ("GreaterEqual", (X, Y), ([[True, False], [True, False]],)),
    ("SigmoidCrossEntropyWithLogits", (Z, L), ([[1.3132617, 0.126928, 0.974077],
                                                [0.5132617, 0.6931472, 1.5485873]],)),
    ("SoftmaxCrossEntropyWithLogits", (Z, L), ([0.46436879, 1.76588392],
                                               [[0.231223896, -0.371468306, 0.14024438],
                                                [-0.182852179, -0.253387392, 0.436239541]])),
    ("SparseSoftmaxCrossEntropyWithLogits", (Z, IDS), (0.26512605,)),
    ("ArgMaxWithValue", (A,), ([1, 0, 1], [7.0, 5.0, 7.0])),
]


class Call(Cell):
    def __init__(self, prim):
        super().__init__()
        self.prim = prim

    def construct(self, *xs):
        out = self.prim(*xs)
        return out if isinstance(out, tuple) else (out,)


@pytest.mark.grid
@pytest.mark.parametrize("name, inputs, expected", MINDSPORE_2_10, ids=[c[0] for c in MINDSPORE_2_10])
def test_as_mindspore_2_10_computes_them(setting, name, inputs, expected):
    got = Call(getattr(ops, name)())(*(Tensor(a) for a in inputs))
    assert len(got) == len(expected)
    for g, want in zip(got, expected):
        want = np.asarray(want, dtype=g.asnumpy().dtype)
        assert g.shape == want.shape
        assert_close(g.asnumpy(), want)


def test_arg_max_with_value_along_the_last_axis_as_mindspore_2_10(setting):
    index, value = Call(ops.ArgMaxWithValue(axis=1, keep_dims=True))(Tensor(A))
    assert index.dtype == ms.int64
    np.testing.assert_array_equal(index.asnumpy(), [[1], [0]])
    np.testing.assert_array_equal(value.asnumpy(), [[5.0], [7.0]])


def test_sparse_cross_entropy_gradient_as_mindspore_2_10(setting):
    (got,) = Call(ops.SparseSoftmaxCrossEntropyWithLogits(is_grad=True))(Tensor(Z), Tensor(IDS))
    assert_close(got.asnumpy(), np.array([[0.11561181, -0.185734, 0.0701222],
                                          [0.0085739, 0.02330629, -0.03188017]], np.float32))


def test_loss_gradients_train_through_the_autodiff(cpu):
    """The gradient of the mean SoftmaxCrossEntropyWithLogits loss in the logits is (softmax - labels) / N."""
    def loss(z, labels):
        return ops.ReduceMean()(ops.SoftmaxCrossEntropyWithLogits()(z, labels)[0])

    dz = ms.grad(loss)(Tensor(Z), Tensor(L))
    e = np.exp(Z - Z.max(1, keepdims=True))
    assert_close(dz.asnumpy(), (e / e.sum(1, keepdims=True) - L) / 2)


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


class DropoutNet(Cell):
    def __init__(self, keep_prob=0.6, seed0=3, seed1=5):
        super().__init__()
        self.dropout = ops.Dropout(keep_prob=keep_prob, Seed0=seed0, Seed1=seed1)

    def construct(self, x):
        return self.dropout(x)


def test_dropout_primitive_returns_output_and_its_mask(setting):
    x = np.random.default_rng(0).standard_normal((64, 50)).astype(np.float32)
    out, mask = DropoutNet()(Tensor(x))
    m = mask.asnumpy()
    assert m.dtype == np.float32 and set(np.unique(m)) <= {0.0, 1.0}
    assert abs(m.mean() - 0.6) < 0.03
    assert_close(out.asnumpy(), (x.astype(np.float32) * np.float32(1 / 0.6)) * m)


def test_dropout_mask_is_the_same_on_every_target_and_fusion_setting():
    x = Tensor(np.random.default_rng(1).standard_normal((16, 40)).astype(np.float32))
    masks = []
    for target, fuse in (("CPU", False), ("Ascend", False), ("Ascend", True)):
        ms.set_context(device_target=target, enable_graph_kernel=fuse)
        ms.set_seed(0)
        masks.append(DropoutNet()(x)[1].asnumpy())
    assert all(np.array_equal(masks[0], m) for m in masks[1:])
    ms.set_seed(0)
    other = DropoutNet(seed1=6)(x)[1].asnumpy()   # Seed1 enters the op id: another mask
    assert not np.array_equal(other, masks[0])


def test_dropout_grad_consumes_the_mask(cpu):
    from graphkernel.ops.operations import _grad_ops as G
    drop = ops.Dropout(keep_prob=0.7, Seed0=1)

    def loss(x, dy):   # one draw: its output's gradient and its mask
        out, mask = drop(x)
        return ops.ReduceSum()(out * dy), mask

    x = Tensor(np.ones((6, 7), np.float32))
    dy = Tensor(np.random.default_rng(2).standard_normal((6, 7)).astype(np.float32))
    (_, mask), dx = ms.value_and_grad(loss, 0, None, has_aux=True)(x, dy)
    assert 0 < mask.asnumpy().sum() < 42
    assert_close(G.DropoutGrad(keep_prob=0.7)(dy, mask).asnumpy(), dx.asnumpy())


def test_dropout_bad_arguments():
    with pytest.raises(GraphKernelError, match=r"P.Dropout: keep_prob must be in \(0, 1\], got 0"):
        ops.Dropout(keep_prob=0)
    with pytest.raises(GraphKernelError, match="P.Dropout: Seed0 must be an int"):
        ops.Dropout(Seed0=-1)
