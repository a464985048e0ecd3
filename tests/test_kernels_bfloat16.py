"""bfloat16 arithmetic (MindSpore 2.x's semantics): every op computes in float32 and rounds its result
to bfloat16 once; sums and matrix products accumulate in float32 and round once.

The reference (ir.ops.evaluate) is checked against a float32 computation rounded to bfloat16, written
apart from it; the kernels against the reference over every bfloat16 value: the ops the kernels compute
exactly bit for bit, the transcendental ones within one bfloat16 step; a fused chain gives the bits of
the single-op kernels (every op's own kernel against the fused one: --runslow). Reductions, MatMul, a fused chain with reductions, casts and
broadcasting follow. MindSpore 2.10's own bfloat16 results on the CPU (Add, Mul, RealDiv, Neg, the scalar
Add, the float32 promotion) are recorded in test_values_mindspore_2_10_gives; its other bfloat16 CPU
kernels (Exp, ReduceSum, MatMul, ...) refuse the dtype, so the float32-then-round rule stands for them.
"""
import ml_dtypes
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, ops
from ir import GraphBuilder
from ir.dtypes import DType
from ir.ops import OPS, Cost, evaluate, make_node
from ir.graph import Graph, TensorType
from kernels import DeviceConfig, lower
from tests.kernel_graphs import fused, random_array, reference
from tests.op_samples import kernel_ops, sample
from tests.tolerance import assert_close

BF16 = np.dtype(ml_dtypes.bfloat16)


def every_bfloat16() -> np.ndarray:
    """Every bfloat16 value, NaNs and infinities included (65536 of them)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF16)


def steps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many bfloat16 steps separate a and b (0 for equal values, both NaN, or +0 and -0)."""
    def ordered(x):
        bits = x.view(np.uint16).astype(np.int32)
        return np.where(bits >= 0x8000, 0x8000 - bits, bits)
    return np.where(np.isnan(a) & np.isnan(b), 0, np.abs(ordered(a) - ordered(b)))


def float32_rounded(op: str, arrays, attrs=None) -> tuple:
    """`op` computed by its float32 reference on the bfloat16 values (exactly widened), each float32
    result rounded to bfloat16: what MindSpore's bfloat16 kernels compute."""
    wide = [a.astype(np.float32) if a.dtype == BF16 else a for a in arrays]
    inputs = Graph.with_inputs([TensorType(a.shape, DType(str(a.dtype))) for a in wide])
    with np.errstate(all="ignore"):
        results = evaluate(make_node(op, inputs, attrs or {}), wide)
        return tuple(r.astype(BF16) if r.dtype == np.float32 else r for r in results)


OPS_1 = [op for op in kernel_ops(1) if OPS[op].domain != "bool"]
OPS_2 = [op for op in kernel_ops(2) if OPS[op].domain != "bool"]


def exact(op: str) -> bool:
    """Ops computed by one correctly rounded float32 operation (or none): the kernels give its bits."""
    return OPS[op].cost < Cost.TRANSCENDENTAL


SEQUENTIAL = DeviceConfig(parallel_min_elements=1 << 62)   # the dtype is under test, not the parallel grid


def _every_value_graph():
    """Each op of OPS_1 and OPS_2 over every bfloat16 value (the binary ops paired with a shuffled copy)."""
    b = GraphBuilder(dtype="bfloat16")
    x, y = b.input((1 << 16,)), b.input((1 << 16,))
    graph = b.graph(*[b.op(op, x) for op in OPS_1], *[b.op(op, x, y) for op in OPS_2])
    values = every_bfloat16()
    return graph, [values, np.random.default_rng(0).permutation(values)]


ALL_OPS = [(op, 1) for op in OPS_1] + [(op, 2) for op in OPS_2]


