"""Dynamic shapes: one compile for every shape that fits a declaration (docs/shapes.md).

Cell.set_inputs (MindSpore 2.x), jit(dynamic=1) and enable_dynamic, ONNX dim_params (tests/test_onnx_models.py)
and seed 004's session options (tests/test_dynamic_session.py) declare them; here: results against the numpy
reference at several sizes per compile (1, odd, large), fused == unfused at each, the launch choices and
buffers made per call, gradients through a dynamic axis against float64 finite differences, training at
varying shapes against static compiles, and every error.
"""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, context, nn, ops
from graphkernel.ops import operations as P
from graphkernel.ops import functional as F
from graphkernel.tracing.dynamic import InputDTypeError, InputShapeError
from graphkernel.tracing.arguments import ArgumentError
from graphkernel.cell import CellCallError
from graphkernel.tensor import TensorShapeError
from graphkernel.settings.dynamic_shapes import DynamicShapeSettingError
from graphkernel.tracing.dynamic_jit import DynamicShapeTypeError
from ir import parse_graph, print_graph
from ir.symbolic import Dim
from ir.errors import GraphKernelError
from tests.tolerance import assert_close

F32 = ms.float32


@pytest.fixture
def ascend():
    context.set_context(device_target="Ascend")


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


class Blocks(nn.Cell):
    """A reduction over the dynamic axis, one along it, a broadcast of two dynamic dims, a Reshape
    with a dynamic dim, a MatMul with a dynamic M and an elementwise chain (fused == unfused bitwise)."""

    def __init__(self):
        super().__init__()
        self.w = ms.Parameter(Tensor(np.linspace(-1, 1, 48, dtype=np.float32).reshape(8, 6)), name="w")

    def construct(self, x, col):
        chain = (x * 2.0 - 0.5) * x                            # [n, 8]
        mean0 = P.ReduceMean(keep_dims=True)(x, 0)             # over the dynamic axis: [1, 8]
        soft = P.Softmax()(x * 0.5)                            # along it, per row
        outer = col + P.Reshape()(P.ReduceSum()(x, 1), (1, -1))   # [n, 1] + [1, n]: [n, n]
        n = F.shape(x)[0]
        pairs = P.Reshape()(x, (n * 2, 4))                     # a dynamic dim in the target shape
        mm = ops.matmul(x, self.w)                             # M dynamic
        return chain, x - mean0, soft, outer, pairs, mm


def _blocks_reference(x, col, w):
    return [(x * 2 - 0.5) * x, x - x.mean(0, keepdims=True), _softmax(x * 0.5),
            col + x.sum(1).reshape(1, -1), x.reshape(-1, 4), x @ w]


@pytest.mark.parametrize("fusion", [True, False])
def test_one_compile_serves_every_fitting_shape(ascend, fusion):
    context.set_context(enable_graph_kernel=fusion)
    net = Blocks()
    net.set_inputs(Tensor(shape=[None, 8], dtype=F32), Tensor(shape=[None, 1], dtype=F32))
    compiled = set()
    rng = np.random.default_rng(0)
    for n in (5, 1, 7, 300, 5):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        col = rng.standard_normal((n, 1)).astype(np.float32)
        outs = net(Tensor(x), Tensor(col))
        for got, want in zip(outs, _blocks_reference(x, col, net.w.asnumpy())):
            assert got.shape == want.shape
            assert_close(got.asnumpy(), want, rtol_scale=4)
        compiled.add(id(net.compile(Tensor(x), Tensor(col))))
    assert net.trace_count == 1 and len(compiled) == 1


def test_fused_equals_unfused_at_every_shape(ascend):
    """The float32 elementwise chain bit for bit, the rest within the dtype's tolerance (sums may order
    their lanes differently), at each size of one compile each way."""
    got = {}
    for fusion in (True, False):
        context.set_context(enable_graph_kernel=fusion)
        net = Blocks()
        net.set_inputs(Tensor(shape=[None, 8], dtype=F32), Tensor(shape=[None, 1], dtype=F32))
        rng = np.random.default_rng(1)
        got[fusion] = []
        for n in (1, 9, 64):
            x = rng.standard_normal((n, 8)).astype(np.float32)
            col = rng.standard_normal((n, 1)).astype(np.float32)
            got[fusion].append([o.asnumpy() for o in net(Tensor(x), Tensor(col))])
    for fused, unfused in zip(got[True], got[False]):
        assert_close(fused[0], unfused[0], bitwise=True)
        for f, u in zip(fused[1:], unfused[1:]):
            assert_close(f, u)


