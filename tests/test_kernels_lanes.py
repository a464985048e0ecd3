"""kernels.lanes: the 64-lane reductions as LLVM vector code equal their plain-Python semantics (element j
into lane j % 64, each lane in order; the lanes folded in a fixed tree) bit for bit, for every op and
accumulator dtype, rows shorter and longer than the lanes, accumulated over several calls, NaN, infinities
and signed zeros included."""
import numpy as np
import pytest
from numba import njit

from kernels import lanes

IDENTITY = {"sum": lambda d: 0, "max": lambda d: -np.inf if d.kind == "f" else np.iinfo(d).min,
            "min": lambda d: np.inf if d.kind == "f" else np.iinfo(d).max}
COMPILED = {}


def compiled(op):
    """A kernel that accumulates two rows, then folds: the shape a reduction's sweeps have."""
    if op not in COMPILED:
        accumulate, fold = lanes.FUNCTIONS[f"lanes_{op}"], lanes.FUNCTIONS[f"fold_{op}"]

        @njit
        def run(acc, first, second):
            accumulate(acc, first)
            accumulate(acc, second)
            return fold(acc)
        COMPILED[op] = run
    return COMPILED[op]


def rows(dtype, n, seed):
    rng = np.random.default_rng(seed)
    if dtype.kind == "f":
        row = (rng.standard_normal(n) * 100).astype(dtype)
        special = [np.nan, -0.0, 0.0, np.inf, -np.inf]
        for k, v in enumerate(special[: n // 20]):
            row[(7 * k + 3) % n] = v
    else:
        row = rng.integers(-1000, 1000, n).astype(dtype)
    return row, row[: n // 2].copy()


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.tobytes() == b.tobytes() or (a.dtype.kind == "f" and np.array_equal(a, b, equal_nan=True))


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 128, 1000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_vector_lanes_equal_their_python_semantics(op, dtype, n):
    dtype = np.dtype(dtype)
    first, second = rows(dtype, n, seed=n)
    acc = np.full(lanes.LANES, IDENTITY[op](dtype), dtype)
    expected_acc = acc.copy()
    got = compiled(op)(acc, first, second)
    lanes.PYTHON[f"lanes_{op}"](expected_acc, first)
    lanes.PYTHON[f"lanes_{op}"](expected_acc, second)
    want = lanes.PYTHON[f"fold_{op}"](expected_acc)
    assert same(acc, expected_acc), "the lanes differ"
    assert same(np.asarray(got, dtype), np.asarray(want, dtype)), f"fold {got!r} != {want!r}"


def test_a_nan_anywhere_makes_max_and_min_nan_as_numpy():
    row = np.arange(200, dtype=np.float32)
    row[130] = np.nan
    for op, reference in (("max", np.max), ("min", np.min)):
        acc = np.full(lanes.LANES, IDENTITY[op](row.dtype), np.float32)
        assert np.isnan(compiled(op)(acc, row, row[:0])) and np.isnan(reference(row))


@njit
def _fill(acc, value):
    lanes.lanes_fill(acc, value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int32, np.uint64])
def test_fill_sets_every_lane_to_the_identity_and_nothing_past_them(dtype):
    dtype = np.dtype(dtype)
    for op in ("sum", "max", "min"):
        value = dtype.type(IDENTITY[op](dtype))
        acc = np.full(lanes.LANES + 3, 7, dtype)   # three guard elements past the lanes
        expected = acc.copy()
        _fill(acc, value)
        lanes.PYTHON["lanes_fill"](expected, value)
        assert same(acc, expected) and same(acc[:lanes.LANES], np.full(lanes.LANES, value, dtype))
        assert acc[lanes.LANES:].tolist() == [7, 7, 7]
    if dtype.kind == "f":   # a negative zero keeps its sign
        acc = np.zeros(lanes.LANES, dtype)
        _fill(acc, dtype.type(-0.0))
        assert np.signbit(acc).all()


def test_a_rows_kernel_fills_its_lanes_in_one_store():
    from kernels.codegen import render
    from kernels.layout import describe
    from tests.test_kernels_reduce import softmax
    spec, _ = describe(softmax((6, 9), (1,)))
    _, source = render(spec, "rows")
    assert source.count("lanes_fill(") == 2   # the max's lanes and the sum's
    assert f"range({lanes.LANES})" not in source
