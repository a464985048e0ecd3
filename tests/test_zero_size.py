"""Zero-size tensors run on every kernel variant (docs/kernels.md): no KernelBuildWarning (conftest makes
one an error), results equal to the numpy reference. A zero-row batch goes through a fused training
step (Momentum and AdamWeightDecay, with and without a loss-scale cell) as it does on the reference, and
a training step whose multi-tensor update holds a zero-size Parameter runs too."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Parameter, Tensor, context, nn
from graphkernel.ops import operations as P
from ir import GraphBuilder
from kernels import DeviceConfig, lower
from tests.kernel_graphs import fused, reference
from tests.test_atomic_step import _matrix, _train_cell
from tests.tolerance import assert_close


def _reduce_graph(shape, axes):
    """exp(x * 2 + 1), its sum over `axes` and its triple: one composite."""
    b = GraphBuilder()
    x = b.input(shape)
    y = b.op("Exp", b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0)))
    outs = [b.op("Mul", y, b.const(3.0))]
    if axes is not None:
        outs.append(b.op("ReduceSum", y, axis=axes, keep_dims=False))
    return fused(b.graph(*outs))


@pytest.mark.parametrize("shape,axes,variant", [
    ((0, 64), None, "elementwise"),
    ((64, 0), None, "elementwise"),
    ((0,), None, "elementwise"),
    ((0, 64), (1,), "rows"),       # no rows to reduce
    ((64, 0), (1,), "rows"),       # every row empty: sums of nothing
    ((0, 64), (0,), "columns"),    # columns over no rows: zeros
    ((0, 0, 64), (0, 1), "columns"),
    ((0, 40000), (1,), "split"),   # no rows of a long row's split
    ((2, 0, 40000), (2,), "split"),
], ids=str)
def test_every_kernel_variant_runs_on_zero_size_tensors(shape, axes, variant):
    graph = _reduce_graph(shape, axes)
    program = lower(graph, DeviceConfig())
    assert [k.variant for k in program.kernels] == [variant]
    x = np.zeros(shape, np.float32)
    for got, want in zip(program.run([x]), reference(graph, [x])):
        assert got.shape == want.shape
        assert_close(got, want)


def _batch(rows):
    rng = np.random.default_rng(0)
    return Tensor(rng.standard_normal((rows, 8)).astype(np.float32)), \
        Tensor(rng.standard_normal((rows, 4)).astype(np.float32))


def _step_on(target, fusion, optimizer, loss_scale):
    context.set_context(device_target=target, enable_graph_kernel=fusion)
    cell = _train_cell(optimizer, loss_scale)
    empty = cell(*_batch(0))
    after_empty = [p.asnumpy() for p in cell.get_parameters()]
    cell(*_batch(4))   # a real batch next: the step still trains
    return empty, after_empty, [p.asnumpy() for p in cell.get_parameters()]


@pytest.mark.parametrize("optimizer,fusion,loss_scale", _matrix({("momentum", True, False), ("adamw", True, True)}))
def test_a_zero_row_batch_trains_as_on_the_reference(optimizer, loss_scale, fusion):
    got = _step_on("Ascend", fusion, optimizer, loss_scale)
    want = _step_on("CPU", False, optimizer, loss_scale)
    loss = lambda out: (out[0] if isinstance(out, tuple) else out).asnumpy()   # noqa: E731
    assert np.isnan(loss(got[0])) and np.isnan(loss(want[0]))   # the mean of no elements, as numpy's
    for states_got, states_want in zip(got[1:], want[1:]):
        for a, b in zip(states_got, states_want):
            assert_close(a, b)


class WithEmpty(nn.Cell):
    """A Dense and a zero-size weight (8, 0) whose product with x (4, 0) sums to 0 in the output: its
    gradient comes from a MatMul as the Dense weight's does, and its update is one more tensor of their
    multi-tensor launch, with no elements."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(8, 4)
        self.empty = Parameter(np.zeros((8, 0), np.float32), name="empty")

    def construct(self, x):
        return self.dense(x) + P.ReduceSum(keep_dims=True)(P.MatMul()(x, self.empty), 1)


def test_a_zero_size_parameter_joins_the_multi_tensor_update():
    results = {}
    for target, fusion in (("Ascend", True), ("CPU", False)):
        context.set_context(device_target=target, enable_graph_kernel=fusion)
        ms.set_seed(0)
        net = nn.WithLossCell(WithEmpty(), nn.MSELoss())
        cell = nn.TrainOneStepCell(net, nn.Momentum(net.trainable_params(), 0.1, 0.9))
        for _ in range(2):
            cell(*_batch(4))
        results[target] = [p.asnumpy() for p in cell.get_parameters()]
        if target == "Ascend":
            launches = cell.compile(*_batch(4)).kernels
            assert any(k.variant == "multi_tensor" and any(t.size == 0 for t in k.inputs) for k in launches)
    for a, b in zip(results["Ascend"], results["CPU"]):
        assert a.shape == b.shape
        assert_close(a, b)