class ShapeMath(nn.Cell):
    def construct(self, x):
        b, s = F.shape(x)
        total = P.ReduceSum()(x, 1) / s                     # a size as an operand: its value per call
        rows = F.tuple_to_array(F.make_range(b)) * s        # a range over a dynamic size
        flat = x.reshape(b * s)
        return total, rows, flat[:s], P.Size()(x) + 0 * total


def test_shape_python_is_symbolic_in_the_ir(ascend):
    net = ShapeMath()
    net.set_inputs(Tensor(shape=[None, None], dtype=F32))
    for b, s in ((2, 3), (4, 1), (3, 7)):
        x = np.arange(b * s, dtype=np.float32).reshape(b, s)
        total, rows, first, size = net(Tensor(x))
        assert_close(total.asnumpy(), x.sum(1) / s)
        assert rows.asnumpy().tolist() == [k * s for k in range(b)]
        assert_close(first.asnumpy(), x.reshape(-1)[:s], bitwise=True)
        assert_close(size.asnumpy(), np.full(b, b * s, np.float32), bitwise=True)
    assert net.trace_count == 1
    compiled = net.compile(Tensor(np.ones((2, 3), np.float32)))
    text = print_graph(compiled.stages["validate"])
    assert "symbols(s0=2, s1=3)" in text and "SizeValue" in text and "SizeRange" in text
    assert "f32[s0,s1]" in text and "shape=[s0*s1]" in text
    assert parse_graph(text) == compiled.stages["validate"]
    final = print_graph(compiled.graph)
    assert parse_graph(final) == compiled.graph


def test_the_ir_dumps_show_symbolic_sizes(tmp_path):
    context.set_context(device_target="CPU", save_graphs=True, save_graphs_path=str(tmp_path),
                        graph_kernel_flags="--dump_as_text", enable_graph_kernel=True)
    net = ShapeMath()
    net.set_inputs(Tensor(shape=[None, None], dtype=F32))
    net(Tensor(np.ones((2, 3), np.float32)))
    ir_files = [f for f in tmp_path.glob("*.ir") if not f.name.startswith("fusion_log")]
    assert ir_files and all(f.read_text().startswith("graph symbols(s0=2, s1=3) (") for f in ir_files)
    assert any("f32[s0,s1]" in f.read_text() for f in tmp_path.glob("*.dot"))


class MulAddExp(nn.Cell):
    def construct(self, x, y):
        return P.Exp()(P.Add()(P.Mul()(x, y), 1.0))


@pytest.mark.parametrize("target", ["CPU", "Ascend"])
def test_a_profiled_call_shows_each_launch_at_its_own_shape(tmp_path, target):
    """An observed run of a graph of symbolic sizes (a Profiler, a data dump) shows every launch with
    its types at the call's sizes, on the device and on the reference."""
    context.set_context(device_target=target)
    net = MulAddExp()
    net.set_inputs(Tensor(shape=[None, 5], dtype=F32), Tensor(shape=[None, 5], dtype=F32))
    net(Tensor(np.ones((2, 5), np.float32)), Tensor(np.ones((2, 5), np.float32)))   # compiled at n=2
    prof = ms.Profiler(output_path=str(tmp_path))
    try:
        for n in (3, 7):
            x, y = np.full((n, 5), 0.5, np.float32), np.full((n, 5), 2.0, np.float32)
            out = net(Tensor(x), Tensor(y))
            assert_close(out.asnumpy(), np.exp(x * y + 1))
        seen = [(la.name, tuple(tuple(t.shape) for t in la.inputs)) for _, _, la, _, _ in prof._launches]
    finally:
        rows = prof.analyse(print_table=False)
    assert net.trace_count == 1
    assert {shapes[0] for _, shapes in seen} == {(3, 5), (7, 5)}   # each launch at its call's shape
    assert not any(isinstance(d, Dim) for _, shapes in seen for s in shapes for d in s)
    assert rows and all(int(r["calls"]) == 2 for r in rows)


