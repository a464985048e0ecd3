"""MindSpore's explicit gradient primitives (`ops.operations._grad_ops`, both import forms, and the
`ops.auto_generate` path): each, called with MindSpore's signature and input order, equals the autodiff's
gradient of its forward op (GradOperation with the cotangent as sens), and fuses on the device."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, context, ops
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.ops.operations import _grad_ops as G
from tolerance import assert_close

RNG = np.random.default_rng(7)


def f32(*shape, low=-2.0, high=2.0):
    return Tensor(RNG.uniform(low, high, shape).astype(np.float32))


class Fn(Cell):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def construct(self, *xs):
        return self.fn(*xs)


def autodiff(fn, *inputs, sens):
    """The gradients of fn at inputs, weighted by sens, a tuple over the inputs."""
    return ops.GradOperation(get_all=True, sens_param=True)(Fn(fn))(*inputs, sens)


def test_both_import_forms_and_auto_generate_are_one_module():
    import graphkernel.ops.operations._grad_ops as G2
    from graphkernel.ops.auto_generate import GeLUGrad, LayerNormGrad
    assert G2 is G and GeLUGrad is G.GeLUGrad and LayerNormGrad is G.LayerNormGrad


@pytest.mark.parametrize("name, forward, grad_call", [
    ("SoftmaxGrad", P.Softmax(), lambda x, y, dy: G.SoftmaxGrad()(y, dy)),
    ("LogSoftmaxGrad", P.LogSoftmax(), lambda x, y, dy: G.LogSoftmaxGrad(axis=-1)(y, dy)),
    ("GeLUGrad", P.GeLU(), lambda x, y, dy: G.GeLUGrad()(dy, x, y)),
    ("SigmoidGrad", P.Sigmoid(), lambda x, y, dy: G.SigmoidGrad()(y, dy)),
    ("ReluGrad", P.ReLU(), lambda x, y, dy: G.ReluGrad()(dy, x)),
    ("TanhGrad", P.Tanh(), lambda x, y, dy: G.TanhGrad()(y, dy)),
    ("SqrtGrad", P.Sqrt(), lambda x, y, dy: G.SqrtGrad()(y, dy)),
    ("FastGeLUGrad", P.FastGeLU(), lambda x, y, dy: G.FastGeLUGrad()(dy, x)),
])
def test_one_input_grad_primitives_equal_the_autodiff(setting, name, forward, grad_call):
    x = f32(3, 5, low=0.3) if name == "SqrtGrad" else f32(3, 5)
    dy = f32(3, 5)
    (want,) = autodiff(forward, x, sens=dy)
    got = grad_call(x, forward(x), dy)
    assert_close(got.asnumpy(), want.asnumpy())


@pytest.mark.parametrize("name, forward", [("MaximumGrad", P.Maximum()), ("MinimumGrad", P.Minimum())])
def test_extremum_grads_equal_the_autodiff(setting, name, forward):
    x1 = Tensor(np.round(RNG.standard_normal((3, 4)) * 2).astype(np.float32) / 2)   # ties included
    x2 = Tensor(np.round(RNG.standard_normal((4,)) * 2).astype(np.float32) / 2)
    dy = f32(3, 4)
    want = autodiff(forward, x1, x2, sens=dy)
    got = getattr(G, name)()(x1, x2, dy)
    for g, w in zip(got, want):
        assert_close(g.asnumpy(), w.asnumpy())
    dx1, dx2 = getattr(G, name)(grad_x=False)(x1, x2, dy)
    assert not dx1.asnumpy().any()
    assert_close(dx2.asnumpy(), want[1].asnumpy())


def test_bias_add_and_layer_norm_grads_equal_the_autodiff(setting):
    x, b, dy = f32(2, 3, 4), f32(3), f32(2, 3, 4)
    _, want = autodiff(P.BiasAdd(), x, b, sens=dy)
    assert_close(G.BiasAddGrad()(dy).asnumpy(), want.asnumpy())

    x, gamma, beta, dy = f32(4, 8), f32(8), f32(8), f32(4, 8)
    layer_norm = P.LayerNorm(begin_norm_axis=1, begin_params_axis=1, epsilon=1e-7)
    _, mean, variance = layer_norm(x, gamma, beta)
    zeros = Tensor(np.zeros((4, 1), np.float32))
    want = autodiff(layer_norm, x, gamma, beta, sens=(dy, zeros, zeros))
    got = G.LayerNormGrad(begin_norm_axis=1, begin_params_axis=1, epsilon=1e-7)(x, dy, variance, mean, gamma)
    for g, w in zip(got, want):
        assert_close(g.asnumpy(), w.asnumpy())


def test_loss_and_dropout_grads_equal_the_autodiff_of_their_formulas(setting):
    x, label, dout = f32(3, 4), Tensor(RNG.uniform(0, 1, (3, 4)).astype(np.float32)), f32(3, 4)

    def sigmoid_ce(x, label):   # max(x, 0) - x * label + log(1 + exp(-|x|))
        return P.Maximum()(x, 0.0) - x * label + P.Log()(1.0 + P.Exp()(-P.Abs()(x)))

    want, _ = autodiff(sigmoid_ce, x, label, sens=dout)
    assert_close(G.SigmoidCrossEntropyWithLogitsGrad()(x, label, dout).asnumpy(), want.asnumpy())

    mask = Tensor((RNG.random((3, 4)) < 0.6).astype(np.float32))
    want, _ = autodiff(lambda x, m: x * m * (1 / 0.6), x, mask, sens=dout)
    assert_close(G.DropoutGrad(keep_prob=0.6)(dout, mask).asnumpy(), want.asnumpy())


def test_grad_primitives_expand_and_fuse(cpu):
    context.set_context(device_target="Ascend", jit_level="O1")

    @ms.jit
    def backward(y, dy):
        return G.TanhGrad()(y, dy) * 2.0

    compiled = backward.compile(f32(4, 8), f32(4, 8))
    assert [k.op_types for k in compiled.kernels] == [("Mul", "Sub", "Mul", "Mul")]


def test_bad_input_names_the_op(cpu):
    with pytest.raises(ms.GraphKernelError, match=r"MaximumGrad.*grads \(3,\) must have the broadcast shape"):
        G.MaximumGrad()(f32(2, 3), f32(3), f32(3))
    with pytest.raises(ms.GraphKernelError, match=r"DropoutGrad.*keep_prob must be a number in \(0, 1\]"):
        G.DropoutGrad(keep_prob=0.0)
    with pytest.raises(ms.GraphKernelError, match="TanhGrad.*different dtypes"):   # float widths convert
        G.TanhGrad()(f32(2), Tensor(np.zeros(2, np.int32)))   # (tests/test_grad_dtypes.py), ints do not
