"""The convolution and pooling kernels (kernels/conv.py, kernels/pool.py) against the numpy reference, swept
over what they distinguish: the pointwise path (1x1, stride 1, no padding) and the im2col path, padding
modes, strides larger than the kernel, dilation, groups (depthwise), odd sizes, float16; and that they
launch as kernels of their own, named after their nodes."""
import numpy as np
import pytest

from graphkernel.compiler import compile_graph
from graphkernel.settings.options import CompileOptions
from ir import GraphBuilder
from ir.dtypes import DType
from ir.graph import TensorType
from ir.interpret import interpret
from tolerance import assert_close

GEOMETRIES = [   # x shape, weight shape, attributes
    ((2, 8, 5, 7), (6, 8, 1, 1), {}),                                              # pointwise
    ((2, 8, 6, 6), (6, 8, 1, 1), dict(stride=2, pad_mode="same")),                 # strided 1x1
    ((1, 3, 9, 8), (4, 3, 3, 3), dict(pad_mode="same")),
    ((2, 3, 9, 8), (4, 3, 2, 4), dict(pad_mode="same", stride=2)),                 # even kernel, odd pad
    ((1, 4, 7, 7), (4, 4, 3, 3), dict(pad_mode="pad", pad=(2, 1, 0, 3), dilation=(2, 1))),
    ((1, 2, 11, 10), (3, 2, 2, 2), dict(stride=4)),                                # stride > kernel
    ((2, 6, 5, 5), (6, 2, 3, 3), dict(pad_mode="same", group=3)),
    ((1, 4, 6, 5), (4, 1, 3, 3), dict(pad_mode="same", group=4, stride=2)),        # depthwise
    ((1, 3, 12, 12), (5, 3, 7, 7), dict(pad_mode="same", stride=2)),               # a ResNet stem
]
POOLS = [((2, 3, 7, 8), dict(kernel_size=3, strides=2, pad_mode="same")),
         ((1, 2, 9, 6), dict(kernel_size=2, strides=3)),
         ((1, 2, 5, 5), dict(kernel_size=(1, 3), strides=(2, 1), pad_mode="same"))]