def test_a_call_that_does_not_fit_names_input_declared_and_given_shape():
    context.set_context(device_target="CPU")
    net = Blocks()
    net.set_inputs(Tensor(shape=[None, 8], dtype=F32), Tensor(shape=[None, 1], dtype=F32))
    good = Tensor(np.ones((3, 1), np.float32))
    with pytest.raises(InputShapeError, match=r"input 0 \(x\): declared float32\[None, 8\] by set_inputs, given "
                                              r"float32\[3, 9\]: dim 1 is 9, declared 8"):
        net(Tensor(np.ones((3, 9), np.float32)), good)
    with pytest.raises(InputShapeError, match=r"input 0 \(x\).*given float32\[3\]: rank 1, declared rank 2"):
        net(Tensor(np.ones(3, np.float32)), good)
    with pytest.raises(InputDTypeError, match=r"input 1 \(col\).*given float16\[3, 1\]: the dtype differs"):
        net(Tensor(np.ones((3, 8), np.float32)), Tensor(np.ones((3, 1), np.float16)))
    with pytest.raises(ArgumentError, match="holds no data"):
        net(Tensor(shape=[None, 8], dtype=F32), good)


def test_set_inputs_checks_as_mindspore_does():
    net = Blocks()
    with pytest.raises(CellCallError, match="takes 2 argument.*set_inputs got 1"):
        net.set_inputs(Tensor(shape=[None, 8], dtype=F32))
    with pytest.raises(CellCallError, match="in order or by name, not both"):
        net.set_inputs(Tensor(shape=[None, 8], dtype=F32), col=Tensor(shape=[None, 1], dtype=F32))
    with pytest.raises(CellCallError, match="no argument 'z'.*x, col"):
        net.set_inputs(z=Tensor(shape=[None, 8], dtype=F32))
    with pytest.raises(TensorShapeError, match="needs its dtype"):
        Tensor(shape=[None, 8])
    with pytest.raises(TensorShapeError, match="takes its data's shape"):
        Tensor(np.ones(3), shape=[None])
    with pytest.raises(TensorShapeError, match="dim -3"):
        Tensor(shape=[-3, 2], dtype=F32)
    declared = Tensor(shape=[None, 8], dtype=F32)
    assert declared.shape == (-1, 8) and Tensor(shape=None, dtype=F32).shape == (-2,)
    with pytest.raises(TensorShapeError, match="holds no data"):
        declared.asnumpy()
    assert Tensor(shape=(2, 3), dtype=F32).asnumpy().tolist() == [[0.0] * 3] * 2   # static: zeros
    net.set_inputs(col=Tensor(shape=[None, 1], dtype=F32))   # by name: x stays as called
    assert isinstance(net.get_inputs(), dict) and list(net.get_inputs()) == ["col"]


def test_an_any_rank_declaration_compiles_once_per_rank():
    context.set_context(device_target="CPU")

    class Scale(nn.Cell):
        def construct(self, x):
            return P.ReduceSum()(x * 3.0, -1)

    net = Scale()
    net.set_inputs(Tensor(shape=None, dtype=F32))
    for shape in [(4,), (2, 5), (3, 5), (2, 2, 3), (1, 1)]:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        assert_close(net(Tensor(x)).asnumpy(), (x * 3).sum(-1))
    assert net.trace_count == 3


def test_a_size_relation_the_compile_assumed_is_checked_at_each_new_shape(ascend):
    """Two declared dims that meet in a broadcast are assumed equal (their first sizes were): a later
    call where they differ is an error naming the relation, not a wrong result."""
    class Add(nn.Cell):
        def construct(self, x, y):
            return x + y

    net = Add()
    net.set_inputs(Tensor(shape=[None], dtype=F32), Tensor(shape=[None], dtype=F32))
    two = np.float32(2)
    assert_close(net(Tensor(np.ones(3, np.float32)), Tensor(np.ones(3, np.float32))).asnumpy(), np.full(3, two))
    assert_close(net(Tensor(np.ones(5, np.float32)), Tensor(np.ones(5, np.float32))).asnumpy(), np.full(5, two))
    with pytest.raises(GraphKernelError, match=r"s0 == s1 \(broadcasting.*here 5 vs 4"):
        net(Tensor(np.ones(5, np.float32)), Tensor(np.ones(4, np.float32)))
    assert net.trace_count == 1


