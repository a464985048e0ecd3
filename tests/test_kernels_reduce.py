"""Reductions and multi-phase composites (Softmax, LayerNorm, GeLU) through the generated kernels."""
import numpy as np
import pytest

from kernels import DeviceConfig, lower
from ir import GraphBuilder
from tests.kernel_graphs import fused, random_array, reference
from kernels.reduction import LOOP_MAX_WRITES
from tests.tolerance import assert_close

CFG = DeviceConfig()
pytestmark = pytest.mark.filterwarnings("error::kernels.KernelBuildWarning")


def check(graph, arrays, cfg=CFG, **kw):
    program = lower(graph, cfg)
    outs = program.run(arrays)
    for got, want in zip(outs, reference(graph, arrays)):
        assert_close(got, want, **kw)
    return program, outs


@pytest.mark.grid
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("shape,axis,keep", [
    ((4, 6), (1,), False), ((4, 6), (0,), True), ((3, 4, 5), (1,), False), ((3, 4, 5), (0, 2), True),
    ((2, 3, 4, 5), (1, 2), False), ((3, 4, 5), (), False), ((7,), (0,), True), ((2, 37), (1,), True),
    ((5, 40), (0,), False), ((3, 4, 150), (0, 1), True), ((2, 3, 20), (1,), False)],  # columns
    ids=str)
