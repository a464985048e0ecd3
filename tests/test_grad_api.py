"""graphkernel.grad / value_and_grad / GradOperation / jit / stop_gradient with MindSpore's semantics, in
GRAPH_MODE and PYNATIVE_MODE, on the reference and on the emulated device with fusion; errors."""
import os

import numpy as np
import pytest

from graphkernel import Parameter, Tensor, context
from graphkernel.gradients import GradError, GradOperation, grad, value_and_grad
from graphkernel.common.api import jit
from graphkernel.nn import Cell
from graphkernel.ops import composite as C
from graphkernel.ops import operations as P
from graphkernel import ops
from tests.tolerance import assert_close

RNG = np.random.default_rng(0)
X = RNG.uniform(-1, 1, (2, 4)).astype(np.float32)
W = RNG.uniform(-1, 1, (4, 3)).astype(np.float32)



class Net(Cell):
    """loss = sum(tanh(x @ w) * y)"""

    def __init__(self):
        super().__init__()
        self.w = Parameter(W.copy(), name="w")
        self.matmul = P.MatMul()
        self.sum = P.ReduceSum()

    def construct(self, x, y):
        return self.sum(P.Tanh()(self.matmul(x, self.w)) * y)


def _expected(y):
    x, w, y = X.astype(np.float64), W.astype(np.float64), y.astype(np.float64)
    t = np.tanh(x @ w)
    d = (1 - t * t) * y
    return float(np.sum(t * y)), (d @ w.T).astype(np.float32), t.astype(np.float32), (x.T @ d).astype(np.float32)


Y = RNG.uniform(-1, 1, (2, 3)).astype(np.float32)
LOSS, DX, DY, DW = _expected(Y)


def _close(got, want):
    assert_close(got.asnumpy(), want, rtol_scale=10)   # float32 kernels against float64 math


def test_grad_positions_and_weights(setting):
    net = Net()
    x, y = Tensor(X), Tensor(Y)
    _close(grad(net)(x, y), DX)
    dx, dy = grad(net, (0, 1))(x, y)
    _close(dx, DX)
    _close(dy, DY)
    (dw,) = grad(net, None, net.trainable_params())(x, y)
    _close(dw, DW)
    _close(grad(net, None, net.w)(x, y), DW)
    dx, (dw,) = grad(net, 0, [net.w])(x, y)
    _close(dx, DX)
    _close(dw, DW)


def test_value_and_grad_with_aux_as_mindspore_returns_it(setting):
    net = Net()

    def forward(x, y):
        out = net(x, y)
        return out, x * 2.0

    (loss, doubled), (dx, (dw,)) = value_and_grad(forward, 0, [net.w], has_aux=True)(Tensor(X), Tensor(Y))
    assert abs(float(loss.asnumpy()) - LOSS) < 1e-5
    _close(doubled, X * 2)
    _close(dx, DX)
    _close(dw, DW)
    dx, aux = grad(forward, 0, has_aux=True)(Tensor(X), Tensor(Y))
    assert isinstance(aux, tuple) and len(aux) == 1     # MindSpore: aux is always a tuple
    _close(aux[0], X * 2)


def test_grad_operation_r07_style(setting):
    net = Net()
    x, y = Tensor(X), Tensor(Y)
    _close(C.GradOperation()(net)(x, y), DX)
    dx, dy = C.GradOperation(get_all=True)(net)(x, y)
    _close(dy, DY)
    (dw,) = ops.GradOperation(get_by_list=True)(net, [net.w])(x, y)
    _close(dw, DW)
    (dx, dy), (dw,) = GradOperation(get_all=True, get_by_list=True)(net, [net.w])(x, y)
    _close(dw, DW)
    sens = Tensor(np.float32(3.0))
    (dw,) = GradOperation(get_by_list=True, sens_param=True)(net, [net.w])(x, y, sens)
    _close(dw, DW * 3)


def test_sens_param_weights_a_tuple_output(setting):
    class Two(Cell):
        def construct(self, x):
            return x * 2.0, P.Exp()(x)
    s1, s2 = RNG.uniform(-1, 1, (2, 4)).astype(np.float32), RNG.uniform(-1, 1, (2, 4)).astype(np.float32)
    dx = GradOperation(sens_param=True)(Two())(Tensor(X), (Tensor(s1), Tensor(s2)))
    _close(dx, 2 * s1 + np.exp(X) * s2)


