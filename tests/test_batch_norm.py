"""BatchNorm, BatchNormGrad, nn.BatchNorm1d/2d: MindSpore 2.10's results for the same inputs (printed by
`pip install mindspore==2.10.0` on its CPU), in every mode and target, fused and unfused; the moving
statistics updated in place in training; the expansion unless --disable_expand_ops=BatchNorm. The generated
tests (tests/test_expanders.py, tests/test_grad_ops.py, tests/test_gradients.py) cover the rows too."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import GraphKernelError, Parameter, Tensor, nn, ops
from graphkernel.ops.operations import _grad_ops as G
from tolerance import assert_close

X = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2) * 0.37 - 1.5
X[0, 1] *= 2.0
DY = np.cos(np.arange(24, dtype=np.float32)).reshape(2, 3, 2, 2)
SCALE = np.array([1.0, 0.5, 2.0], np.float32)
BIAS = np.array([0.0, 0.1, -0.2], np.float32)
MEAN = np.array([0.1, 0.2, 0.3], np.float32)
VAR = np.array([1.0, 1.5, 0.5], np.float32)

# MindSpore 2.10, CPU: P.BatchNorm(is_training=True, epsilon=1e-5, momentum=0.1)(X, SCALE, BIAS, mean, var)
TRAIN_Y = np.array([[[[-1.2288465, -1.0650004], [-0.90115416, -0.73730797]],
                     [[-0.64363396, -0.46394774], [-0.2842615, -0.10457519]],
                     [[-2.657693, -2.3300004], [-2.002308, -1.6746154]]],
                    [[[0.7373079, 0.90115404], [1.0650004, 1.2288465]],
                     [[0.43933982, 0.5291829], [0.619026, 0.7088692]],
                     [[1.2746162, 1.6023085], [1.9300013, 2.2576935]]]], np.float32)
TRAIN_RESERVE = ([1.2750001, 3.0225003, 4.2349997], [5.0995255, 4.2400684, 5.0995255])   # mean, biased variance
MOVING_AFTER = ([0.2175, 0.48225003, 0.6935], [1.4828029, 1.8345792, 1.0328029])          # unbiased variance in
# is_training=False with the moving statistics MOVING_AFTER
INFER_Y = np.array([[[[-1.4104366, -1.106587], [-0.80273753, -0.49888802]],
                     [[-0.09278757, 0.18038198], [0.45355153, 0.7267212]],
                     [[1.3084514, 2.036601], [2.7647512, 3.4929016]]],
                    [[[2.2357576, 2.539607], [2.843457, 3.1473064]],
                     [[1.5536128, 1.6901975], [1.8267821, 1.9633671]],
                     [[10.046251, 10.774402], [11.502552, 12.230702]]]], np.float32)
# G.BatchNormGrad(is_training)(DY, X, SCALE, saved mean, saved variance, reserve) -> (dx, dscale, dbias)
GRAD_TRAIN_DX = np.array([[[[0.3697249, 0.16658717], [-0.25652575, -0.51021135]],
                           [[-0.18464918, 0.03630247], [0.19392745, 0.13719742]],
                           [[0.26424846, -0.413647], [-0.3496389, 0.39759767]]],
                          [[[0.30572826, 0.33431804], [-0.00654433, -0.403077]],
                           [[-0.29851475, -0.13611369], [0.08771674, 0.16413353]],
                           [[0.7567981, -0.08953224], [-0.48986456, -0.07596152]]]], np.float32)
GRAD_TRAIN_DSCALE = [-0.04731207, 0.6091216, -0.01041404]
GRAD_DBIAS = [1.2625132, 1.7602897, -3.5637171]
GRAD_INFER_DX0 = [0.999995, 0.5402996, -0.41614473, -0.98998755]   # dx[0, 0]
GRAD_INFER_DSCALE = [1.3766052, 5.0807858, -19.864899]


class Net(nn.Cell):
    def __init__(self, training, mean=MEAN, var=VAR):
        super().__init__()
        self.bn = ops.BatchNorm(is_training=training)
        self.mean = Parameter(Tensor(np.float32(mean)), name="mean")
        self.var = Parameter(Tensor(np.float32(var)), name="var")

    def construct(self, x, scale, bias):
        return self.bn(x, scale, bias, self.mean, self.var)


def test_training_as_mindspore_2_10_computes_it(setting):
    net = Net(True)
    y, batch_mean, batch_var, reserve_1, reserve_2 = net(Tensor(X), Tensor(SCALE), Tensor(BIAS))
    assert_close(y.asnumpy(), TRAIN_Y)
    assert_close(reserve_1.asnumpy(), np.float32(TRAIN_RESERVE[0]))
    assert_close(reserve_2.asnumpy(), np.float32(TRAIN_RESERVE[1]))
    # MindSpore's CPU kernel leaves batch_mean and batch_variance 0; its documentation (and here): the batch's
    assert_close(batch_mean.asnumpy(), np.float32(TRAIN_RESERVE[0]))
    assert_close(batch_var.asnumpy(), np.float32(TRAIN_RESERVE[1]) * np.float32(8 / 7))
    assert_close(net.mean.asnumpy(), np.float32(MOVING_AFTER[0]))
    assert_close(net.var.asnumpy(), np.float32(MOVING_AFTER[1]))
    net(Tensor(X), Tensor(SCALE), Tensor(BIAS))        # a second step moves them again
    assert_close(net.mean.asnumpy(), np.float32(MOVING_AFTER[0]) * 0.9 + np.float32(TRAIN_RESERVE[0]) * 0.1)


def test_inference_as_mindspore_2_10_computes_it(setting):
    mean, var = np.float32(MOVING_AFTER[0]), np.float32(MOVING_AFTER[1])
    net = Net(False, mean, var)
    y, *stats = net(Tensor(X), Tensor(SCALE), Tensor(BIAS))
    assert_close(y.asnumpy(), INFER_Y)
    for got, want in zip(stats, (mean, var, mean, var)):   # MindSpore's CPU gives zeros; its docs: these
        np.testing.assert_array_equal(got.asnumpy(), want)
    np.testing.assert_array_equal(net.mean.asnumpy(), mean)  # inference updates nothing


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_grad_as_mindspore_2_10(setting, training):
    mean, var = (X.mean((0, 2, 3)), X.var((0, 2, 3))) if training else (MEAN, VAR)
    dx, dscale, dbias = G.BatchNormGrad(is_training=training, epsilon=1e-5)(
        Tensor(DY), Tensor(X), Tensor(SCALE), Tensor(mean), Tensor(var), Tensor(var))
    if training:
        assert_close(dx.asnumpy(), GRAD_TRAIN_DX, rtol_scale=4)
        assert_close(dscale.asnumpy(), np.float32(GRAD_TRAIN_DSCALE), rtol_scale=4)
    else:
        assert_close(dx.asnumpy()[0, 0].reshape(-1), np.float32(GRAD_INFER_DX0))
        assert_close(dscale.asnumpy(), np.float32(GRAD_INFER_DSCALE))
    assert_close(dbias.asnumpy(), np.float32(GRAD_DBIAS))


def test_gradient_through_training_is_batch_norm_grad(cpu):
    """MindSpore 2.10's GradOperation(get_all=True, sens_param=True) of y gave the same dx as BatchNormGrad."""
    net = Net(True)
    dx, dscale, dbias = ops.GradOperation(get_all=True, sens_param=True)(
        lambda x, s, b: net(x, s, b)[0])(Tensor(X), Tensor(SCALE), Tensor(BIAS), Tensor(DY))
    assert_close(dx.asnumpy(), GRAD_TRAIN_DX, rtol_scale=4)
    assert_close(dscale.asnumpy(), np.float32(GRAD_TRAIN_DSCALE), rtol_scale=4)
    assert_close(dbias.asnumpy(), np.float32(GRAD_DBIAS))