def test_reduce_primitive(op, shape, axis, keep):
    b = GraphBuilder()
    x = b.input(shape)
    check(b.graph(b.op(op, x, axis=axis, keep_dims=keep)), [random_array(shape)])


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
@pytest.mark.parametrize("shape,axis,keep", [((4, 1), (1,), False), ((4, 1), (1,), True),
                                             ((1, 1), (0, 1), False), ((3, 1, 5), (1,), True)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_reduce_over_size_one_axes_only(op, shape, axis, keep, dtype):
    """Nothing to combine: the kernel is elementwise, and the result is the input's values."""
    b = GraphBuilder(dtype=dtype)
    x = b.input(shape)
    program, _ = check(b.graph(b.op(op, x, axis=axis, keep_dims=keep)), [random_array(shape, dtype)],
                       bitwise=True)
    assert [k.variant for k in program.kernels] == ["elementwise"]


def test_size_one_reduction_beside_a_real_one():
    """A fused kernel holding a reduction over a size-1 axis and one over a real axis."""
    b = GraphBuilder()
    x = b.input((4, 1, 8))
    trivial = b.op("ReduceSum", x, axis=(1,), keep_dims=True)
    peak = b.op("ReduceMax", b.op("Add", trivial, b.const(1.0)), axis=(2,), keep_dims=True)
    graph = fused(b.graph(b.op("Sub", x, peak)))
    program, _ = check(graph, [random_array((4, 1, 8))], bitwise=True)
    assert len(program.kernels) == 1 and program.kernels[0].variant == "rows"


@pytest.mark.parametrize("dtype", ["int32", "float64", "int8", "uint16", "uint64"])
def test_reduce_other_dtypes(dtype):
    b = GraphBuilder(dtype=dtype)
    x = b.input((5, 9))
    g = b.graph(b.op("ReduceSum", x, axis=(1,)), b.op("ReduceMax", x, axis=(1,)))
    check(fused(g), [random_array((5, 9), dtype)])


@pytest.mark.parametrize("dtype", ["uint8", "uint32", "uint64", "int8"])
def test_max_and_min_compare_as_the_type_says(dtype):
    """Unsigned values past the signed range (200 in uint8) compare unsigned in the accumulator lanes,
    rows of more than 64 elements (full lane chunks) and a partial last chunk."""
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(info.min, info.max, (3, 150), dtype=dtype, endpoint=True)
    x[0, 70], x[1, 5] = info.max, info.min
    b = GraphBuilder(dtype=dtype)
    x_in = b.input(x.shape)
    g = b.graph(b.op("ReduceMax", x_in, axis=(1,)), b.op("ReduceMin", x_in, axis=(1,)))
    check(g, [x], bitwise=True)


def test_int32_sum_wraps_like_numpy():
    b = GraphBuilder(dtype="int32")
    x = b.input((3, 4))
    check(b.graph(b.op("ReduceSum", x, axis=(1,))), [np.full((3, 4), 2 ** 30, np.int32)])


def sum_of_squares(shape, axis=()):
    b = GraphBuilder()
    x = b.input(shape)
    return fused(b.graph(b.op("ReduceSum", b.op("Mul", x, x), axis=axis)))


@pytest.mark.parametrize("shape,axis", [((6, 10), ()), ((6, 10), (0,)), ((3, 4, 5), (1,)), ((3, 4, 5), (0, 2))],
                         ids=str)
def test_sum_of_squares(shape, axis):
    program, _ = check(sum_of_squares(shape, axis), [random_array(shape)])
    assert len(program.kernels) == 1


def test_long_row_splits_into_fixed_chunks():
    shape = (64, 1024)  # 65536 elements reduced to one: the split variant
    program, _ = check(sum_of_squares(shape), [random_array(shape)], rtol_scale=10)
    assert program.kernels[0].variant == "split"


def softmax(shape, axis):
    b = GraphBuilder()
    x = b.input(shape)
    e = b.op("Exp", b.op("Sub", x, b.op("ReduceMax", x, axis=axis, keep_dims=True)))
    return b.graph(b.op("RealDiv", e, b.op("ReduceSum", e, axis=axis, keep_dims=True)))


def layer_norm(shape, eps=1e-5):
    b = GraphBuilder()
    x, gamma, beta = b.input(shape), b.input(shape[-1:]), b.input(shape[-1:])
    axis = (len(shape) - 1,)
    inv_n = b.const(1.0 / shape[-1])
    mean = b.op("Mul", b.op("ReduceSum", x, axis=axis, keep_dims=True), inv_n)
    centered = b.op("Sub", x, mean)
    var = b.op("Mul", b.op("ReduceSum", b.op("Mul", centered, centered), axis=axis, keep_dims=True), inv_n)
    y = b.op("Add", b.op("Mul", b.op("Mul", centered, b.op("Rsqrt", b.op("Add", var, b.const(eps)))), gamma),
             beta)
    return b.graph(y, mean, var)


@pytest.mark.parametrize("shape,axis", [((5, 16), (1,)), ((6, 4), (0,)), ((2, 3, 7), (1,)), ((3, 33), (1,)),
                                        ((6, 20), (0,)), ((2, 5, 130), (1,))], ids=str)
def test_softmax_three_passes(shape, axis):
    g = fused(softmax(shape, axis))
    program, outs = check(g, [random_array(shape, low=-5, high=5)], rtol_scale=3)
    assert len(program.kernels) == 1
    np.testing.assert_allclose(outs[0].sum(axis=axis), 1.0, rtol=1e-5)


@pytest.mark.parametrize("shape", [(4, 32), (3, 2, 19)], ids=str)
def test_layer_norm_multi_output(shape):
    g = fused(layer_norm(shape))
    arrays = [random_array(shape), random_array(shape[-1:], seed=1), random_array(shape[-1:], seed=2)]
    program, _ = check(g, arrays, rtol_scale=10)
    assert len(program.kernels) == 1 and program.kernels[0].variant == "rows"


def test_softmax_unfused_matches_reference():
    shape = (5, 16)
    check(softmax(shape, (1,)), [random_array(shape)], rtol_scale=3)


def test_reduce_of_broadcast_input():
    """A reduction whose input is broadcast along a kept axis recomputes it per unit."""
    b = GraphBuilder()
    x, row = b.input((4, 6)), b.input((1, 6))
    s = b.op("ReduceSum", b.op("Mul", x, row), axis=(1,), keep_dims=True)
    check(fused(b.graph(b.op("Add", s, row))), [random_array((4, 6)), random_array((1, 6))])


def test_reduce_with_nan_propagates():
    b = GraphBuilder()
    x = b.input((3, 8))
    g = fused(b.graph(b.op("ReduceMax", x, axis=(1,)), b.op("ReduceSum", x, axis=(1,))))
    a = random_array((3, 8))
    a[1, 3] = np.nan
    a[2, 5] = np.inf
    check(g, [a])


@pytest.mark.parametrize("core_num", [3, 32])
@pytest.mark.parametrize("label", ["rows", "columns"])
def test_block_dim_does_not_change_bits(label, core_num):
    # large enough for several blocks: LayerNorm over rows, a softmax down the columns
    g = fused(layer_norm((300, 256))) if label == "rows" else fused(softmax((64, 4096), (0,)))
    arrays = [random_array(v.shape, seed=k) for k, v in enumerate(g.inputs)]
    base = lower(g, DeviceConfig(core_num=1)).run(arrays)
    program = lower(g, DeviceConfig(core_num=core_num))
    assert program.kernels[0].variant == label and program.kernels[0].block_dim > 1
    for a, b in zip(program.run(arrays), base):
        assert_close(a, b, bitwise=True)


@pytest.mark.parametrize("label", ["softmax", "layer_norm"])
def test_fused_reductions_equal_unfused_bitwise(label):
    """Reductions sum in the same lanes fused or not, and a stashed exp is the computed one."""
    g = softmax((6, 130), (1,)) if label == "softmax" else layer_norm((6, 130))
    arrays = [random_array(v.shape, seed=k) for k, v in enumerate(g.inputs)]
    for a, b in zip(lower(fused(g), CFG).run(arrays), lower(g, CFG).run(arrays)):
        assert_close(a, b, bitwise=True)


def test_split_variant_with_several_units_and_a_full_output():
    b = GraphBuilder()
    x = b.input((3, 40000))
    sq = b.op("Mul", x, x)
    g = fused(b.graph(b.op("ReduceSum", sq, axis=(1,)), sq, b.op("ReduceMax", x, axis=(1,), keep_dims=True)))
    program, _ = check(g, [random_array((3, 40000))], rtol_scale=10)
    assert program.kernels[0].variant == "split"


@pytest.mark.parametrize("shape,axis,variant", [((5, 40), (0,), "columns"), ((65536, 3), (0,), "split"),
                                                ((6, 4), (0,), "rows")], ids=str)
def test_variant_for_reductions_down_the_columns(shape, axis, variant):
    b = GraphBuilder()
    x = b.input(shape)
    program, _ = check(b.graph(b.op("ReduceSum", x, axis=axis)), [random_array(shape)], rtol_scale=10)
    assert program.kernels[0].variant == variant


@pytest.mark.parametrize("shape,axis,variant", [((5, 40), (0,), "columns"), ((65536, 3), (0,), "split"),
                                                ((6, 4), (0,), "rows"), ((6, 40), (1,), "rows")], ids=str)
@pytest.mark.parametrize("scale_shape", [(), (1, 1)], ids=str)
def test_value_of_reduced_shape_inputs_only_after_a_reduction(shape, axis, variant, scale_shape):
    """ReduceSum(x) * Reciprocal(s), s of reduced shape: Reciprocal(s) is computed from inputs only yet
    read after the reduction (the loss-scale cell divides every bias gradient so). The columns kernel
    once left its unit array unallocated and failed to build."""
    b = GraphBuilder()
    x, s = b.input(shape), b.input(scale_shape)
    r = b.op("ReduceSum", x, axis=axis, keep_dims=True)
    inv = b.op("Reciprocal", s)
    out = b.op("Mul", r, inv)
    flag = b.op("Cast", b.op("IsInf", out), dtype="float32")
    graph = b.graph(out, flag)
    arrays = [random_array(shape), np.full(scale_shape, 4.0, np.float32)]
    program, _ = check(fused(graph), arrays, rtol_scale=10)
    assert len(program.kernels) == 1 and program.kernels[0].variant == variant


def sibling_sums(k: int, shape, axis):
    """k reductions of x * r * y in one kernel, each over its own inputs (the bias and LayerNorm
    gradients of a layer stack, summed over rows by sibling fusion)."""
    b = GraphBuilder()
    outs = []
    for _ in range(k):
        x, y, r = b.input(shape), b.input(shape), b.input(shape[:-1] + (1,))   # r: one value per row
        outs.append(b.op("ReduceSum", b.op("Mul", b.op("Mul", x, r), y), axis=axis))
        outs.append(b.op("Add", b.op("Mul", x, y), r))   # a full output beside the sums
    return fused(b.graph(*outs))


@pytest.mark.grid
@pytest.mark.skipif(not __import__("platform").machine() in ("x86_64", "AMD64"), reason="reads x86 LLVM IR")
@pytest.mark.parametrize("k", [1, 2, 3, 8])
@pytest.mark.parametrize("shape,axis,variant", [((256, 160), (0,), "columns"), ((96, 300), (1,), "rows")], ids=str)
def test_many_reductions_in_one_kernel_stay_vectorized(k, shape, axis, variant):
    """Past LOOP_MAX_WRITES arrays written, the operands are computed LOOP_MAX_WRITES to a loop:
    one loop computing eight operands and outputs needs more runtime alias checks than LLVM makes and
    runs scalar (the layer stack's gradient sums; 1.3-1.6x the time in cache); below it one loop
    computes them all. Bitwise equal to the unfused kernels, and the operand loops are vector code."""
    import re
    graph = sibling_sums(k, shape, axis)
    program = lower(graph, DeviceConfig(cache_mode="disable"))
    assert [s.info.variant for s in program.steps] == [variant]
    arrays = [random_array(v.shape, seed=i) for i, v in enumerate(graph.inputs)]
    got = program.run(arrays)
    unfused = lower(_unfused(graph), DeviceConfig()).run(arrays)
    for a, u, want in zip(got, unfused, reference(graph, arrays)):
        assert_close(a, want)
        assert_close(a, u, bitwise=True)   # each sum in the same order, fused or not
    fn = program.steps[0].fn
    llvm = fn.inspect_llvm(fn.signatures[0])
    assert len(re.findall(r"fmul <\d+ x float>", llvm)) >= k, "the operand loops run scalar"
    accumulates = re.compile(r"^\s*(acc_\d+\[\w+\] = .*\bacc_\d+\[|ch_scr_)", re.M)   # an update or a scratch store
    together = [body for body in _loop_bodies(program.steps[0].info.source)
                if "out_" in body and accumulates.search(body)]
    # k sums and k outputs: within LOOP_MAX_WRITES one loop computes them all, past it none does
    assert bool(together) == (2 * k <= LOOP_MAX_WRITES), program.steps[0].info.source
    if 2 * k > LOOP_MAX_WRITES:   # the operands: LOOP_MAX_WRITES scratch rows (or accumulators) a loop
        written = r"\bch_scr_\d+\[j\] =" if variant == "rows" else r"\bacc_\d+\[c\] = \("
        rows_written = [len(set(re.findall(written, body))) for body in _loop_bodies(program.steps[0].info.source)]
        assert sorted(n for n in rows_written if n) == sorted(
            min(LOOP_MAX_WRITES, k - at) for at in range(0, k, LOOP_MAX_WRITES)), program.steps[0].info.source


def _loop_bodies(source: str) -> list[str]:
    """The text of every innermost `for` loop of a kernel's source (its indented body)."""
    lines, bodies = source.splitlines(), []
    for i, line in enumerate(lines):
        if line.strip().startswith("for "):
            depth = len(line) - len(line.lstrip())
            body = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= depth:
                    break
                body.append(nxt)
            if not any(b.strip().startswith("for ") for b in body):
                bodies.append("\n".join(body))
    return bodies


def _unfused(graph):
    """The composite's subgraph at top level: one kernel per primitive."""
    return graph.nodes[-1].subgraph


def column_gradient_checks(k: int, shape):
    """k sums down the columns, each scaled by 1/s (s of reduced shape) and checked for overflow
    (the loss-scale cell's bias gradients: a sum, a Mul, IsNan | IsInf, a Cast, two outputs each),
    and a two-pass variance whose mean is read again after the second pass."""
    b = GraphBuilder()
    s = b.input((1, shape[1]))
    inv = b.op("Reciprocal", s)
    outs = []
    for _ in range(k):
        g = b.op("Mul", b.op("ReduceSum", b.input(shape), axis=(0,), keep_dims=True), inv)
        bad = b.op("LogicalOr", b.op("IsNan", g), b.op("IsInf", g))
        outs += [g, b.op("Cast", bad, dtype="float32")]
    x = b.input(shape)
    mean = b.op("Mul", b.op("ReduceSum", x, axis=(0,), keep_dims=True), b.const(1.0 / shape[0]))
    centered = b.op("Sub", x, mean)
    var = b.op("ReduceSum", b.op("Mul", centered, centered), axis=(0,), keep_dims=True)
    outs += [b.op("Add", var, mean), centered]
    return fused(b.graph(*outs))


@pytest.mark.parametrize("k", [1, 6])
def test_a_column_kernels_unit_values_are_one_loop_between_row_loops(k):
    """Past a reduction, a columns kernel computes the unit values in one loop over the tile's columns
    (as scalars: an array only for what a row loop or a later unit loop reads), not a loop and an
    array per value: the overflow checks of six bias gradients made ~80 loops and a ~20 s build. The
    results are the reference's and bitwise the unfused kernels'."""
    import re
    shape = (37, 150)   # more than one tile of columns, and a partial one
    graph = column_gradient_checks(k, shape)
    program = lower(graph, DeviceConfig(cache_mode="disable"))
    assert [s.info.variant for s in program.steps] == ["columns"]
    arrays = [np.full((1, shape[1]), 4.0, np.float32)] + \
        [random_array(v.shape, seed=i) for i, v in enumerate(graph.inputs[1:])]
    arrays[1][3, 7] = np.inf           # an overflow in the first gradient
    arrays[1][5, 9] = np.nan
    got = program.run(arrays)
    unfused = lower(_unfused(graph), DeviceConfig()).run(arrays)
    for a, u, want in zip(got, unfused, reference(graph, arrays)):
        assert_close(a, want, rtol_scale=10)
        assert_close(a, u, bitwise=True)
    assert got[1][0, 7] == 1.0 and got[1][0, 9] == 1.0 and got[1][0, 8] == 0.0
    source = program.steps[0].info.source
    row_loop = re.search(r"^( *)for r in range", source, re.M).group(1)
    unit_loops = re.findall(rf"^{row_loop}for c in range\(cw\):", source, re.M)
    assert len(unit_loops) == 3, source   # two passes: before the first, between them, after the second
    kept = set(re.findall(r"^\s*(u_\d+) = np\.empty", source, re.M))
    assert kept == {"u_" + n for n in re.findall(r"\bu_(\d+)\[c\](?! =)", source)}, source  # only what is read back
    assert len(kept) <= 2, source   # 1/s (read in the unit loops after the row loops) and the mean