def test_integer_inputs_get_zeros_under_get_all(setting):
    class WithLabel(Cell):
        def construct(self, x, n):
            return P.ReduceSum()(x * P.Cast()(n, P.Cast()(x, x.dtype).dtype))
    n = Tensor(np.array([2, 3, 1, 0], np.int32))
    dx, dn = GradOperation(get_all=True)(WithLabel())(Tensor(X), n)
    _close(dx, np.broadcast_to(np.array([2, 3, 1, 0], np.float32), X.shape))
    assert dn.dtype == n.dtype and not dn.asnumpy().any()


def test_stop_gradient(setting):
    def f(x):
        return P.ReduceSum()(ops.stop_gradient(x * x) * x)
    _close(grad(f)(Tensor(X)), X * X)


def test_jit_train_step_is_one_graph_with_forward_and_backward():
    context.set_context(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    net = Net()
    grad_fn = value_and_grad(lambda x, y: net(x, y), None, net.trainable_params())

    @jit
    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        return loss, grads[0]

    loss, dw = train_step(Tensor(X), Tensor(Y))
    assert abs(float(loss.asnumpy()) - LOSS) < 1e-5
    _close(dw, DW)
    compiled = train_step.compile(Tensor(X), Tensor(Y))
    assert "autodiff" in compiled.stages
    assert any(n.op == "Gradient" for n in compiled.stages["validate"].nodes)
    assert any(n.name.startswith("Gradients/") for n in compiled.stages["autodiff"].nodes)
    assert train_step.compile(Tensor(X), Tensor(Y)) is compiled    # cached: traced once
    phases = {k.phase for k in compiled.kernels}
    assert phases == {"forward", "backward"}, [(k.name, k.phase) for k in compiled.kernels]
    matmuls = [k for k in compiled.kernels if k.op_types == ("MatMul",)]
    assert [k.phase for k in matmuls] == ["forward", "backward"]   # x @ w, then x^T @ d for the weight


def test_pynative_gradient_follows_the_branch_taken():
    context.set_context(mode=context.PYNATIVE_MODE, device_target="CPU")

    def f(x):
        s = P.ReduceSum()(x)
        if float(s.asnumpy()) > 0:      # a Python branch on a value: PYNATIVE records what ran
            return P.ReduceSum()(x * x)
        return P.ReduceSum()(x * 3.0)
    pos, neg = np.abs(X), -np.abs(X)
    _close(grad(f)(Tensor(pos)), 2 * pos)
    _close(grad(f)(Tensor(neg)), np.full_like(neg, 3))


def test_autodiff_stage_is_dumped(tmp_path):
    context.set_context(mode=context.GRAPH_MODE, device_target="CPU", save_graphs=True,
                        save_graphs_path=str(tmp_path))
    context.reset_graph_id()
    grad(Net())(Tensor(X), Tensor(Y))
    files = sorted(os.listdir(tmp_path))
    assert "hwopt_d_autodiff_end_graph_0.dot" in files
    assert files.index("6_validate.dot") >= 0 and "hwopt_d_expand_end_graph_0.dot" in files


@pytest.mark.parametrize("mode", [context.GRAPH_MODE, context.PYNATIVE_MODE])
def test_errors_name_the_thing(mode):
    context.set_context(mode=mode, device_target="CPU")
    net = Net()
    x, y = Tensor(X), Tensor(Y)
    with pytest.raises(GradError, match="grad_position 2 is out of range for 2 argument"):
        grad(net, 2)(x, y)
    with pytest.raises(GradError, match=r"weights\[0\] is a Tensor, not a Parameter"):
        grad(net, None, [Tensor(W)])
    with pytest.raises(GradError, match="weight 'other' is not a Parameter of Net"):
        grad(net, None, [Parameter(W, name="other")])
    with pytest.raises(GradError, match=r"output 0 is f32\[2, ?4\], not a scalar.*sens_param"):
        grad(lambda a: a * 2.0)(x)
    with pytest.raises(GradError, match="argument 0 is i32.*only a float input has a gradient"):
        grad(lambda n: P.ReduceSum()(P.Cast()(n, x.dtype)))(Tensor(np.array([1, 2], np.int32)))
    with pytest.raises(GradError, match="has_aux=True needs fn to return a tuple"):
        grad(lambda a: P.ReduceSum()(a), has_aux=True)(x)
    with pytest.raises(GradError, match="grad_position=None needs weights"):
        grad(net, None)
    with pytest.raises(GradError, match="sens has 1 tensor"):
        GradOperation(sens_param=True)(lambda a: (a * 2.0, a * 3.0))(x, Tensor(X))


class HostSine(Cell):
    """A host function (no gradient rule) with its gradient given by the Cell's bprop."""

    def __init__(self):
        super().__init__()
        import graphkernel.dtype as mstype
        self.sin = P.PyFunc(lambda a: np.sin(a), [mstype.float32], [(2, 4)], [mstype.float32], [(2, 4)])

    def construct(self, x):
        return self.sin(x)

    def bprop(self, x, out, dout):
        return (dout * P.Cos()(x),)


class Scaled(Cell):
    """construct computes x * x, but bprop says the gradient is 5 * dout: bprop wins."""

    def construct(self, x, y):
        return x * x, y

    def bprop(self, x, y, out, dout):
        return dout[0] * 5.0, dout[1] * 0.0


def test_cell_bprop_gives_the_gradient(setting):
    context.set_context(mix_compile_mode=True)

    def loss(x):
        return P.ReduceSum()(HostSine()(x) * 2.0)
    _close(grad(loss)(Tensor(X)), 2 * np.cos(X))
    scaled = Scaled()

    def both(x, y):
        a, b = scaled(x, y)
        return P.ReduceSum()(a + b)
    dx, dy = grad(both, (0, 1))(Tensor(X), Tensor(X))
    _close(dx, np.full_like(X, 5.0))
    _close(dy, np.zeros_like(X))


def test_pyfunc_without_bprop_is_an_error_naming_it():
    context.set_context(mode=context.GRAPH_MODE, device_target="CPU", mix_compile_mode=True)

    class NoBprop(HostSine):
        bprop = None
    from ir.autodiff import GradientError
    with pytest.raises(GradientError, match=r"PyFunc \(Default/.*\) has no gradient rule.*define bprop"):
        grad(lambda x: P.ReduceSum()(NoBprop()(x)))(Tensor(X))


def test_bprop_returning_the_wrong_gradients_is_an_error():
    context.set_context(mode=context.GRAPH_MODE, device_target="CPU")
    from graphkernel.bprop import BpropError

    class Wrong(Cell):
        def construct(self, x):
            return x * 2.0

        def bprop(self, x, out, dout):
            return (P.ReduceSum()(dout),)
    with pytest.raises(BpropError, match=r"Wrong.bprop: the gradient of input 0 is f32\[\], the input is f32\[2, ?4\]"):
        grad(lambda x: P.ReduceSum()(Wrong()(x)))(Tensor(X))


@pytest.mark.parametrize("mode", [context.GRAPH_MODE, context.PYNATIVE_MODE])
def test_gradient_of_a_gradient(mode):
    context.set_context(mode=mode, device_target="Ascend", enable_graph_kernel=True)

    def cube(v):
        return P.ReduceSum()(v * v * v)
    second = grad(lambda v: P.ReduceSum()(grad(cube)(v)))
    _close(second(Tensor(X)), 6 * X)


@pytest.mark.parametrize("mode", [context.GRAPH_MODE, context.PYNATIVE_MODE])
def test_an_onnx_model_is_differentiable(mode):
    """In PYNATIVE an ONNX model runs compiled; the tape records its graph, so the gradient is not lost."""
    from onnx import TensorProto, helper
    import graphkernel.onnx
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Tanh", ["sq"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    cell = graphkernel.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    context.set_context(mode=mode, device_target="CPU")
    t = np.tanh(X.astype(np.float64) ** 2)
    _close(grad(lambda v: P.ReduceSum()(cell(v)))(Tensor(X)), ((1 - t * t) * 2 * X).astype(np.float32))
