"""The systematic sweep: cases over everything the kernel generator distinguishes (tests/test_sweep_*.py).

Reductions: the full product of
    reduction   ReduceSum, ReduceMax, ReduceMin, ReduceMean (expanded into ReduceSum and a divide)
    axes        every canonical axis set of ranks 1-4 (all axes included), spelled in turn canonically,
                with negative axes, or as () for all axes
    keep_dims   True, False
    dtype       float32, float16
crossed pairwise (every pair of values of any two factors appears in some case) with
    operand     input | scalar_chain (x * 2 - 0.8125) | broadcast_chain (x + b, b broadcast) |
                escaping (x * 1.5 + 0.25, also an output of the graph)
    consumer    none | elementwise (r * 3 + 1) | broadcast_back (t - r, as Softmax/LayerNorm) |
                second (e = tanh(t - r), s = R(e), e * s: a second reduction, three passes, a stash) |
                sibling (R(|x| - 0.5), independent of r over the same axes: one multi-output kernel by
                sibling fusion)
    size        SIZES: each on one side of a threshold of kernels/lower.py or kernels/aicore.py
    core_num    1, 2, 32
    dims        static | dynamic: some dims symbolic sizes (ir/symbolic.py: the innermost reduced axis, a
                kept one or all), the graph compiled once and run at the case's shape, at 1 and at an
                odd size (the launch choices made per call: a long row that splits at its own size is
                rows at the odd one)

Elementwise: every broadcast pattern of two operands over ranks 0-5 (per axis: both present, only
one present, or neither: a size-1 axis), crossed pairwise with the chain (arithmetic, select, transcendental,
or random: a Dropout between fusible ops, its mask regenerated from counters), the dtype, aliasing (the
same value as both operands, or the same array passed for both inputs), size, core_num and dims (the
last, the first or every present axis symbolic, run at three sizes as above).

Data are dyadic (k / 8, |k| <= 16), so every chain and every sum short enough is exact: the sweep
demands bit-for-bit equality with the numpy reference wherever the result is exact, and the dtype's
tolerance only after a rounding that two correct programs may order differently (tests/tolerance.py).
"""
from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass

import numpy as np

from ir.symbolic import Dim
from kernels import aicore
from kernels.launch import COLUMN_LANES, COLUMN_MIN
from kernels.reduction import SWEEP_CHUNK

REDUCTIONS = ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean")
DTYPES = ("float32", "float16")
OPERANDS = ("input", "scalar_chain", "broadcast_chain", "escaping")
CONSUMERS = ("none", "elementwise", "broadcast_back", "second", "sibling")
CORE_NUMS = (1, 2, 32)
DIMS = ("static", "dynamic")
SPLIT_ROW = 2 * aicore.REDUCE_CHUNK_ELEMENTS   # a row at least this long over few units splits

# size classes: extents of the reduced and kept axes, each class on one side of a threshold
SIZES = {
    "tiny": "every axis 1, 2 or 3: size-1 axes collapse, reductions over them are identities",
    "small": "short odd rows, many units per UB tile, one block",
    "lanes": f"the inner reduced axis around the 64 lanes and the {SWEEP_CHUNK}-element scratch chunk",
    "columns": f"the last axis around {COLUMN_MIN} (rows or columns variant) and {COLUMN_LANES} (column tiles)",
    "long": f"the inner reduced axis longer than {SPLIT_ROW} (split variant, a row past the UB tile)",
    "blocks": f"more than {2 * aicore.MIN_ELEMENTS_PER_BLOCK} elements: block_dim > 1, one thread",
    "heavy": f"a quarter of {aicore.PARALLEL_MIN_ELEMENTS} elements: a parallel launch when the work per "
             "element (passes, transcendentals, divides: kernels.lower.work_weight) makes up the rest, one "
             "thread otherwise",
    "parallel": f"more than {aicore.PARALLEL_MIN_ELEMENTS} elements: a parallel launch",
}


