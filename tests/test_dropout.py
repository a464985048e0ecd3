"""Dropout: a counter-based mask (Philox4x32-10), the same bits on the reference and the device, fused and
unfused; reproducible from set_seed; its gradient regenerates the same mask; the offset advances per call."""
import ml_dtypes
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, context, nn, ops
from graphkernel.cell import Cell
from graphkernel.ops.dropout import GENERATOR_OFFSET, DropoutError
from ir.ops.random import dropout_reference, philox_uniform


def test_philox_known_answer():
    # Philox4x32-10 of counter 0 and key 0: first word 0x6627e8d5 (the generator's published test vector)
    assert philox_uniform(np.uint64(0), np.uint64(0), np.uint64(0), np.uint64(0)) == 0x6627e8 / 2 ** 24


def test_keep_fraction_and_scale():
    x = np.ones(1 << 16, np.float32)
    y = dropout_reference([x, np.array([3], np.int32)], {"keep_prob": 0.9, "seed": 5, "op_id": 11})
    kept = y != 0
    assert abs(kept.mean() - 0.9) < 0.01
    assert np.all(y[kept] == np.float32(1 / 0.9))


class Drop(Cell):
    def __init__(self, p=0.25):
        super().__init__()
        self.dropout = nn.Dropout(p=p)

    def construct(self, x):
        return self.dropout(x) * 2.0


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_same_bits_on_every_target(dtype):
    x = Tensor(np.random.default_rng(0).standard_normal((16, 33)).astype(dtype))
    outs = []
    for target, fuse in (("CPU", False), ("Ascend", False), ("Ascend", True)):
        context.set_context(device_target=target, enable_graph_kernel=fuse)
        ms.set_seed(3)
        cell = Drop().set_train()
        outs.append([cell(x).asnumpy() for _ in range(2)])
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(outs[0][0], outs[0][1]), "each call draws a new mask"


def test_reproducible_from_set_seed_and_seed_in_compile_key():
    x = Tensor(np.ones((8, 8), np.float32))
    cell = Drop().set_train()
    ms.set_seed(1)
    first = [cell(x).asnumpy() for _ in range(3)]
    ms.set_seed(1)
    again = [cell(x).asnumpy() for _ in range(3)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    ms.set_seed(2)
    assert not np.array_equal(cell(x).asnumpy(), first[0])
    assert cell.trace_count == 2


def test_eval_mode_is_identity_and_p_checked():
    x = Tensor(np.ones((4, 4), np.float32))
    np.testing.assert_array_equal(Drop().set_train(False)(x).asnumpy(), 2 * np.ones((4, 4)))
    with pytest.raises(DropoutError, match="p must be"):
        ops.dropout(x, p=1.0)
    with pytest.raises(nn.LayerError):
        nn.Dropout(p=-0.1)


def test_gradient_regenerates_the_mask(setting):
    drop = nn.Dropout(p=0.5).set_train()
    x = Tensor(np.random.default_rng(1).standard_normal((6, 10)).astype(np.float32))

    def f(v):
        y = drop(v)
        return ops.ReduceSum()(y * y, ()), y
    ms.set_seed(7)
    (loss, y), dx = ms.value_and_grad(f, 0, has_aux=True)(x)
    y = y[0].asnumpy() if isinstance(y, tuple) else y.asnumpy()
    # d/dx sum((m x / k)^2) = 2 (m / k)^2 x = 2 y m / k: zero exactly where y's mask dropped
    expect = np.where(y != 0, 2 * y * 2.0, 0.0)
    np.testing.assert_allclose(dx.asnumpy(), expect, rtol=1e-6)


def test_one_offset_per_step_and_forward_traced_twice_shares_the_mask():
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.Dropout(p=0.5), nn.Dense(16, 2)])
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.0))
    step.set_train()
    x, y = Tensor(np.ones((4, 8), np.float32)), Tensor(np.zeros((4, 2), np.float32))
    start = int(GENERATOR_OFFSET.asnumpy()[0])
    step(x, y)
    step(x, y)
    assert int(GENERATOR_OFFSET.asnumpy()[0]) == start + 2
    graph = step.compile(x, y).graph
    forward = [n for n in graph.nodes if n.op == "Dropout" and not n.name.startswith("Gradients/")]
    assert len(forward) == 1, "the loss and its gradient see one forward dropout (one mask)"