def test_moving_statistics_are_written_in_place():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    net = Net(True)
    where = (net.mean._array.ctypes.data, net.var._array.ctypes.data)
    compiled = net.compile(Tensor(X), Tensor(SCALE), Tensor(BIAS))
    steps = compiled.program.steps
    assert sum(len(s.in_place) for s in steps) == 2, [(s.info.name, s.in_place) for s in steps]
    assert not [s for s in steps if s.info.op_types == ("Assign",)]   # no copy afterwards
    net(Tensor(X), Tensor(SCALE), Tensor(BIAS))
    assert (net.mean._array.ctypes.data, net.var._array.ctypes.data) == where
    assert_close(net.var.asnumpy(), np.float32(MOVING_AFTER[1]))


@pytest.mark.parametrize("training", [True, False])
def test_expanded_unless_disable_expand_ops(training):
    ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    args = (Tensor(np.random.default_rng(0).standard_normal((8, 3, 5, 5)).astype(np.float32)), Tensor(SCALE),
            Tensor(BIAS))
    ms.set_context(graph_kernel_flags="--disable_expand_ops=BatchNorm")
    try:
        plain = Net(training).compile(*args)
        want = Net(training)(*args)
    finally:
        ms.set_context(graph_kernel_flags="")
    assert [k.op_types for k in plain.kernels if "BatchNorm" in k.op_types] == [("BatchNorm",)]
    net = Net(training)
    expanded = net.compile(*args)
    got = net(*args)
    assert not any("BatchNorm" in k.op_types for k in expanded.kernels)
    assert any(len(k.op_types) > 1 for k in expanded.kernels)     # its primitives fused
    if training:   # the batch statistics: reductions in the generated kernels
        assert any("ReduceSum" in k.op_types for k in expanded.kernels)
    for g, w in zip(got, want):
        assert_close(g.asnumpy(), w.asnumpy(), rtol_scale=4)