def test_launch_choices_and_buffers_are_made_per_call(ascend):
    """A reduction over a dynamic row: short rows reduce by rows, a long row splits (kernels/plan.py
    chooses per shape); a repeated shape reuses its plan, a smaller one the arena of a larger."""
    class RowSum(nn.Cell):
        def construct(self, x):
            return P.ReduceSum(keep_dims=True)(x * x, 1)

    net = RowSum()
    net.set_inputs(Tensor(shape=[2, None], dtype=F32))
    program = None
    variants = {}
    for n in (40, 2 * 16 * 1024 + 7, 3):   # kernels.aicore.REDUCE_CHUNK_ELEMENTS: a row of two chunks splits
        x = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
        assert_close(net(Tensor(x)).asnumpy(), (x * x).sum(1, keepdims=True))
        program = net.compile(Tensor(x)).program
        variants[n] = {k.variant for k in program.planner.plan_for([x]).kernels}
    assert "split" in variants[2 * 16 * 1024 + 7] and "split" not in variants[40]
    x = np.ones((2, 40), np.float32)
    assert program.planner.plan_for([x]) is program.planner.plan_for([x.copy()])
    arena = program._local.raw
    net(Tensor(np.ones((2, 7), np.float32)))
    assert program._local.raw is arena     # the largest plan's arena serves the smaller one


def test_compile_decides_once_on_the_representative_size(ascend):
    """Passes and the kernel table see the first call's sizes; later calls run the same kernels."""
    net = Blocks()
    net.set_inputs(Tensor(shape=[None, 8], dtype=F32), Tensor(shape=[None, 1], dtype=F32))
    args = (Tensor(np.ones((6, 8), np.float32)), Tensor(np.ones((6, 1), np.float32)))
    compiled = net.compile(*args)
    assert any(t.shape == (6, 8) for k in compiled.kernels for t in k.inputs)
    other = compiled.program.planner.plan_for([np.ones((9, 8), np.float32), np.ones((9, 1), np.float32),
                                               net.w.asnumpy()])
    assert [k.kernel for k in other.kernels] == [k.kernel for k in compiled.kernels]
    assert any(t.shape == (9, 8) for k in other.kernels for t in k.inputs)


# --- gradients and training ------------------------------------------------------------------------

class Loss(nn.Cell):
    def construct(self, x, w):
        h = P.Softmax()(x * w)                               # along the dynamic axis (rows of x.T)
        return P.ReduceSum()(P.ReduceMean()(h * x, 0) * w)   # a mean over the dynamic axis


@pytest.mark.parametrize("target", ["CPU", "Ascend"])
def test_gradients_through_a_dynamic_axis_match_finite_differences(target):
    context.set_context(device_target=target)
    grad = ms.jit(ms.grad(Loss(), grad_position=(0, 1)))

    @ms.enable_dynamic(x=Tensor(shape=[None, 4], dtype=ms.float64))
    def wrapped(x, w):
        return grad(x, w)
    fn = ms.jit(wrapped)

    def loss(x, w):
        h = _softmax(x * w, -1)
        return float(((h * x).mean(0) * w).sum())

    compiled = set()
    for n in (1, 3, 6):
        rng = np.random.default_rng(n)
        x, w = rng.standard_normal((n, 4)), rng.standard_normal(4)
        gx, gw = fn(Tensor(x), Tensor(w))
        eps = 1e-6
        for got, arr, k in ((gx, x, 0), (gw, w, 1)):
            want = np.zeros_like(arr)
            for i in np.ndindex(arr.shape):
                up, down = arr.copy(), arr.copy()
                up[i] += eps
                down[i] -= eps
                args_up = (up, w) if k == 0 else (x, up)
                args_down = (down, w) if k == 0 else (x, down)
                want[i] = (loss(*args_up) - loss(*args_down)) / (2 * eps)
            np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, atol=1e-8)
        compiled.add(id(fn.compile(Tensor(x), Tensor(w))))
    assert len(compiled) == 1


class Tagger(nn.Cell):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.dense = nn.Dense(16, 16)
        self.ln = nn.LayerNorm((16,))
        self.out = nn.Dense(16, 5)

    def construct(self, ids, mask):
        h = self.emb(ids)                                      # [b, s, 16]
        b, s = P.Shape()(ids)
        h = P.Reshape()(self.ln(ops.gelu(self.dense(P.Reshape()(h, (-1, 16))))), (b, s, 16))
        scores = P.BatchMatMul(transpose_b=True)(h, h) * 0.25 + P.Reshape()(mask, (b, 1, s)) * -1000.0
        ctx = P.BatchMatMul()(P.Softmax()(scores), h)
        return self.out(P.ReduceMean()(ctx, 1))


class TaggerLoss(nn.Cell):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def construct(self, ids, mask, label):
        return self.ce(self.net(ids, mask), label)


