"""The convolution and pooling rows (ir/ops/conv.py, ir/ops/pool.py) against MindSpore 2.10's own results
(tests/data/mindspore_conv.npz, recorded by bench/mindspore_conv_cases.py on its CPU), their float16
arithmetic, and the primitives' MindSpore signatures. The sample calls, bad attributes and gradients are
in tests/op_cases.py and tests/grad_samples.py with every other row."""
import json
import os

import numpy as np
import pytest

from graphkernel import Tensor, context
from graphkernel.ops import operations as P
from graphkernel.ops.operations import _grad_ops as G
from ir import GraphBuilder
from ir.dtypes import DType
from ir.graph import TensorType
from ir.interpret import interpret
from ir.ops.conv import same_pads
from tolerance import assert_close

DATA = np.load(os.path.join(os.path.dirname(__file__), "data", "mindspore_conv.npz"))
IDS = sorted({k.split("/")[0] for k in DATA.files})


def _run(op, arrays, attrs):
    b = GraphBuilder(*[TensorType(a.shape, DType(a.dtype.name)) for a in arrays])
    return interpret(b.graph(b.op(op, *b.inputs, **attrs)), arrays)[0]


@pytest.mark.parametrize("cid", IDS)
def test_reference_equals_mindspore(cid):
    spec = json.loads(str(DATA[f"{cid}/spec"]))
    arrays = [DATA[f"{cid}/in{k}"] for k in range(3) if f"{cid}/in{k}" in DATA.files]
    attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in spec["attrs"].items()}
    assert_close(_run(spec["op"], arrays, attrs), DATA[f"{cid}/out"], err_msg=cid)


def test_same_padding_puts_the_odd_pixel_after():
    assert same_pads(5, 2, 1) == (0, 1)       # MindSpore: conv 'same' 2x2 over 5: top 0, bottom 1
    assert same_pads(224, 7, 2) == (2, 3)
    assert same_pads(7, 3, 2, dilation=2) == (2, 2)   # 3 outputs need 4 more pixels
    assert same_pads(8, 1, 4) == (0, 0)


def test_float16_accumulates_in_float32_and_rounds_once():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.9, 1.1, (1, 64, 4, 4)).astype(np.float16)
    w = rng.uniform(0.9, 1.1, (2, 64, 3, 3)).astype(np.float16)
    got = _run("Conv2D", [x, w], dict(out_channel=2, kernel_size=3, pad_mode="same"))
    want = _run("Conv2D", [x.astype(np.float32), w.astype(np.float32)],
                dict(out_channel=2, kernel_size=3, pad_mode="same")).astype(np.float16)
    assert got.dtype == np.float16
    assert_close(got, want, bitwise=True)     # one rounding of the float32 sum of 576 products


def test_primitives_take_mindspore_signatures():
    context.set_context(mode=context.PYNATIVE_MODE, device_target="CPU")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    conv = P.Conv2D(4, 3, pad_mode="same", stride=2)
    y = conv(Tensor(x), Tensor(w))
    assert y.shape == (2, 4, 4, 3)
    d = np.ones(y.shape, np.float32)
    dx = P.Conv2DBackpropInput(4, 3, pad_mode="same", stride=2)(Tensor(d), Tensor(w), x.shape)
    dw = G.Conv2DBackpropFilter(4, 3, pad_mode="same", stride=(1, 1, 2, 2))(Tensor(d), Tensor(x), w.shape)
    assert dx.shape == x.shape and dw.shape == w.shape
    pooled = P.MaxPool(kernel_size=3, strides=2, pad_mode="SAME")(Tensor(x))
    dp = G.MaxPoolGrad(kernel_size=3, strides=2, pad_mode="SAME")(Tensor(x), pooled, pooled)
    assert dp.shape == x.shape
    assert P.AvgPool(2, 2)(Tensor(x)).shape == (2, 3, 3, 3)
    assert P.AdaptiveAvgPool2D((None, 2))(Tensor(x)).shape == (2, 3, 7, 2)
    assert P.Flatten()(Tensor(x)).shape == (2, 126)
    assert P.Pad(((0, 0), (0, 0), (1, 1), (2, 0)))(Tensor(x)).shape == (2, 3, 9, 8)
