"""Identity, FastGeLU, G.FastGeLUGrad, P.Slice(x, begin, size) and G.SoftmaxGradExt: in every mode and target,
fused and unfused, against the values MindSpore 2.10 printed for the same inputs on its CPU (`pip install
mindspore==2.10.0`), or against numpy where MindSpore 2.10 has no such primitive (SoftmaxGradExt is its
graph-kernel composite only). The generated tests (op table, expanders, gradients against float64 finite
differences) cover the rows too."""
import warnings

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import GraphKernelError, Tensor, ops
from graphkernel.nn import Cell
from graphkernel.ops.operations import _grad_ops as G
from tolerance import assert_close

X = np.array([[-3.0, -1.0, -0.5, 0.0], [0.25, 1.0, 2.0, 5.0]], np.float32)
DY = np.array([[1.0, 0.5, -1.0, 2.0], [0.3, -0.7, 1.5, 1.0]], np.float32)
# MindSpore 2.10, CPU
FAST_GELU = [[-0.01807131, -0.15420423, -0.14961156, 0.0], [0.15119965, 0.84579575, 1.9356586, 4.998993]]
FAST_GELU_F16 = [[-0.01808, -0.1542, -0.1497, 0.0], [0.1512, 0.8457, 1.936, 5.0]]
FAST_GELU_GRAD = [[-0.02454832, -0.0338898, -0.12077809, 1.0], [0.21195014, -0.7474457, 1.610723, 1.0015122]]


class Call(Cell):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def construct(self, *xs):
        return self.fn(*xs)


def test_fast_gelu_as_mindspore_2_10(setting):
    assert_close(Call(ops.FastGeLU())(Tensor(X)).asnumpy(), np.float32(FAST_GELU))
    assert_close(ops.fast_gelu(Tensor(X.astype(np.float16))).asnumpy(), np.float16(FAST_GELU_F16))


def test_fast_gelu_grad_as_mindspore_2_10(setting):
    got = Call(lambda dy, x: G.FastGeLUGrad()(dy, x))(Tensor(DY), Tensor(X))
    assert_close(got.asnumpy(), np.float32(FAST_GELU_GRAD))


def test_fast_gelu_does_not_overflow(setting):
    x = np.array([-100.0, -30.0, 30.0, 100.0], np.float32)
    y = Call(ops.FastGeLU())(Tensor(x)).asnumpy()
    assert np.isfinite(y).all()
    assert_close(y, np.float32([0.0, 0.0, 30.0, 100.0]))


def test_fast_gelu_and_its_gradient_fuse_into_one_kernel_each():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    net = Call(lambda x: ops.FastGeLU()(x) * 2.0)
    assert len(net.compile(Tensor(X)).kernels) == 1
    grad = Call(lambda x, dy: ops.GradOperation(sens_param=True)(ops.FastGeLU())(x, dy))
    assert len(grad.compile(Tensor(X), Tensor(DY)).kernels) == 1


def test_identity_as_mindspore_2_10(setting):
    """MindSpore 2.10: P.Identity()(x) * 2 in a Cell gave 2x; the Identity itself leaves no kernel."""
    got = Call(lambda x: ops.Identity()(x) * 2)(Tensor(X))
    np.testing.assert_array_equal(got.asnumpy(), X * 2)
    assert ops.identity(Tensor(X)).asnumpy().tolist() == X.tolist()


def test_identity_leaves_no_kernel():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=False)
    compiled = Call(lambda x: ops.Identity()(x) + 1.0).compile(Tensor(X))
    assert [k.op_types for k in compiled.kernels] == [("Add",)]


A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("begin, size, want", [
    ((0, 1, 1), (2, 2, 2), [[[5, 6], [9, 10]], [[17, 18], [21, 22]]]),      # MindSpore 2.10's results
    ((1, 0, 2), (-1, -1, -1), [[[14, 15], [18, 19], [22, 23]]]),
    ((0, 0, 0), (1, 3, -1), A[:1].tolist()),
    ((0, 0, 0), (1, 1, 0), np.zeros((1, 1, 0)).tolist()),
])
def test_slice_as_mindspore_2_10(setting, begin, size, want):
    got = Call(lambda x: ops.Slice()(x, begin, size))(Tensor(A))
    np.testing.assert_array_equal(got.asnumpy(), np.float32(want).reshape(got.shape))
    assert got.shape == np.asarray(want).shape