def _train(shapes, dynamic: bool):
    ms.set_seed(0)
    net = Tagger()
    step = nn.TrainOneStepCell(TaggerLoss(net), nn.Momentum(net.trainable_params(), 0.1, 0.9))
    if dynamic:
        step.set_inputs(Tensor(shape=[None, None], dtype=ms.int32), Tensor(shape=[None, None], dtype=F32),
                        Tensor(shape=[None], dtype=ms.int32))
    rng = np.random.default_rng(1)
    losses = []
    for b, s in shapes:
        ids = Tensor(rng.integers(0, 50, (b, s)).astype(np.int32))
        mask = Tensor((rng.random((b, s)) < 0.2).astype(np.float32))
        label = Tensor(rng.integers(0, 5, (b,)).astype(np.int32))
        losses.append(float(step(ids, mask, label).asnumpy()))
    return losses, step.trace_count


@pytest.mark.parametrize("target", ["CPU", pytest.param("Ascend", marks=pytest.mark.slow)])
def test_training_over_varying_shapes_matches_static_compiles(target):
    """Sequence length changing every step and a smaller last batch: one compile, the losses of a
    static compile per shape within 1e-6 relative (on the emulated device, fused: a slow test; its
    twin on the numpy reference runs by default)."""
    context.set_context(device_target=target, enable_graph_kernel=True)
    shapes = [(4, 8), (4, 13), (4, 32), (4, 5), (3, 11)]
    dynamic, traces = _train(shapes, True)
    static, static_traces = _train(shapes, False)
    assert traces == 1 and static_traces == len(shapes)
    np.testing.assert_allclose(dynamic, static, rtol=1e-6)
    assert dynamic[-1] < dynamic[0] * 2   # it trains


def test_model_declares_the_train_network_from_the_network_and_loss():
    """Model.train: the network's set_inputs and the loss's (without its first input) declare the train
    network's inputs, as MindSpore's Model merges them: one compile over the data set's shapes."""
    from graphkernel.train import Model
    context.set_context(device_target="CPU")

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(4, 3)

        def construct(self, x):
            return self.dense(x)

    net = Net()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    net.set_inputs(Tensor(shape=[None, 4], dtype=F32))
    loss.set_inputs(Tensor(shape=[None, 3], dtype=F32), Tensor(shape=[None], dtype=ms.int32))
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.1, 0.9))
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal((n, 4)).astype(np.float32), rng.integers(0, 3, n).astype(np.int32))
            for n in (8, 8, 5, 1)]
    model.train(1, data)
    assert model.train_network.trace_count == 1


def test_jit_dynamic_1_generalizes_the_dims_that_changed():
    context.set_context(device_target="CPU")

    @ms.jit(dynamic=1)
    def f(x, y):
        return ops.exp(x) * y + x.shape[0]

    y = Tensor(np.ones(3, np.float32))
    graphs = []
    for n in (2, 3, 4, 9):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        assert_close(f(Tensor(x), y).asnumpy(), np.exp(x) + n)
        graphs.append(id(f.compile(Tensor(x), y)))
    assert graphs[0] != graphs[1] and len(set(graphs[1:])) == 1   # static first, then one dynamic compile


def test_enable_dynamic_declares_by_name_and_checks_as_mindspore_does():
    context.set_context(device_target="CPU")

    @ms.enable_dynamic(y=Tensor(shape=None, dtype=F32))
    @ms.jit
    def g(x, y):
        return x + 1, y * 2

    graphs = set()
    for shape in [(2, 3), (4, 3), (5,)]:
        _, b = g(Tensor(np.ones(2, np.float32)), Tensor(np.ones(shape, np.float32)))
        assert b.shape == shape
        graphs.add(id(g.compile(Tensor(np.ones(2, np.float32)), Tensor(np.ones(shape, np.float32)))))
    assert len(graphs) == 2   # one per rank
    with pytest.raises(DynamicShapeSettingError, match="cannot be empty"):
        ms.enable_dynamic()
    with pytest.raises(DynamicShapeTypeError, match="at least one None"):
        ms.enable_dynamic(y=Tensor(shape=[2, 3], dtype=F32))
    with pytest.raises(DynamicShapeTypeError, match="must be a Tensor"):
        ms.enable_dynamic(y=3)
    with pytest.raises(DynamicShapeSettingError, match="no argument 'z'"):
        ms.enable_dynamic(z=Tensor(shape=None, dtype=F32))(g)
    with pytest.raises(DynamicShapeSettingError, match="decorates a function"):
        ms.enable_dynamic(z=Tensor(shape=None, dtype=F32))(3)
