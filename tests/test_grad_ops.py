"""The composite gradient ops (ir/ops/grad_ops.py): each expansion equals its reference (float32 and
float16 and bfloat16), the fused kernels equal the reference on the device at several shapes and core counts, the
kernel counts the backward relies on hold, and UnsortedSegmentSum runs on the device. The references
themselves are checked against float64 finite differences through the forward ops' rules
(tests/test_gradients.py)."""
import numpy as np
import pytest

from graphkernel.compiler import compile_graph
from graphkernel.expanders import expand
from graphkernel.settings.flags import parse_flags
from graphkernel.settings.options import CompileOptions
from fusion_helpers import options
from ir import GraphBuilder
from ir.dtypes import DType
from ir.errors import DTypeError
from ir.graph import TensorType
from ir.interpret import interpret
from tolerance import assert_close


def _stats(x, axes):
    mean = x.mean(axis=axes, keepdims=True)
    return ((x - mean) ** 2).mean(axis=axes, keepdims=True), mean


def cases():
    """(op, arrays, attrs, id): the grad ops at shapes that reach rows, columns and split variants."""
    rng = np.random.default_rng(0)
    out = []
    for shape, axis in (((4, 7), (-1,)), ((64, 128), (-1,)), ((3, 5, 6), (1,)), ((300, 33), (0,))):
        y = rng.uniform(0.01, 1, shape)
        out.append(("SoftmaxGrad", [y / y.sum(axis=axis, keepdims=True), rng.standard_normal(shape)],
                    {"axis": axis}, f"SoftmaxGrad{shape}"))
        out.append(("LogSoftmaxGrad", [np.log(y / y.sum(axis=axis, keepdims=True)), rng.standard_normal(shape)],
                    {"axis": axis}, f"LogSoftmaxGrad{shape}"))
    for shape in ((5, 9), (256, 1024), (2, 3, 40)):
        x = rng.standard_normal(shape) * 2
        out.append(("GeLUGrad", [rng.standard_normal(shape), x, x], {}, f"GeLUGrad{shape}"))
        out.append(("SigmoidGrad", [1 / (1 + np.exp(-x)), rng.standard_normal(shape)], {}, f"SigmoidGrad{shape}"))
        out.append(("ReluGrad", [rng.standard_normal(shape), x], {}, f"ReluGrad{shape}"))
        out.append(("BiasAddGrad", [x], {"data_format": "NHWC"}, f"BiasAddGrad-NHWC{shape}"))
        if len(shape) > 2:
            out.append(("BiasAddGrad", [x], {}, f"BiasAddGrad-NCHW{shape}"))
    for shape in ((5, 9), (64, 96)):
        y = np.tanh(rng.standard_normal(shape))
        out.append(("TanhGrad", [y, rng.standard_normal(shape)], {}, f"TanhGrad{shape}"))
        out.append(("SqrtGrad", [rng.uniform(0.5, 2, shape), rng.standard_normal(shape)], {}, f"SqrtGrad{shape}"))
        out.append(("SigmoidCrossEntropyWithLogitsGrad", [rng.standard_normal(shape) * 3, rng.uniform(0, 1, shape),
                                                           rng.standard_normal(shape)], {}, f"SigmoidCEGrad{shape}"))
        out.append(("DropoutGrad", [rng.standard_normal(shape), (rng.random(shape) < 0.7).astype(np.float64)],
                    {"keep_prob": 0.7}, f"DropoutGrad{shape}"))
    for op in ("MaximumGrad", "MinimumGrad"):
        for s1, s2, gx, gy in (((4, 6), (4, 6), True, True), ((3, 1, 5), (4, 1), True, True),
                               ((2, 7), (7,), False, True), ((5, 3), (5, 3), True, False)):
            x1 = np.round(rng.standard_normal(s1) * 2) / 2   # halves: ties happen
            x2 = np.round(rng.standard_normal(s2) * 2) / 2
            grads = rng.standard_normal(np.broadcast_shapes(s1, s2))
            out.append((op, [x1, x2, grads], {"grad_x": gx, "grad_y": gy}, f"{op}{s1}{s2}-{gx:d}{gy:d}"))
    for shape, bna, bpa in (((6, 16), 1, 1), ((256, 1024), 1, 1), ((2, 5, 24), 2, 2), ((2, 3, 8), 1, 1),
                            ((3, 4, 10), 2, 1)):
        x = rng.standard_normal(shape) * 3 + 1
        var, mean = _stats(x, tuple(range(bna, len(shape))))
        out.append(("LayerNormGrad", [x, rng.standard_normal(shape), var, mean, rng.standard_normal(shape[bpa:])],
                    {"begin_norm_axis": bna, "begin_params_axis": bpa, "epsilon": 1e-5},
                    f"LayerNormGrad{shape}-{bna}{bpa}"))
    for shape in ((5, 9), (64, 96)):
        x = rng.standard_normal(shape) * 3
        out.append(("FastGeLUGrad", [rng.standard_normal(shape), x], {}, f"FastGeLUGrad{shape}"))
    for shape, axis in (((4, 7), (-1,)), ((64, 128), (-1,)), ((3, 5, 6), (1,)), ((3, 4), ())):
        y = rng.uniform(0.01, 1, shape)
        out.append(("SoftmaxGradExt", [rng.standard_normal(shape), y / y.sum(axis=axis or None, keepdims=True),
                                       np.asarray(0.125)], {"axis": axis}, f"SoftmaxGradExt{shape}{axis}"))
    out.append(("SoftmaxGradExt", [rng.standard_normal((2, 3, 8)), rng.uniform(0, 1, (2, 3, 8)),
                                   rng.standard_normal((3, 1))], {"axis": (-1,)}, "SoftmaxGradExt-z(3,1)"))
    for shape, fmt in (((4, 3), "NCHW"), ((2, 3, 5, 4), "NCHW"), ((2, 5, 4, 3), "NHWC"), ((8, 16, 32, 32), "NCHW")):
        x = rng.standard_normal(shape) * 2 + 1
        c = shape[1] if fmt == "NCHW" else shape[-1]
        axes = tuple(a for a in range(len(shape)) if a != (1 if fmt == "NCHW" else len(shape) - 1))
        for training in (True, False):
            mean, var = (x.mean(axes), x.var(axes)) if training else (rng.standard_normal(c), rng.uniform(0.5, 2, c))
            out.append(("BatchNormGrad", [rng.standard_normal(shape), x, rng.standard_normal(c), mean, var, var],
                        {"is_training": training, "data_format": fmt},
                        f"BatchNormGrad{shape}{fmt}-{'train' if training else 'infer'}"))
    return out