def _device_and_reference(op, arrays, attrs):
    b = GraphBuilder(*[TensorType(a.shape, DType(a.dtype.name)) for a in arrays])
    graph = b.graph(b.op(op, *b.inputs, name=f"Default/net/{op}-op0", **attrs))
    compiled = compile_graph(graph, CompileOptions(), eager=True)
    (info,) = compiled.kernels
    assert info.op_types == (op,) and info.name == f"Default/net/{op}-op0"
    return compiled.run_arrays(arrays)[0], interpret(graph, arrays)[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("x_shape, w_shape, kw", GEOMETRIES, ids=[str(i) for i in range(len(GEOMETRIES))])
def test_convolution_kernels_equal_the_reference(x_shape, w_shape, kw, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    attrs = dict(out_channel=w_shape[0], kernel_size=w_shape[2:], **kw)
    y, want = _device_and_reference("Conv2D", [x, w], attrs)
    assert_close(y, want)
    d = rng.standard_normal(y.shape).astype(dtype)
    dx, want = _device_and_reference("Conv2DBackpropInput", [d, w], dict(attrs, input_size=x_shape))
    assert_close(dx, want)
    dw, want = _device_and_reference("Conv2DBackpropFilter", [d, x], dict(attrs, filter_size=w_shape))
    assert_close(dw, want, rtol_scale=4 if dtype == np.float16 else 1)   # sums of N * oh * ow products


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_a_stride_1_input_gradient_runs_as_a_forward_convolution_with_the_flipped_kernel(dtype):
    """Conv2DBackpropInput of a stride-1 convolution of one group is a forward convolution over dout with
    the kernel flipped and transposed (kernels/conv.py `flipped`): for odd and even kernels, dilated,
    padded "same", "valid" and by hand on one side only, it gives the reference's values; a forward
    padded by more than its kernel's extent, or with few output pixels beside its output channels,
    keeps the col2im path, and gives them too; so do weights holding inf or NaN (the forward would
    multiply them by dout's zero padding)."""
    from kernels.conv import Geometry, flipped
    cases = [((2, 3, 9, 8), (4, 3, 3, 3), dict(pad_mode="same"), True),
             ((1, 3, 9, 8), (5, 3, 2, 4), dict(pad_mode="same"), True),               # even: uneven pads
             ((1, 2, 7, 6), (3, 2, 3, 2), dict(pad_mode="pad", pad=(1, 3, 0, 1), dilation=(2, 1)), True),
             ((2, 3, 6, 7), (2, 3, 3, 3), {}, True),                                   # valid
             ((1, 2, 5, 5), (2, 2, 2, 2), dict(pad_mode="pad", pad=(3, 0, 0, 0)), False),
             ((1, 2, 3, 3), (16, 2, 3, 3), dict(pad_mode="same"), False)]                # few pixels, many O
    rng = np.random.default_rng(4)
    for x_shape, w_shape, kw, as_forward in cases:
        attrs = dict(out_channel=w_shape[0], kernel_size=w_shape[2:], group=1, stride=(1, 1), **kw)
        attrs.setdefault("dilation", (1, 1))
        attrs.setdefault("pad_mode", "valid")
        attrs.setdefault("pad", (0, 0, 0, 0))
        geo = Geometry(x_shape, w_shape, attrs)
        assert (flipped(geo) is not None) == as_forward, (x_shape, w_shape, kw)
        w = rng.standard_normal(w_shape).astype(dtype)
        d = rng.standard_normal((geo.n, geo.o, geo.oh, geo.ow)).astype(dtype)
        dx, want = _device_and_reference("Conv2DBackpropInput", [d, w], dict(attrs, input_size=x_shape))
        assert_close(dx, want)
        for bad in (np.inf, -np.inf, np.nan):   # a non-finite weight reaches only the pixels it reads
            w.reshape(-1)[0] = bad
            dx, want = _device_and_reference("Conv2DBackpropInput", [d, w], dict(attrs, input_size=x_shape))
            assert_close(dx, want)


def test_scratch_buffers_carry_nothing_from_one_convolution_to_the_next():
    """The working arrays (padded input, columns, GEMM result) are one buffer per role and thread, reused
    by every convolution after (kernels/conv.py `scratch`): each geometry's three kernels, in float64
    (written in place) and float16 (stored through scratch), run after the others in one order and then
    in the reverse, give the reference's values and the same bits both times."""
    from kernels import conv
    rng = np.random.default_rng(3)
    runs = {}
    for order in (GEOMETRIES, GEOMETRIES[::-1]):
        for x_shape, w_shape, kw in order:
            for dtype in (np.float64, np.float16):
                x, w = (rng.standard_normal(s).astype(dtype) for s in (x_shape, w_shape))
                key = (x_shape, w_shape, str(kw), dtype)
                x, w = runs.get(key, {}).get("inputs", (x, w))
                attrs = dict(out_channel=w_shape[0], kernel_size=w_shape[2:], **kw)
                y, want = _device_and_reference("Conv2D", [x, w], attrs)
                assert_close(y, want)
                d = np.cos(np.arange(y.size)).reshape(y.shape).astype(dtype)
                dx, want_dx = _device_and_reference("Conv2DBackpropInput", [d, w], dict(attrs, input_size=x_shape))
                assert_close(dx, want_dx)
                got = (y, dx)
                if key in runs:
                    for a, b in zip(got, runs[key]["outputs"]):
                        assert_close(a, b, bitwise=True)
                runs[key] = {"inputs": (x, w), "outputs": got}
    assert conv._scratch.columns.nbytes >= 4 * 2 * 9 * 8 * 9 * 8   # kept for the next convolution


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16], ids=["f64", "f32", "f16"])
@pytest.mark.parametrize("shape, attrs", POOLS, ids=[str(i) for i in range(len(POOLS))])
def test_max_pool_gradient_picks_the_references_maximum_among_ties_infinities_and_nans(shape, attrs, dtype):
    """MaxPoolGrad sends each window's dout to the reference's pixel (np.argmax's: the first maximum in
    row-major order, a NaN counting as the maximum, the first NaN winning) when windows hold ties,
    -inf, +inf and NaNs, and carries inf and NaN in dout only to that pixel: bitwise the reference's."""
    rng = np.random.default_rng(2)
    x = rng.integers(-2, 3, shape).astype(dtype)            # small integers: ties in most windows
    flat = x.reshape(-1)
    picks = rng.permutation(flat.size)
    flat[picks[:flat.size // 6]] = np.nan
    flat[picks[flat.size // 6:flat.size // 4]] = -np.inf
    flat[picks[flat.size // 4:flat.size // 3]] = np.inf
    y, want = _device_and_reference("MaxPool", [x], attrs)
    assert_close(y, want, bitwise=True)   # a NaN in a window is its maximum here too
    d = rng.standard_normal(y.shape).astype(dtype)
    d.reshape(-1)[::5], d.reshape(-1)[1::7] = np.inf, np.nan
    g, want = _device_and_reference("MaxPoolGrad", [x, y, d], attrs)
    assert_close(g, want, bitwise=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("shape, attrs", POOLS, ids=[str(i) for i in range(len(POOLS))])
def test_pooling_kernels_equal_the_reference(shape, attrs, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(dtype)
    y, want = _device_and_reference("MaxPool", [x], attrs)
    assert_close(y, want, bitwise=True)
    a, want = _device_and_reference("AvgPool", [x], attrs)
    assert_close(a, want)
    d = rng.standard_normal(y.shape).astype(dtype)
    g, want = _device_and_reference("MaxPoolGrad", [x, y, d], attrs)
    assert_close(g, want, bitwise=True)
    g, want = _device_and_reference("AvgPoolGrad", [x, a, d], attrs)
    assert_close(g, want)
