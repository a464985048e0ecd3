"""The image layers (graphkernel/nn/spatial.py) with MindSpore 2.x's arguments, Parameters and defaults, and
the loss-scale managers at MindSpore's top-level paths."""
import math

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, nn
from graphkernel.nn import LayerError
from ir.ops.conv import conv2d
from ir.ops.pool import avg_pool, max_pool
from tolerance import assert_close


@pytest.fixture(autouse=True)
def reference():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_conv2d_parameters_and_default_initializers():
    ms.set_seed(1)
    conv = nn.Conv2d(4, 6, 3, has_bias=True)
    assert [p.name for p in conv.trainable_params()] == ["weight", "bias"]
    assert conv.weight.shape == (6, 4, 3, 3) and conv.bias.shape == (6,)
    assert conv.kernel_size == (3, 3) and conv.in_channels == 4 and conv.out_channels == 6
    w, b = conv.weight.asnumpy(), conv.bias.asnumpy()
    fan_in = 4 * 9
    assert np.abs(w).max() <= math.sqrt(6 / ((1 + 5) * fan_in)) and w.std() > 0   # HeUniform(sqrt(5))
    assert np.abs(b).max() <= 1 / math.sqrt(fan_in) and b.std() > 0
    assert not hasattr(nn.Conv2d(4, 6, 3), "bias")


@pytest.mark.parametrize("kw", [dict(), dict(pad_mode="valid", stride=2), dict(pad_mode="pad", padding=(1, 0, 2, 1)),
                                dict(pad_mode="pad", padding=1, dilation=2), dict(group=2, has_bias=True)])
def test_conv2d_computes_conv2d_and_its_bias(kw):
    x = _x(2, 4, 7, 6)
    conv = nn.Conv2d(4, 6, 3, weight_init=Tensor(_x(6, 4 // kw.get("group", 1), 3, 3, seed=1)), bias_init="ones", **kw)
    attrs = dict(out_channel=6, kernel_size=(3, 3), pad_mode=kw.get("pad_mode", "same"),
                 pad=(1, 1, 1, 1) if kw.get("padding") == 1 else tuple(kw.get("padding", (0, 0, 0, 0))),
                 stride=(kw.get("stride", 1),) * 2, dilation=(kw.get("dilation", 1),) * 2, group=kw.get("group", 1))
    want = conv2d(x, conv.weight.asnumpy(), attrs) + (1.0 if kw.get("has_bias") else 0.0)
    assert_close(conv(Tensor(x)).asnumpy(), want.astype(np.float32))


def test_pooling_flatten_and_pad_layers():
    x = _x(2, 3, 7, 6)
    attrs = dict(kernel_size=(3, 3), strides=(2, 2), pad_mode="same")
    assert_close(nn.MaxPool2d(3, 2, pad_mode="same")(Tensor(x)).asnumpy(), max_pool(x, attrs))
    assert_close(nn.AvgPool2d(3, 2, pad_mode="same")(Tensor(x)).asnumpy(), avg_pool(x, attrs))
    assert nn.AvgPool2d(2, 2)(Tensor(x)).shape == (2, 3, 3, 3)
    assert_close(nn.AdaptiveAvgPool2d(1)(Tensor(x)).asnumpy(), x.mean(axis=(2, 3), keepdims=True))
    assert nn.Flatten()(Tensor(x)).shape == (2, 126)
    assert nn.Flatten(0, 1)(Tensor(x)).shape == (6, 7, 6)
    assert_close(nn.Pad(((0, 0), (0, 0), (1, 1), (2, 0)))(Tensor(x)).asnumpy(),
                 np.pad(x, ((0, 0), (0, 0), (1, 1), (2, 0))))


@pytest.mark.parametrize("make, match", [
    (lambda: nn.Conv2d(4, 6, 3, group=4), r"Conv2d: in_channels=4 and out_channels=6 must divide by group=4"),
    (lambda: nn.Conv2d(4, 6, 3, pad_mode="full"), r"pad_mode must be 'same', 'valid' or 'pad'"),
    (lambda: nn.Conv2d(4, 6, (3, 3, 3)), r"kernel_size must be an int or a pair of ints"),
    (lambda: nn.MaxPool2d(2, ceil_mode=True), r"MaxPool2d: ceil_mode=True is not supported"),
    (lambda: nn.MaxPool2d(2, pad_mode="pad"), r"MaxPool2d: pad_mode must be 'same' or 'valid'"),
    (lambda: nn.AvgPool2d(2, divisor_override=3), r"AvgPool2d: divisor_override=3 is not supported"),
    (lambda: nn.Pad(((1, 1),), mode="REFLECT"), r"Pad: mode='REFLECT' is not supported"),
])
def test_unsupported_or_bad_arguments_name_themselves(make, match):
    with pytest.raises(LayerError, match=match):
        make()


def test_conv2d_refuses_an_input_of_other_channels():
    with pytest.raises(LayerError, match=r"x \[1, 3, 5, 5\] must be \[N, 4, H, W\]"):
        nn.Conv2d(4, 6, 3)(Tensor(_x(1, 3, 5, 5)))


def test_loss_scale_managers_at_mindspore_top_level_paths():
    fixed = ms.FixedLossScaleManager(1024, drop_overflow_update=False)
    assert fixed.get_loss_scale() == 1024 and fixed.get_update_cell() is None
    dynamic = ms.DynamicLossScaleManager(2 ** 12, 2, 100)
    assert dynamic.get_loss_scale() == 2 ** 12 and dynamic.get_update_cell() is not None