CASES = cases()
EXPANDED = CompileOptions(flags=parse_flags("--enable_expand_ops=BatchNormGrad", read_env=False))


# (op, dtype) MindSpore 2.10's primitive refuses (its FastGeLU gradient takes primitive ops there instead)
REFUSED = {("FastGeLUGrad", "bfloat16")}


def _graph(op, arrays, attrs, dtype):
    b = GraphBuilder(*[TensorType(a.shape, dtype) for a in arrays])
    return b.graph(*b.ops(op, *b.inputs, **attrs))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("op, arrays, attrs", [c[:3] for c in CASES], ids=[c[3] for c in CASES])
def test_expansion_equals_reference(op, arrays, attrs, dtype):
    arrays = [a.astype(dtype) for a in arrays]
    if (op, dtype) in REFUSED:
        with pytest.raises(DTypeError, match=op):
            _graph(op, arrays, attrs, DType(dtype))
        return
    graph = _graph(op, arrays, attrs, DType(dtype))
    expanded = expand(graph, EXPANDED)
    assert not any(n.op == op for n in expanded.nodes)
    for got, want in zip(interpret(expanded, arrays), interpret(graph, arrays)):
        assert_close(got, want)


@pytest.mark.grid
@pytest.mark.parametrize("core_num", [1, 32])
@pytest.mark.parametrize("op, arrays, attrs", [c[:3] for c in CASES], ids=[c[3] for c in CASES])
def test_device_fused_and_unfused_equal_reference(op, arrays, attrs, core_num):
    arrays = [a.astype(np.float32) for a in arrays]
    graph = _graph(op, arrays, attrs, DType.float32)
    want = interpret(graph, arrays)
    flags = "--enable_expand_ops=BatchNormGrad"
    for opts in (CompileOptions(core_num=core_num), options(core_num=core_num), options(flags, core_num=core_num)):
        compiled = compile_graph(graph, opts, eager=True)
        for got, ref in zip(compiled.run_arrays(arrays), want):
            assert_close(got, ref)