def canonical_axis_sets(max_rank: int = 4) -> list[tuple[int, tuple[int, ...]]]:
    """(rank, axes) for every non-empty subset of the axes of ranks 1..max_rank."""
    return [(r, axes) for r in range(1, max_rank + 1)
            for k in range(1, r + 1) for axes in itertools.combinations(range(r), k)]


def stable_int(*parts) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


def pairwise(base: list[tuple], base_names: tuple[str, ...], extra: dict[str, tuple],
             cost=lambda combo: 0) -> list[tuple]:
    """Each base row extended with one value per extra factor, greedily, so that every pair of values
    of two factors (base with extra, extra with extra) appears in some row. Deterministic. Only the
    first len(base_names) fields of a base row take part in pairs (a row may carry more). Among
    combinations that cover as many new pairs, the one of least `cost` wins: once every pair is
    covered, the remaining rows take the cheapest sizes; ties go to the first in a fixed rotation.

    Scored for every combination at once: uncovered[(j, k)][a, b] marks the pairs of extra factors j, k
    not yet covered, and a row's pairs with extra value v of factor j count per (j, v)."""
    names = list(extra)
    index = [{v: i for i, v in reversed(list(enumerate(extra[n])))} for n in names]   # a value's first place
    combos = list(itertools.product(*(extra[n] for n in names)))
    codes = np.array([[index[j][v] for j, v in enumerate(c)] for c in combos], dtype=np.int64).reshape(
        len(combos), len(names))
    ranks = np.unique([cost(c) for c in combos], return_inverse=True)[1].reshape(-1)   # lower: cheaper
    uncovered = {(j, k): np.ones((len(extra[names[j]]), len(extra[names[k]])), dtype=bool)
                 for j in range(len(names)) for k in range(j + 1, len(names))}
    covered_base: set = set()
    rows = []
    for n, row in enumerate(base):
        new = np.zeros(len(combos), dtype=np.int64)
        for (j, k), table in uncovered.items():
            new += table[codes[:, j], codes[:, k]]
        for j, name in enumerate(names):
            fresh = np.array([sum((base_names[i], b, name, v) not in covered_base
                                  for i, b in enumerate(row[:len(base_names)])) for v in extra[name]])
            new += fresh[codes[:, j]]
        start = stable_int("pairwise", n) % len(combos)   # ties broken by a fixed rotation
        order = np.roll(np.arange(len(combos)), -start)
        score = new[order] * (int(ranks.max()) + 1) - ranks[order]
        best = int(order[int(np.argmax(score))])            # argmax: the first of the best in the rotation
        for (j, k), table in uncovered.items():
            table[codes[best, j], codes[best, k]] = False
        for j, v in enumerate(combos[best]):
            covered_base.update((base_names[i], b, names[j], v) for i, b in enumerate(row[:len(base_names)]))
        rows.append(row + combos[best])
    return rows


def missing_pairs(rows: list[tuple], names: tuple[str, ...], values: dict[str, tuple]) -> list[tuple]:
    """Pairs of factor values (among `names`) that no row holds: empty when the design is pairwise."""
    seen = {(i, row[i], j, row[j]) for row in rows for i in range(len(names)) for j in range(i + 1, len(names))}
    missing = []
    for i, j in itertools.combinations(range(len(names)), 2):
        for a in values[names[i]]:
            for b in values[names[j]]:
                if (i, a, j, b) not in seen:
                    missing.append((names[i], a, names[j], b))
    return missing