def test_nn_batch_norm_2d_as_mindspore_2_10(setting):
    """nn.BatchNorm2d(3, momentum=0.8): set_train() normalizes by the batch and moves the statistics
    (0.8 old + 0.2 batch); set_train(False) normalizes by the moving ones (MindSpore 2.10's numbers)."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2) * 0.37 - 1.5
    bn = nn.BatchNorm2d(3, momentum=0.8)
    bn.set_train()
    y = bn(Tensor(x))
    assert_close(y.asnumpy()[0, 0].reshape(-1), np.float32([-1.2288465, -1.0650004, -0.90115416, -0.73730797]))
    assert_close(bn.moving_mean.asnumpy(), np.float32([0.25500003, 0.55100006, 0.84699994]))
    assert_close(bn.moving_variance.asnumpy(), np.float32([1.965606, 1.9656057, 1.965606]))
    bn.set_train(False)
    assert_close(bn(Tensor(x)).asnumpy()[0, 0].reshape(-1),
                 np.float32([-1.2517793, -0.98787147, -0.72396356, -0.46005565]))


def test_nn_batch_norm_1d_trains_with_the_rest(cpu):
    """A Dense + BatchNorm1d network trains: its loss falls and the moving statistics move."""
    net = nn.SequentialCell([nn.Dense(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Dense(6, 1)])
    loss_net = nn.WithLossCell(net, nn.MSELoss())
    step = nn.TrainOneStepCell(loss_net, nn.SGD(net.trainable_params(), learning_rate=0.05))
    step.set_train()
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((16, 4)).astype(np.float32))
    y = Tensor(rng.standard_normal((16, 1)).astype(np.float32))
    losses = [float(step(x, y).asnumpy()) for _ in range(20)]
    assert losses[-1] < losses[0] * 0.8, losses
    assert not np.allclose(net[1].moving_mean.asnumpy(), 0)


def test_bad_inputs_are_named(cpu):
    with pytest.raises(GraphKernelError, match=r"BatchNorm.*scale \(4,\) must be \[C\] = \(3,\)"):
        ops.BatchNorm()(Tensor(X), Tensor(np.ones(4, np.float32)), Tensor(BIAS), Tensor(MEAN), Tensor(VAR))
    with pytest.raises(GraphKernelError, match=r"BatchNorm.*x \(3,\) must have rank >= 2"):
        ops.BatchNorm()(Tensor(SCALE), Tensor(SCALE), Tensor(BIAS), Tensor(MEAN), Tensor(VAR))
    with pytest.raises(GraphKernelError, match=r"BatchNorm.*int32 not supported \(needs a float dtype\)"):
        ops.BatchNorm()(Tensor(X.astype(np.int32)), Tensor(SCALE), Tensor(BIAS), Tensor(MEAN), Tensor(VAR))
    with pytest.raises(GraphKernelError, match=r"P.BatchNorm\(\): epsilon=0: must be in \(0, 1\]"):
        ops.BatchNorm(epsilon=0)
    with pytest.raises(GraphKernelError, match=r"P.BatchNorm\(\): momentum=1.5: must be in \[0, 1\]"):
        ops.BatchNorm(momentum=1.5)
    with pytest.raises(GraphKernelError, match=r"BatchNorm2d: x must have rank 4, got shape \[6, 3\]"):
        nn.BatchNorm2d(3)(Tensor(np.ones((6, 3), np.float32)))


def test_train_one_step_cell_moves_the_statistics_once_per_step():
    """TrainOneStepCell traces the network twice (the loss and the gradient's forward); MindSpore 2.10 moves
    BatchNorm's statistics once: momentum 0.9 from zeros gives 0.1 x the batch mean, [0.315, 0.475, 0.635]
    here (recorded from MindSpore 2.10's CPU), and one BatchNorm (kept whole here) is left after CSE."""
    import graphkernel as ms
    from graphkernel import Tensor, nn, ops
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU", graph_kernel_flags="--disable_expand_ops=BatchNorm")

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm2d(3, momentum=0.9)
            self.fc = nn.Dense(3, 2, weight_init="ones", bias_init="zeros")
            self.mean = ops.ReduceMean(keep_dims=False)

        def construct(self, x):
            return self.fc(self.mean(self.bn(x), (2, 3)))

    net = Net()
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Momentum(net.trainable_params(), 0.1, 0.9))
    train.set_train()
    x = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4) / 10
    data = (Tensor(x), Tensor(np.ones((2, 2), np.float32)))
    train(*data)
    np.testing.assert_allclose(net.bn.moving_mean.asnumpy(), [0.315, 0.475, 0.635], rtol=1e-6)
    graph = train.compile(*data).stages["simplify"]
    assert sum(n.op == "BatchNorm" for n in graph.nodes) == 1
