"""Convolution epilogues (graphkernel/passes/conv_epilogue.py, kernels/conv.py conv_epilogue): the
elementwise kernel reading a Conv2D's result is computed by the conv's output pass. One kernel fewer per
chain, the conv's kernel naming its epilogue's ops, the same bits as the chain run as its own kernel
(float32 and float16) over every path of the conv kernel (im2col over several images: the GEMM result
in [O, N, P]; pointwise and one image: NCHW), a result read elsewhere too, and gradients through it."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, nn, ops
from graphkernel.compiler import compile_graph
from graphkernel.passes.conv_epilogue import conv_epilogue
from graphkernel.passes.fusion_utils import kernel_count
from graphkernel.settings.options import CompileOptions
from ir import GraphBuilder
from ir.dtypes import DType
from ir.graph import TensorType
from ir.interpret import interpret
from fusion_helpers import fusion_log, options
from tolerance import assert_close

OFF = "--disable_pass=composite.conv_epilogue"

GEOMETRIES = [   # x shape, weight shape, Conv2D attributes
    ((2, 3, 9, 7), (5, 3, 3, 3), dict(pad_mode="same")),                        # odd sizes, "same"
    ((2, 4, 9, 8), (6, 4, 3, 3), dict(pad_mode="same", stride=2)),              # stride 2, odd pixel
    ((2, 6, 7, 5), (6, 2, 3, 3), dict(pad_mode="same", group=3)),               # groups
    ((3, 4, 6, 5), (4, 1, 3, 3), dict(pad_mode="same", group=4, stride=2)),     # depthwise
    ((2, 8, 5, 7), (6, 8, 1, 1), {}),                                           # pointwise: NCHW products
    ((1, 3, 8, 9), (4, 3, 3, 3), dict(pad_mode="pad", pad=(1, 0, 2, 1))),       # one image
    ((2, 3, 15, 13), (7, 3, 7, 7), dict(pad_mode="same", stride=2)),            # a stem
]


def _bias_relu(b, y, o, dtype):
    bias = b.input((o,), dtype)
    return b.op("ReLU", b.op("BiasAdd", y, bias)), ["Add", "Maximum"]


def _bn(b, y, o, dtype):
    params = [b.input((o,), dtype) for _ in range(4)]
    return b.ops("BatchNorm", y, *params, is_training=False, epsilon=1e-5)[0]


def _bn_relu(b, y, o, dtype):
    return b.op("ReLU", _bn(b, y, o, dtype)), ["Mul", "Add", "Maximum"]


def _bn_add_relu(b, y, o, dtype):
    residual = b.input(y.shape, y.dtype)
    return b.op("ReLU", b.op("Add", _bn(b, y, o, dtype), residual)), ["Mul", "Add", "Add", "Maximum"]


def _bias_relu_cast(b, y, o, dtype):
    z, ops_ = _bias_relu(b, y, o, dtype)
    return b.op("Cast", z, dtype=DType.float16 if dtype == DType.float32 else DType.float32), ops_ + ["Cast"]


CHAINS = {"bias_relu": _bias_relu, "bn_relu": _bn_relu, "bn_add_relu": _bn_add_relu,
          "bias_relu_cast": _bias_relu_cast}


def _graph(x_shape, w_shape, attrs, chain, dtype, keep_conv=False):
    b = GraphBuilder(TensorType(x_shape, dtype), TensorType(w_shape, dtype))
    x, w = b.inputs
    y = b.op("Conv2D", x, w, out_channel=w_shape[0], kernel_size=w_shape[2:], **attrs)
    z, chain_ops = CHAINS[chain](b, y, w_shape[0], dtype)
    return b.graph(*((z, y) if keep_conv else (z,))), chain_ops


def _inputs(graph, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(v.shape).astype(v.dtype.np) for v in graph.inputs]
    for k in range(len(arrays)):   # BatchNorm's variance (input 6 when there is one) must be positive
        if k == 6 and arrays[k].ndim == 1:
            arrays[k] = np.abs(arrays[k]) + 0.5
    return arrays


def _compiled(graph, flags=None):
    opts = CompileOptions() if flags is None else options(flags)
    return compile_graph(graph, opts, eager=True)


def _conv_kernels(compiled):
    return [k for k in compiled.kernels if k.variant == "conv"]


@pytest.mark.parametrize("chain", sorted(CHAINS))
@pytest.mark.parametrize("x_shape, w_shape, attrs", GEOMETRIES, ids=[str(i) for i in range(len(GEOMETRIES))])
def test_float32_epilogue_is_one_kernel_with_the_chains_bits(x_shape, w_shape, attrs, chain):
    graph, chain_ops = _graph(x_shape, w_shape, attrs, chain, DType.float32)
    fused, apart, unfused = _compiled(graph, ""), _compiled(graph, OFF), _compiled(graph)
    assert len(fused.kernels) == len(apart.kernels) - 1
    (conv,) = _conv_kernels(fused)
    assert conv.op_types[0] == "Conv2D" and conv.name.startswith("Fused_Conv2D_")
    assert set(chain_ops) <= set(conv.op_types[1:])
    assert conv.kernel and conv.source                      # the generated epilogue it runs
    assert [k.op_types for k in _conv_kernels(apart)] == [("Conv2D",)]
    arrays = _inputs(graph)
    got = fused.run_arrays(arrays)[0]
    assert_close(got, apart.run_arrays(arrays)[0], bitwise=True)
    assert_close(got, unfused.run_arrays(arrays)[0], bitwise=True)
    assert_close(got, interpret(graph, arrays)[0])


@pytest.mark.parametrize("chain", ["bias_relu", "bn_add_relu", "bias_relu_cast"])
@pytest.mark.parametrize("x_shape, w_shape, attrs", [GEOMETRIES[k] for k in (0, 2, 4)], ids=["same", "groups", "1x1"])
def test_float16_epilogue_matches_the_reference(x_shape, w_shape, attrs, chain):
    graph, _ = _graph(x_shape, w_shape, attrs, chain, DType.float16)
    fused, apart = _compiled(graph, ""), _compiled(graph, OFF)
    assert len(fused.kernels) == len(apart.kernels) - 1
    arrays = _inputs(graph, seed=1)
    got = fused.run_arrays(arrays)[0]
    assert_close(got, apart.run_arrays(arrays)[0], bitwise=True)   # the float16 conv result, rounded once
    assert_close(got, interpret(graph, arrays)[0])


@pytest.mark.parametrize("x_shape, w_shape, attrs", [GEOMETRIES[k] for k in (1, 4)], ids=["im2col", "1x1"])
def test_a_conv_result_read_elsewhere_is_written_by_the_same_pass(x_shape, w_shape, attrs):
    graph, _ = _graph(x_shape, w_shape, attrs, "bias_relu", DType.float32, keep_conv=True)
    fused, apart = _compiled(graph, ""), _compiled(graph, OFF)
    (conv,) = _conv_kernels(fused)
    assert conv.op_types == ("Conv2D", "Add", "Maximum") and len(conv.outputs) == 2
    assert len(fused.kernels) == len(apart.kernels) - 1
    arrays = _inputs(graph)
    for got, want, ref in zip(fused.run_arrays(arrays), apart.run_arrays(arrays), interpret(graph, arrays)):
        assert_close(got, want, bitwise=True)
        assert_close(got, ref)


@pytest.mark.parametrize("flags, reason", [
    ("", "the reader computes a reduction"),                                  # mean and normalize: one kernel
    ("--disable_cluster_ops=ReduceSum", "merging would create a cycle")])    # the mean a kernel of its own
def test_a_reader_that_needs_the_convs_statistics_is_refused(flags, reason):
    """BatchNorm in training normalizes y with statistics reduced from y: no epilogue."""
    b = GraphBuilder(TensorType((2, 3, 6, 6), DType.float32), TensorType((4, 3, 3, 3), DType.float32))
    x, w = b.inputs
    y = b.op("Conv2D", x, w, out_channel=4, kernel_size=(3, 3), pad_mode="same")
    mean = b.op("ReduceMean", y, axis=(0, 2, 3), keep_dims=True)
    graph = b.graph(b.op("ReLU", b.op("Sub", y, mean)))
    fused = _compiled(graph, flags)
    assert [k.op_types for k in _conv_kernels(fused)] == [("Conv2D",)]
    refusals = [r.reason for r in fused.log if r.reason.startswith("conv epilogue: ") and not r.accepted]
    assert any(reason in r for r in refusals), refusals
    arrays = _inputs(graph)
    assert_close(fused.run_arrays(arrays)[0], interpret(graph, arrays)[0])


def test_one_pixel_per_image_stays_apart():
    """[O, N] has no contiguous rows of pixels to read: kernels.conv.epilogue_reason refuses it."""
    graph, _ = _graph((2, 4, 3, 3), (5, 4, 3, 3), {}, "bias_relu", DType.float32)
    fused = _compiled(graph, "")
    assert [k.op_types for k in _conv_kernels(fused)] == [("Conv2D",)]
    assert any("one pixel per image" in r.reason for r in fused.log), [r.reason for r in fused.log]
    arrays = _inputs(graph)
    assert_close(fused.run_arrays(arrays)[0], interpret(graph, arrays)[0], bitwise=True)


def test_the_pass_logs_its_decision_and_names_the_composite():
    b = GraphBuilder(TensorType((2, 3, 6, 5), DType.float32), TensorType((4, 3, 3, 3), DType.float32))
    x, w = b.inputs
    y = b.op("Conv2D", x, w, out_channel=4, kernel_size=(3, 3), pad_mode="same")
    graph = b.graph(b.op("Maximum", b.op("Add", y, b.input((1, 4, 1, 1))), b.const(0.0)))
    fused = conv_epilogue(graph, options(""))   # on primitives: the reader is the Add alone
    (record,) = [r for r in fusion_log() if r.reason.startswith("conv epilogue: ")]
    assert record.accepted and record.candidates == ("Conv2D", "Add")
    assert record.composites == ("Fused_Conv2D_Add_0",) and "saved_us" in record.figures
    assert kernel_count(fused) == kernel_count(graph) - 1
    arrays = _inputs(graph)
    assert_close(interpret(fused, arrays)[0], interpret(graph, arrays)[0], bitwise=True)


class Net(nn.Cell):
    """conv + bias + ReLU, then conv + bias + the residual Add + ReLU, then a mean: trained."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        w = lambda *s: Tensor((rng.standard_normal(s) * 0.3).astype(np.float32))  # noqa: E731
        self.conv1 = nn.Conv2d(4, 4, 3, has_bias=True, weight_init=w(4, 4, 3, 3), bias_init=w(4))
        self.conv2 = nn.Conv2d(4, 4, 3, has_bias=True, weight_init=w(4, 4, 3, 3), bias_init=w(4))
        self.relu = nn.ReLU()
        self.mean = ops.ReduceMean()

    def construct(self, x):
        out = self.relu(self.conv1(x))
        return self.mean(self.relu(self.conv2(out) + x) ** 2)


class Grads(nn.Cell):
    def __init__(self, net):
        super().__init__()
        self.net, self.grad = net, ops.GradOperation(get_by_list=True)
        self.weights = net.trainable_params()

    def construct(self, x):
        return (self.net(x),) + tuple(self.grad(self.net, self.weights)(x))


def test_gradients_through_fused_epilogues_match_the_reference():
    x = Tensor(np.random.default_rng(2).standard_normal((2, 4, 7, 6)).astype(np.float32))
    results = {}
    for name, target, fused in (("reference", "CPU", False), ("fused", "Ascend", True)):
        ms.set_context(mode=ms.GRAPH_MODE, device_target=target, enable_graph_kernel=fused)
        grads = Grads(Net())
        results[name] = [g.asnumpy() for g in grads(x)]
        if fused:
            epilogues = [k.op_types for k in _conv_kernels(grads.compile(x)) if k.op_types[0] == "Conv2D"]
            # conv1's bias, ReLU and the backward's ReLU mask; conv2's reader holds the loss's reduction
            assert ("Conv2D", "Add", "Maximum", "Greater") in epilogues, epilogues
    for got, want in zip(results["fused"], results["reference"]):
        assert_close(got, want)
