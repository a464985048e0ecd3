"""A BERT encoder layer built from nn cells with an MSE loss: the gradient of every parameter agrees between
the reference target and the device, fusion on and off, and matches float64 central finite differences
on a small configuration (hidden 64, 4 heads, seq 8)."""
import math

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import nn, ops
from tests.tolerance import assert_close

HIDDEN, HEADS, SEQ, BATCH = 64, 4, 8, 2


class SelfAttention(nn.Cell):
    def __init__(self, hidden, heads, dtype):
        super().__init__()
        self.heads, self.size = heads, hidden // heads
        self.query, self.key, self.value = (nn.Dense(hidden, hidden, dtype=dtype) for _ in range(3))
        self.dense = nn.Dense(hidden, hidden, dtype=dtype)
        self.scores = ops.BatchMatMul(transpose_b=True)
        self.context = ops.BatchMatMul()
        self.softmax = nn.Softmax()

    def split(self, x):
        b, s, _ = x.shape
        return ops.transpose(ops.reshape(x, (b, s, self.heads, self.size)), (0, 2, 1, 3))

    def construct(self, x, mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        probs = self.softmax(self.scores(q, k) * (1 / math.sqrt(self.size)) + mask)
        context = ops.transpose(self.context(probs, v), (0, 2, 1, 3))
        return self.dense(ops.reshape(context, x.shape))


class EncoderLayer(nn.Cell):
    def __init__(self, hidden=HIDDEN, heads=HEADS, dtype=ms.float32):
        super().__init__()
        self.attention = SelfAttention(hidden, heads, dtype)
        self.attention_norm = nn.LayerNorm((hidden,), epsilon=1e-12, dtype=dtype)
        self.intermediate = nn.Dense(hidden, 4 * hidden, activation="gelu", dtype=dtype)
        self.output = nn.Dense(4 * hidden, hidden, dtype=dtype)
        self.output_norm = nn.LayerNorm((hidden,), epsilon=1e-12, dtype=dtype)

    def construct(self, x, mask):
        h = self.attention_norm(self.attention(x, mask) + x)
        return self.output_norm(self.output(self.intermediate(h)) + h)


class WithMSE(nn.Cell):
    def __init__(self, layer):
        super().__init__()
        self.layer, self.loss = layer, nn.MSELoss()

    def construct(self, x, mask, target):
        return self.loss(self.layer(x, mask), target)


def inputs(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SEQ, HIDDEN)).astype(dtype)
    mask = np.zeros((BATCH, 1, 1, SEQ), dtype)
    mask[1, ..., SEQ - 2:] = -10000.0          # the second sequence is padded by two tokens
    target = rng.standard_normal((BATCH, SEQ, HIDDEN)).astype(dtype)
    return [ms.Tensor(a) for a in (x, mask, target)]


def gradients(net, data):
    loss, grads = ms.value_and_grad(net, None, net.trainable_params())(*data)
    return loss.asnumpy(), [g.asnumpy() for g in grads]


def test_parameter_names():
    net = WithMSE(EncoderLayer())
    names = [p.name for p in net.trainable_params()]
    assert names[:2] == ["layer.attention.query.weight", "layer.attention.query.bias"]
    assert "layer.attention_norm.gamma" in names and names[-1] == "layer.output_norm.beta"
    assert len(names) == 16


@pytest.mark.parametrize("mode", [ms.GRAPH_MODE, ms.PYNATIVE_MODE])
def test_gradients_agree_fused_unfused_and_reference(mode):
    ms.set_seed(3)
    net = WithMSE(EncoderLayer())
    data = inputs()
    results = {}
    for name, target, fuse in (("reference", "CPU", False), ("unfused", "Ascend", False), ("fused", "Ascend", True)):
        ms.set_context(mode=mode, device_target=target, enable_graph_kernel=fuse)
        results[name] = gradients(net, data)
    loss, grads = results["reference"]
    for name in ("unfused", "fused"):
        assert_close(results[name][0], loss, err_msg=name)
        for p, got, want in zip(net.trainable_params(), results[name][1], grads):
            assert_close(got, want, err_msg=f"{name} {p.name}")
    assert any(np.abs(g).max() > 1e-3 for g in grads)


def test_backward_kernels_fuse():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    net = WithMSE(EncoderLayer())
    step = ms.jit(lambda *a: ms.value_and_grad(net, None, net.trainable_params())(*a))
    data = inputs()
    fused = step.compile(*data)
    ms.set_context(enable_graph_kernel=False)
    unfused = step.compile(*data)
    count = lambda c, phase: sum(k.phase == phase for k in c.kernels)  # noqa: E731
    assert count(fused, "backward") < count(unfused, "backward") / 2
    assert count(fused, "forward") < count(unfused, "forward")


def test_gradients_match_float64_finite_differences():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(5)
    net = WithMSE(EncoderLayer(dtype=ms.float64))
    data = inputs(np.float64, seed=1)
    loss, grads = gradients(net, data)
    rng = np.random.default_rng(2)
    eps = 1e-6
    for p, g in zip(net.trainable_params(), grads):
        original = p.asnumpy().copy()
        for flat in rng.choice(original.size, size=min(3, original.size), replace=False):
            index = np.unravel_index(flat, original.shape)
            values = []
            for step in (eps, -eps):
                moved = original.copy()
                moved[index] += step
                p.set_data(moved)
                values.append(float(net(*data).asnumpy()))
            p.set_data(original)
            numeric = (values[0] - values[1]) / (2 * eps)
            assert abs(g[index] - numeric) <= 1e-6 * max(1.0, abs(numeric)), (p.name, index, g[index], numeric)


def test_the_onnx_bert_layer_is_differentiable():
    """The same layer exported as ONNX (graphkernel.onnx.examples) through graphkernel.onnx.load: the input's
    and every initializer's gradient, device fused against the reference."""
    import graphkernel.onnx
    from graphkernel.onnx.examples import bert_layer_inputs, bert_layer_model
    model = bert_layer_model(hidden=HIDDEN, heads=HEADS, seq=SEQ, batch=BATCH)
    cell = graphkernel.onnx.load(model)
    feeds = bert_layer_inputs(model)
    weights = ms.Tensor(np.random.default_rng(0).standard_normal((BATCH, SEQ, HIDDEN)).astype(np.float32))
    params = cell.get_parameters()
    grad_fn = ms.grad(lambda x, mask: ops.ReduceSum()(cell(x, mask) * weights), 0, params)
    results = []
    for target, fuse in (("CPU", False), ("Ascend", True)):
        ms.set_context(mode=ms.GRAPH_MODE, device_target=target, enable_graph_kernel=fuse)
        dx, dparams = grad_fn(ms.Tensor(feeds["x"]), ms.Tensor(feeds["mask"]))
        results.append([dx.asnumpy()] + [g.asnumpy() for g in dparams])
    assert len(results[0]) == len(params) + 1 and np.abs(results[0][0]).max() > 1e-2
    for got, want in zip(*reversed(results)):
        assert_close(got, want)