# --- reduction cases ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ReduceCase:
    reduction: str
    rank: int
    axes: tuple[int, ...]        # canonical
    keep_dims: bool
    dtype: str
    operand: str
    consumer: str
    size: str
    core_num: int
    dims: str = "static"

    @property
    def id(self) -> str:
        axes = "_".join(map(str, self.axes))
        return (f"{self.reduction[6:]}-r{self.rank}-a{axes}-{'keep' if self.keep_dims else 'drop'}-"
                f"{self.dtype[5:]}-{self.operand}-{self.consumer}-{self.size}-c{self.core_num}"
                f"{'-dyn' if self.dims == 'dynamic' else ''}")

    @property
    def dynamic_axes(self) -> tuple[int, ...]:
        """The axes a dynamic case makes symbolic: the innermost reduced one, a kept one, or all."""
        kept = [a for a in range(self.rank) if a not in self.axes]
        style = self.seed % 3
        if style == 2:
            return tuple(range(self.rank))
        return (kept[-1],) if style == 1 and kept else (max(self.axes),)

    def other_sizes(self) -> list[dict]:
        """The sizes a dynamic case runs at besides its own: every dynamic dim 1, then odd."""
        shape = self.shape()
        return other_sizes({f"d{a}": shape[a] for a in self.dynamic_axes})

    @property
    def seed(self) -> int:
        return stable_int(self.id) % (2 ** 31)

    @property
    def spelled_axes(self):
        """The axes as a user may write them: canonical, negative, or () for all axes."""
        style = self.seed % 3
        if style == 2 and len(self.axes) == self.rank:
            return ()
        if style == 1:
            return tuple(a - self.rank for a in self.axes)
        return self.axes

    def shape(self) -> tuple[int, ...]:
        return reduce_shape(self.rank, self.axes, self.size, self.seed)


REDUCE_FACTORS = ("reduction", "axes", "keep_dims", "dtype", "operand", "consumer", "size", "core_num", "dims")


def reduce_design() -> list[tuple]:
    base = [(red, (rank, axes), keep, dtype) for red in REDUCTIONS for rank, axes in canonical_axis_sets()
            for keep in (True, False) for dtype in DTYPES]
    extra = {"operand": OPERANDS, "consumer": CONSUMERS, "size": tuple(SIZES), "core_num": CORE_NUMS, "dims": DIMS}
    cost = ("small", "tiny", "columns", "lanes", "long", "blocks", "heavy", "parallel")   # run time, roughly
    return pairwise(base, REDUCE_FACTORS[:4], extra, cost=lambda combo: cost.index(combo[2]))


# cases beside the design that make sure of a launch kind the pairs do not promise together (a column
# reduction over several blocks needs its size, its axes and a core_num above 1 in one case)
LAUNCH_CASES = [
    ("ReduceSum", 2, (0,), True, "float32", "scalar_chain", "broadcast_back", "blocks", 32, "static"),
    ("ReduceMax", 3, (0, 1), False, "float32", "input", "elementwise", "blocks", 2, "static"),
    ("ReduceMean", 3, (1,), True, "float32", "escaping", "second", "parallel", 32, "static"),
    # below PARALLEL_MIN_ELEMENTS points, work heavy enough (a tanh per point) to launch over the threads
    ("ReduceSum", 2, (1,), True, "float32", "scalar_chain", "second", "heavy", 32, "static"),
]


