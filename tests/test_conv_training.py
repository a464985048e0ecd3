"""A residual block of a convolutional network trained end to end: fused, unfused and the numpy reference
give the same losses and moving statistics, BatchNorm's expansion fuses with the ReLU and the residual Add
around it, and the convolutions are kernels of their own (forward and both gradients)."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, nn, ops


class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        w = lambda *s: Tensor((rng.standard_normal(s) * 0.3).astype(np.float32))  # noqa: E731
        self.conv1 = nn.Conv2d(4, 4, 3, weight_init=w(4, 4, 3, 3))
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, stride=1, weight_init=w(4, 4, 3, 3))
        self.bn2 = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2, 2, pad_mode="same")
        self.relu = nn.ReLU()
        self.mean = ops.ReduceMean(keep_dims=True)
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(4, 3, weight_init=w(3, 4), bias_init="zeros")

    def construct(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)) + x)
        return self.fc(self.flatten(self.mean(self.pool(out), (2, 3))))


def _train(target, fused, steps=3):
    ms.set_context(mode=ms.GRAPH_MODE, device_target=target, enable_graph_kernel=fused)
    net = Block()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss), nn.Momentum(net.trainable_params(), 0.05, 0.9))
    train.set_train()
    rng = np.random.default_rng(1)
    data = (Tensor(rng.standard_normal((2, 4, 7, 6)).astype(np.float32)), Tensor(np.array([0, 2], np.int32)))
    losses = [float(train(*data).asnumpy()) for _ in range(steps)]
    moving = [p.asnumpy() for p in net.get_parameters() if "moving" in p.name]
    return losses, moving, (train.compile(*data).kernels if target == "Ascend" else None)


@pytest.fixture(scope="module")
def runs():
    return {name: _train(*args) for name, args in
            (("reference", ("CPU", False)), ("unfused", ("Ascend", False)), ("fused", ("Ascend", True)))}


def test_fused_unfused_and_reference_losses_agree(runs):
    ref = runs["reference"]
    for name in ("unfused", "fused"):
        losses, moving, _ = runs[name]
        np.testing.assert_allclose(losses, ref[0], rtol=1e-5, err_msg=name)
        for a, b in zip(moving, ref[1]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)
    assert ref[0][-1] < ref[0][0]


def test_batch_norm_fuses_with_relu_and_the_residual_add(runs):
    kernels = runs["fused"][2]
    fused = [set(k.op_types) for k in kernels if len(k.op_types) > 1]
    assert any({"Sqrt", "Maximum", "Add"} <= ops_ for ops_ in fused)           # normalize, residual Add, ReLU
    assert any({"ReduceSum", "Select"} <= ops_ for ops_ in fused)              # ReluGrad into BatchNormGrad's sums
    assert not any(k.op_types in (("BatchNorm",), ("BatchNormGrad",)) for k in kernels)
    convs = sorted(k.op_types[0] for k in kernels if k.variant == "conv")
    assert convs == ["Conv2D"] * 2 + ["Conv2DBackpropFilter"] * 2 + ["Conv2DBackpropInput"]   # no dx for the input
    assert len(kernels) < len(runs["unfused"][2])