def test_slice_gradient_puts_the_cotangent_back(cpu):
    dx = ms.grad(lambda x: ops.ReduceSum()(ops.Slice()(x, (0, 1, 1), (2, 2, 2)) * 3.0))(Tensor(A))
    want = np.zeros_like(A)
    want[:, 1:3, 1:3] = 3.0
    np.testing.assert_array_equal(dx.asnumpy(), want)


def test_slice_bad_arguments_as_mindspore_2_10_refuses_them(cpu):
    """MindSpore 2.10 refuses the same: begin + size past the end, a short begin, a negative begin,
    a size below -1."""
    with pytest.raises(GraphKernelError, match=r"P.Slice: axis 2: begin 3 \+ size 2 is past its length 4"):
        ops.Slice()(Tensor(A), (0, 0, 3), (1, 1, 2))
    with pytest.raises(GraphKernelError, match=r"P.Slice: begin \(0, 0\) and size \(1, 1\) need one entry per axis"):
        ops.Slice()(Tensor(A), (0, 0), (1, 1))
    with pytest.raises(GraphKernelError, match=r"P.Slice: axis 2: begin -1 must be >= 0"):
        ops.Slice()(Tensor(A), (0, 0, -1), (1, 1, 1))
    with pytest.raises(GraphKernelError, match=r"size -2 >= -1"):
        ops.Slice()(Tensor(A), (0, 0, 0), (1, 1, -2))
    with pytest.raises(GraphKernelError, match=r"P.Slice: begin must be a tuple of ints, got 'a'"):
        ops.Slice()(Tensor(A), "a", (1, 1, 1))


@pytest.mark.parametrize("axis", [(-1,), (0,), ()])
def test_softmax_grad_ext_is_scaled_softmax_grad(setting, axis):
    rng = np.random.default_rng(2)
    dy = rng.standard_normal((3, 5)).astype(np.float32)
    e = np.exp(rng.standard_normal((3, 5))).astype(np.float32)
    y = e / e.sum(axis=axis or None, keepdims=True)
    z = np.float32(0.125)
    got = Call(lambda a, b, c: G.SoftmaxGradExt(axis=axis)(a, b, c))(Tensor(dy), Tensor(y), Tensor(np.asarray(z)))
    want = (dy - (dy * y).sum(axis=axis or None, keepdims=True)) * y * z
    assert_close(got.asnumpy(), want)
    if axis == (-1,):   # the same as SoftmaxGrad times z
        assert_close(got.asnumpy(), G.SoftmaxGrad()(Tensor(y), Tensor(dy)).asnumpy() * z)


def test_softmax_grad_ext_is_one_kernel():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    args = [Tensor(np.ones((64, 128), np.float32))] * 2 + [Tensor(np.float32(0.5))]
    compiled = Call(lambda a, b, c: G.SoftmaxGradExt()(a, b, c)).compile(*args)
    assert [k.variant for k in compiled.kernels] == ["rows"]


def test_bad_inputs_are_named(cpu):
    with pytest.raises(GraphKernelError, match=r"FastGeLU .*dtype int32 not supported \(needs a float dtype\)"):
        ops.FastGeLU()(Tensor(np.ones(3, np.int32)))
    with pytest.raises(GraphKernelError, match=r"FastGeLUGrad .*dy \(3,\) and x \(4,\) must have one shape"):
        G.FastGeLUGrad()(Tensor(np.ones(3, np.float32)), Tensor(np.ones(4, np.float32)))
    with pytest.raises(GraphKernelError, match=r"SoftmaxGradExt .*z \(2, 5\) must broadcast to x's shape \(5,\)"):
        G.SoftmaxGradExt()(Tensor(np.ones(5, np.float32)), Tensor(np.ones(5, np.float32)),
                           Tensor(np.ones((2, 5), np.float32)))


def test_enable_and_disable_expand_ops_of_softmax_grad_ext():
    """--enable_expand_ops=SoftmaxGradExt is accepted without a warning (it is expanded already);
    --disable_expand_ops=SoftmaxGradExt keeps it one op of its own."""
    args = [Tensor(np.ones((8, 16), np.float32))] * 2 + [Tensor(np.float32(0.5))]
    net = Call(lambda a, b, c: G.SoftmaxGradExt()(a, b, c))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True,
                       graph_kernel_flags="--enable_expand_ops=SoftmaxGradExt")
        expanded = net.compile(*args)
    assert [k.variant for k in expanded.kernels] == ["rows"]
    ms.set_context(graph_kernel_flags="--disable_expand_ops=SoftmaxGradExt")
    kept = Call(lambda a, b, c: G.SoftmaxGradExt()(a, b, c)).compile(*args)
    assert [k.op_types for k in kept.kernels] == [("SoftmaxGradExt",)]