def other_sizes(hints: dict) -> list[dict]:
    """Sizes for the symbols of `hints` besides their own: all 1, then an odd size below the hint."""
    return [{k: 1 for k in hints}, {k: max(3, (v // 3) | 1) for k, v in hints.items()}]


def reduce_cases() -> list[ReduceCase]:
    rows = [(red, rank, axes, keep, dtype, operand, consumer, size, core, dims)
            for red, (rank, axes), keep, dtype, operand, consumer, size, core, dims in reduce_design()]
    return [ReduceCase(*row) for row in rows + LAUNCH_CASES]


def _spread(total: int, n: int) -> list[int]:
    """n extents whose product is about `total`: the first takes the bulk, the others 2."""
    if n == 0:
        return []
    rest = 2 ** (n - 1)
    return [max(1, total // rest)] + [2] * (n - 1)


def reduce_shape(rank: int, axes: tuple[int, ...], size: str, seed: int) -> tuple[int, ...]:
    """Extents of the reduced and kept axes for a size class (innermost reduced axis first in bulk)."""
    rng = np.random.default_rng(seed)
    red = list(axes)
    kept = [a for a in range(rank) if a not in axes]
    dims = [0] * rank

    def fill(axes_, extents):
        # the bulk goes on the innermost axis of the group
        for a, e in zip(reversed(axes_), extents):
            dims[a] = int(e)

    if size == "tiny":
        return tuple(int(rng.integers(1, 4)) for _ in range(rank))
    if size == "small":
        fill(red, rng.choice([3, 5, 7], len(red)))
        fill(kept, rng.choice([2, 3, 4], len(kept)))
    elif size == "lanes":
        fill(red, [rng.choice([63, 65, SWEEP_CHUNK - 1, SWEEP_CHUNK + 1])] + [2] * (len(red) - 1))
        fill(kept, rng.choice([2, 3], len(kept)))
    elif size == "columns":
        for a in range(rank):
            dims[a] = int(rng.choice([3, 4]))
        dims[-1] = int(rng.choice([COLUMN_MIN - 1, COLUMN_MIN, COLUMN_MIN + 1, COLUMN_LANES - 1,
                                   COLUMN_LANES + 1]))
    elif size == "long":
        fill(red, [SPLIT_ROW + int(rng.integers(1, 5000))] + [1] * (len(red) - 1))
        fill(kept, rng.choice([1, 2, 3], len(kept)))
    elif size == "blocks":
        total = 3 * aicore.MIN_ELEMENTS_PER_BLOCK + int(rng.integers(1, 1000))
        if kept:
            fill(red, _spread(200, len(red)))
            fill(kept, _spread(total // 200, len(kept)))
        else:
            fill(red, _spread(total, len(red)))
    elif size in ("heavy", "parallel"):
        total = {"heavy": aicore.PARALLEL_MIN_ELEMENTS // 4, "parallel": aicore.PARALLEL_MIN_ELEMENTS}[size] + \
            int(rng.integers(20000, 60000))   # above what _spread's rounding may lose
        if kept:
            fill(red, _spread(1000, len(red)))
            fill(kept, _spread(total // 1000, len(kept)))
        else:
            fill(red, _spread(total, len(red)))
    else:
        raise ValueError(size)
    return tuple(dims)


# --- elementwise cases -------------------------------------------------------------------------

# per axis: which of the two operands is present (the other broadcasts along it); "none" is an axis
# of size 1 in both, which the layout drops
AXIS_PATTERNS = ("both", "x", "y", "none")
CHAINS = ("arith", "select", "transcendental", "random")
ALIASING = ("distinct", "same_value", "same_array")
EW_SIZES = ("tiny", "small", "long_row", "blocks", "heavy", "parallel")


@dataclass(frozen=True)
class ElementwiseCase:
    pattern: tuple[str, ...]
    chain: str
    dtype: str
    aliasing: str
    size: str
    core_num: int
    dims: str = "static"

    @property
    def id(self) -> str:
        pattern = "".join(p[0] for p in self.pattern) or "scalar"
        return (f"{pattern}-{self.chain}-{self.dtype[5:]}-{self.aliasing}-{self.size}-c{self.core_num}"
                f"{'-dyn' if self.dims == 'dynamic' else ''}")

    @property
    def dynamic_axes(self) -> tuple[int, ...]:
        """The axes a dynamic case makes symbolic (of those not "none"): the last, the first, or all."""
        present = [a for a, p in enumerate(self.pattern) if p != "none"]
        if not present:
            return ()
        style = self.seed % 3
        return tuple(present) if style == 2 else (present[-1],) if style == 0 else (present[0],)

    def symbolic_shapes(self) -> tuple[tuple, tuple]:
        """shapes() with the dims of dynamic_axes symbolic sizes d<axis> where the operand has the axis
        (x and y share them; the other operand keeps its 1 there)."""
        xs, ys = self.shapes()

        def sym(shape, who: str) -> tuple:
            lead = self.rank - len(shape)
            return tuple(Dim.symbol(f"d{lead + i}", n) if lead + i in self.dynamic_axes and
                         self.pattern[lead + i] in ("both", who) else n for i, n in enumerate(shape))
        if self.aliasing != "distinct":
            x = sym(xs, "x")
            return x, x
        return sym(xs, "x"), sym(ys, "y")

    def other_sizes(self) -> list[dict]:
        xs, ys = self.symbolic_shapes()
        hints = {str(d): int(d) for d in xs + ys if isinstance(d, Dim)}
        return other_sizes(hints) if hints else []

    @property
    def seed(self) -> int:
        return stable_int(self.id) % (2 ** 31)

    @property
    def rank(self) -> int:
        return len(self.pattern)

    def shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Shapes of x and y; an operand absent on the leading axes may be spelled with fewer dims."""
        rng = np.random.default_rng(self.seed)
        r = self.rank
        extents = _ew_extents(r, self.size, rng)
        x = tuple(e if p in ("both", "x") else 1 for e, p in zip(extents, self.pattern))
        y = tuple(e if p in ("both", "y") else 1 for e, p in zip(extents, self.pattern))
        if self.aliasing != "distinct":
            return x, x

        def drop_leading_ones(s):
            k = 0
            while k < len(s) and s[k] == 1 and rng.random() < 0.5:
                k += 1
            return s[k:]
        return drop_leading_ones(x), drop_leading_ones(y)


def _ew_extents(rank: int, size: str, rng) -> list[int]:
    if rank == 0:
        return []
    if size == "tiny":
        return [int(rng.integers(2, 4)) for _ in range(rank)]
    if size == "small":
        return [int(rng.choice([3, 5, 7])) for _ in range(rank)]
    if size == "long_row":   # the last axis longer than a UB tile
        return [2] * (rank - 1) + [aicore.tile_elements(4 * 4) + int(rng.integers(1, 999))]
    total = {"blocks": 3 * aicore.MIN_ELEMENTS_PER_BLOCK, "heavy": aicore.PARALLEL_MIN_ELEMENTS // 4 + 4096,
             "parallel": aicore.PARALLEL_MIN_ELEMENTS + 4096}[size]
    inner = max(2, total // 2 ** (rank - 1))
    return [2] * (rank - 1) + [inner + int(rng.integers(1, 97))]


EW_PAIRED = ("rank", "dtype", "chain", "aliasing", "size", "core_num", "dims")





def elementwise_design() -> list[tuple]:
    """(pattern, chain, dtype, aliasing, size, core_num) rows: every pattern of ranks 0-5, pairwise over
    rank and the other factors (a pattern has too few rows to pair with every value)."""
    base = [(r, pattern) for r in range(0, 6) for pattern in itertools.product(AXIS_PATTERNS, repeat=r)]
    base += [(1, pattern) for pattern in itertools.product(AXIS_PATTERNS, repeat=1)]  # rank 1 pairs with 5 sizes
    extra = {"dtype": DTYPES, "chain": CHAINS, "aliasing": ALIASING, "size": EW_SIZES, "core_num": CORE_NUMS,
             "dims": DIMS}
    cost = ("small", "tiny", "long_row", "blocks", "heavy", "parallel")   # run time, roughly
    rows = pairwise(base, ("rank",), extra, cost=lambda combo: cost.index(combo[3]))
    return [(p, chain, dtype, alias, size, core, dims) for _, p, dtype, chain, alias, size, core, dims in rows]


# beside the design: a heavy transcendental chain over several blocks (a parallel launch below
# PARALLEL_MIN_ELEMENTS points), which the pairs do not promise in one case
EW_LAUNCH_CASES = [
    (("both", "both"), "transcendental", "float32", "distinct", "heavy", 32, "static"),
]


def elementwise_cases() -> list[ElementwiseCase]:
    return [ElementwiseCase(*row) for row in elementwise_design() + EW_LAUNCH_CASES]


def dyadic(shape, dtype: str, seed: int) -> np.ndarray:
    """Values k / 8 with |k| <= 16: exact in float16 and float32, and so are short sums of them."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-16, 17, size=shape) / 8).astype(dtype)


def sum_is_exact(terms: int, magnitude: float, dtype: str, denominator: int = 16) -> bool:
    """Whether a float32 accumulation of `terms` dyadic values (|v| <= magnitude, multiples of
    1/denominator) is exact in any order: every partial sum fits the 24-bit significand."""
    del dtype  # float16 sums accumulate in float32 too
    return terms * magnitude * denominator < 2 ** 24


def elements(shape) -> int:
    return math.prod(shape)