def test_every_op_over_every_bfloat16():
    """Every op in one fused kernel: the reference is the float32 result rounded once, and the kernel
    gives the reference's bits (the transcendental ops: within one bfloat16 step). One test, not one per
    op: the kernel is compiled once (a module fixture would compile it on every xdist worker); every
    op's failure is reported."""
    graph, arrays = _every_value_graph()
    program = lower(fused(graph), SEQUENTIAL)
    assert [k.variant for k in program.kernels] == ["elementwise"]
    with np.errstate(all="ignore"):
        want = reference(graph, arrays)
    got = program.run(arrays)
    failures = []
    for k, (op, arity) in enumerate(ALL_OPS):
        (rounded,) = float32_rounded(op, arrays[:arity])
        checks = [(want[k], rounded, "the reference is its float32 result rounded once")]
        if exact(op) or want[k].dtype != BF16:
            checks.append((got[k], want[k], "the kernel gives the reference's bits"))
        else:
            steps = steps_apart(got[k], want[k])
            if steps.max() > 1:
                failures.append(f"{op}: {steps.max()} bfloat16 steps from the reference at {arrays[0][steps.argmax()]}")
        for actual, expected, what in checks:
            try:
                assert_close(actual, expected, bitwise=True)
            except AssertionError as e:
                failures.append(f"{op}: {what}: {str(e).splitlines()[0]}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_every_single_op_kernel_gives_the_fused_kernels_bits():
    """Fusion off: each op's own kernel over every bfloat16 value gives the fused kernel's bits (about
    fifty kernels to compile; test_fused_chain_rounds_after_every_op is the smaller twin run by default)."""
    graph, arrays = _every_value_graph()
    with np.errstate(all="ignore"):
        fused_out, unfused_out = lower(fused(graph), SEQUENTIAL).run(arrays), lower(graph, SEQUENTIAL).run(arrays)
    failures = []
    for k, (op, _) in enumerate(ALL_OPS):
        try:
            assert_close(fused_out[k], unfused_out[k], bitwise=True)
        except AssertionError as e:
            failures.append(f"{op}: fused != unfused: {str(e).splitlines()[0]}")
    assert not failures, "\n".join(failures)


def test_fused_chain_rounds_after_every_op():
    """An elementwise chain in one kernel gives the single-op kernels' bits and the reference's: each
    intermediate result is rounded to bfloat16, never kept in float32 across ops (as MindSpore's
    kernels round each op's output). Nine kinds of op, exact and transcendental, over every value."""
    b = GraphBuilder(dtype="bfloat16")
    x, y = b.input((1 << 16,)), b.input((1 << 16,))
    h = b.op("Add", b.op("Mul", x, y), x)
    h = b.op("Sub", b.op("RealDiv", h, y), b.const(1.5))
    out = b.op("Maximum", b.op("Mul", h, b.op("Sqrt", b.op("Abs", x))), b.op("Neg", y))
    graph = b.graph(out, b.op("Exp", b.op("Mul", h, b.const(0.25))))
    values = every_bfloat16()
    arrays = [values, np.random.default_rng(1).permutation(values)]
    with np.errstate(all="ignore"):
        want = reference(graph, arrays)
    unfused = lower(graph, SEQUENTIAL).run(arrays)
    for got, u, w in zip(lower(fused(graph), SEQUENTIAL).run(arrays), unfused, want):
        assert_close(got, u, bitwise=True)
    assert_close(unfused[0], want[0], bitwise=True)


@pytest.mark.grid
@pytest.mark.parametrize("op", ["Add", "Mul", "Maximum", "Select"])
def test_broadcast_operands(op):
    """A row and a column broadcast against each other, and a scalar constant: loaded once per
    segment, converted as every other load."""
    b = GraphBuilder(dtype="bfloat16")
    x, y = b.input((3, 1)), b.input((1, 5))
    args = (b.op("Greater", x, y), x, y) if op == "Select" else (x, y)
    out = b.op("Mul", b.op(op, *args), b.const(1.5))
    graph = b.graph(out)
    arrays = [sample("Add", (3, 1), "bfloat16"), sample("Add", (1, 5), "bfloat16", seed=1)]
    want = reference(graph, arrays)[0]
    for g in (graph, fused(graph)):
        assert_close(lower(g, SEQUENTIAL).run(arrays)[0], want, bitwise=True)


@pytest.mark.grid
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axis", [(1,), (0,), (0, 1)], ids=str)
def test_reductions_accumulate_in_float32(op, axis):
    x = random_array((7, 300), "bfloat16")
    b = GraphBuilder(dtype="bfloat16")
    graph = b.graph(b.op(op, b.input(x.shape), axis=axis))
    (want,) = reference(graph, [x])
    assert_close(want, float32_rounded(op, [x], {"axis": axis})[0], bitwise=True)
    got = lower(graph, SEQUENTIAL).run([x])[0]
    assert_close(got, want, bitwise=op != "ReduceSum")   # a sum: the kernel's order of additions


def test_a_long_sum_is_not_a_bfloat16_sum():
    """4096 values of 0.1: a bfloat16 accumulator stops growing at 32 (its step there is 0.25); float32
    accumulation gives 409.6 rounded once."""
    x = np.full((2, 4096), 0.1, BF16)
    b = GraphBuilder(dtype="bfloat16")
    graph = b.graph(b.op("ReduceSum", b.input(x.shape), axis=(1,)))
    want = np.full(2, np.float32(x[0, 0]) * 4096, np.float32).astype(BF16)
    assert_close(reference(graph, [x])[0], want, bitwise=True)
    assert_close(lower(graph, SEQUENTIAL).run([x])[0], want)


def test_fused_chain_with_reductions_equals_unfused():
    """Softmax's primitives and a sum of squares in bfloat16: one kernel each when fused, the
    single-op kernels' bits (the max and the elementwise ops) or their tolerance (the sums)."""
    b = GraphBuilder(dtype="bfloat16")
    x = b.input((6, 40))
    e = b.op("Exp", b.op("Sub", x, b.op("ReduceMax", x, axis=(1,), keep_dims=True)))
    soft = b.op("RealDiv", e, b.op("ReduceSum", e, axis=(1,), keep_dims=True))
    squares = b.op("ReduceSum", b.op("Mul", x, x), axis=(1,))
    graph = b.graph(soft, squares)
    x_arr = random_array((6, 40), "bfloat16")
    want = reference(graph, [x_arr])
    unfused = lower(graph, SEQUENTIAL).run([x_arr])
    program = lower(fused(graph), SEQUENTIAL)
    assert len(program.kernels) == 1
    for f, u, w in zip(program.run([x_arr]), unfused, want):
        assert_close(f, w)
        assert_close(u, w)


@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_accumulates_in_float32(transpose_b):
    a, c = random_array((5, 64), "bfloat16"), random_array((64, 3) if not transpose_b else (3, 64), "bfloat16", seed=1)
    b = GraphBuilder(dtype="bfloat16")
    graph = b.graph(b.op("MatMul", b.input(a.shape), b.input(c.shape), transpose_b=transpose_b))
    want = (a.astype(np.float32) @ (c.astype(np.float32).T if transpose_b else c.astype(np.float32))).astype(BF16)
    assert_close(reference(graph, [a, c])[0], want, bitwise=True)
    assert_close(lower(graph, SEQUENTIAL).run([a, c])[0], want)


@pytest.mark.parametrize("dst", ["float32", "float16", "int32", "bool"])
def test_casts_from_and_to_bfloat16_in_a_kernel(dst):
    """A Cast beside arithmetic fuses: bfloat16 -> dst and back, as ml_dtypes converts."""
    b = GraphBuilder(dtype="bfloat16")
    x = b.input((64,))
    there = b.op("Cast", b.op("Mul", x, b.const(3.0)), dtype=dst)
    graph = b.graph(there, b.op("Cast", there, dtype="bfloat16"))
    x_arr = (random_array((64,), "float32") * 40).astype(BF16)
    want = reference(graph, [x_arr])
    assert_close(want[0], (x_arr.astype(np.float32) * 3).astype(BF16).astype(dst), bitwise=True)
    program = lower(fused(graph), SEQUENTIAL)
    assert [k.variant for k in program.kernels] == ["elementwise"]
    for got, w in zip(program.run([x_arr]), want):
        assert_close(got, w, bitwise=True)


# MindSpore 2.10 on the CPU (PYNATIVE_MODE), bench/mindspore_bfloat16_check.py's inputs and the bits
# MindSpore gave (uint16 of each bfloat16 result); bfloat16 + float32 gave float32 (its values below)
MS_X = [1.0078125, -3.140625, 0.0999755859375, 300.0, -0.0, 1.00390625, 2.0e-38, 255.0]
MS_Y = [0.0078125, 2.0, 3.0, 1.5, 0.5, 1.0, 0.5, 0.00390625]
MS_BITS = {
    "Add": [16258, 49042, 16454, 17303, 16128, 16384, 16128, 17279],
    "Mul": [15361, 49353, 16026, 17377, 32768, 16256, 109, 16255],
    "RealDiv": [17153, 49097, 15625, 17224, 32768, 16256, 346, 18303],
    "Neg": [49025, 16457, 48589, 50070, 0, 49024, 32986, 50047],
    "AddScalar": [16416, 49106, 16333, 17303, 16320, 16416, 16320, 17280],
}
MS_ADD_FLOAT32 = [1.015625, -1.140625, 3.10009765625, 301.5, 0.5, 2.0, 0.5, 255.00390625]


def test_values_mindspore_2_10_gives(setting):
    """The ops MindSpore 2.10 has bfloat16 CPU kernels for give its bits here, on the reference and on
    the kernels, traced or eager; a bfloat16 tensor with a float32 one is float32, as MindSpore promotes it."""
    x = Tensor(np.array(MS_X, np.float32), ms.bfloat16)
    y = Tensor(np.array(MS_Y, np.float32), ms.bfloat16)
    got = {"Add": ops.add(x, y), "Mul": ops.mul(x, y), "RealDiv": ops.div(x, y), "Neg": ops.neg(x),
           "AddScalar": x + 1.5}
    for op, bits in MS_BITS.items():
        assert got[op].dtype == ms.bfloat16
        np.testing.assert_array_equal(got[op].asnumpy().view(np.uint16), np.array(bits, np.uint16), err_msg=op)
    mixed = ops.add(x, Tensor(np.array(MS_Y, np.float32)))
    assert mixed.dtype == ms.float32
    np.testing.assert_array_equal(mixed.asnumpy(), np.array(MS_ADD_FLOAT32, np.float32))