def _kernels(build, *shapes):
    b = GraphBuilder(*[TensorType(s, DType.float32) for s in shapes])
    compiled = compile_graph(b.graph(*build(b, *b.inputs)), options(), eager=True)
    return [k for k in compiled.kernels]


def test_softmax_grad_is_one_kernel():
    kernels = _kernels(lambda b, y, dy: b.ops("SoftmaxGrad", y, dy), (512, 128), (512, 128))
    assert [k.variant for k in kernels] == ["rows"]


def test_layer_norm_grad_is_two_kernels_rows_and_one_column_reduction():
    def build(b, x, dy, gamma):
        mean = b.mean(x, (2,))
        centered = b.op("Sub", x, mean)
        var = b.mean(b.op("Mul", centered, centered), (2,))
        return b.ops("LayerNormGrad", x, dy, var, mean, gamma, begin_norm_axis=2, begin_params_axis=2)
    kernels = _kernels(build, (2, 128, 1024), (2, 128, 1024), (1024,))
    rows = [k for k in kernels if k.variant == "rows"]
    columns = [k for k in kernels if k.variant == "columns"]
    assert len(rows) == 1 and len(columns) == 1 and len(kernels) == 2, [(k.variant, k.op_types) for k in kernels]
    assert columns[0].op_types.count("ReduceSum") == 2        # dgamma and dbeta together


def test_gelu_grad_with_its_bias_gradient_is_at_most_two_kernels():
    def build(b, dy, x):
        g = b.op("GeLUGrad", dy, x, b.op("GeLU", x))
        return g, b.op("BiasAddGrad", g, data_format="NHWC")
    kernels = _kernels(build, (256, 1024), (256, 1024))
    assert len(kernels) <= 2, [(k.variant, k.op_types) for k in kernels]


@pytest.mark.parametrize("fused", [True, False])
def test_gelu_and_its_gradient_share_one_tanh(fused):
    """GeLUGrad's expansion computes tanh's argument op for op as GeLU's does, so CSE keeps one Tanh for
    both (the training step computed tanh twice per element); the values stay the reference's."""
    def build(b, dy, x):
        y = b.op("GeLU", x)
        return y, b.op("GeLUGrad", dy, x, y)
    b = GraphBuilder(TensorType((64, 256), DType.float32), TensorType((64, 256), DType.float32))
    graph = b.graph(*build(b, *b.inputs))
    opts = options() if fused else CompileOptions(enable_graph_kernel=False)
    compiled = compile_graph(graph, opts, eager=True)
    assert sum(k.op_types.count("Tanh") for k in compiled.kernels) == 1, [k.op_types for k in compiled.kernels]
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((64, 256)).astype(np.float32) * 3 for _ in range(2)]
    for got, want in zip(compiled.run_arrays(arrays), interpret(graph, arrays)):
        assert_close(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("shape, ids, n", [((6, 3), [0, 2, 2, -1, 7, 0], 4), ((2, 3, 4), [[1, 0, 1], [0, 0, 3]], 2),
                                           ((0, 5), [], 3), ((5,), [4, 4, 4, 4, 4], 5)])
def test_unsorted_segment_sum_on_the_device(shape, ids, n, dtype):
    rng = np.random.default_rng(1)
    x = (rng.integers(-8, 8, shape) / 4).astype(dtype)
    ids = np.array(ids, np.int32).reshape(shape[:np.ndim(ids)] if np.size(ids) else (0,))
    b = GraphBuilder(TensorType(x.shape, DType(dtype)), TensorType(ids.shape, DType.int32))
    graph = b.graph(b.op("UnsortedSegmentSum", *b.inputs, num_segments=n))
    want = np.zeros((n,) + x.shape[ids.ndim:], np.float64)
    for i, s in enumerate(ids.reshape(-1)):
        if 0 <= s < n:
            want[s] += x.reshape((ids.size,) + x.shape[ids.ndim:])[i]
    got = compile_graph(graph, CompileOptions(), eager=True).run_arrays([x, ids])[0]
    assert_close(got, want.astype(dtype), bitwise=True)      # quarter values: every sum is exact
