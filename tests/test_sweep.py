"""The systematic sweep over what the kernel generator distinguishes (tests/sweep_cases.py).

Every case is marked `sweep`: a default run takes the share of them that the commit's seed picks,
`--sweep=all` runs them all (about 20 minutes on 2 cores from a cold kernel cache). The coverage
tests below are cheap and always run: they prove that the cases are pairwise and that they reach
every kernel variant and thread mode the lowering can choose.
"""
from __future__ import annotations

import math

import pytest

from kernels import aicore
from kernels.layout import describe
from kernels.launch import choose_launch, work_weight
from tests import sweep_cases as sc
from tests.sweep_run import elementwise_graph, programs, reduce_graph, run_elementwise_case, run_reduce_case

pytestmark = pytest.mark.filterwarnings("error::kernels.KernelBuildWarning")

REDUCE_CASES = sc.reduce_cases()
ELEMENTWISE_CASES = sc.elementwise_cases()


@pytest.mark.sweep
@pytest.mark.parametrize("case", REDUCE_CASES, ids=lambda c: c.id)
def test_reduction(case):
    run_reduce_case(case)


@pytest.mark.sweep
@pytest.mark.parametrize("case", ELEMENTWISE_CASES, ids=lambda c: c.id)
def test_elementwise(case):
    run_elementwise_case(case)


# --- the design itself -------------------------------------------------------------------------

def test_reductions_are_the_full_product_crossed_pairwise():
    full = {(c.reduction, c.rank, c.axes, c.keep_dims, c.dtype) for c in REDUCE_CASES}
    assert len(full) == len(REDUCE_CASES) - len(sc.LAUNCH_CASES) == 4 * 26 * 2 * 2
    rows = [(c.reduction, (c.rank, c.axes), c.keep_dims, c.dtype, c.operand, c.consumer, c.size, c.core_num,
             c.dims) for c in REDUCE_CASES]
    values = {"reduction": sc.REDUCTIONS, "axes": tuple(sc.canonical_axis_sets()), "keep_dims": (True, False),
              "dtype": sc.DTYPES, "operand": sc.OPERANDS, "consumer": sc.CONSUMERS, "size": tuple(sc.SIZES),
              "core_num": sc.CORE_NUMS, "dims": sc.DIMS}
    assert sc.missing_pairs(rows, sc.REDUCE_FACTORS, values) == []
    spellings = {("canonical" if c.spelled_axes == c.axes else "all" if c.spelled_axes == () else "negative")
                 for c in REDUCE_CASES}
    assert spellings == {"canonical", "negative", "all"}


def test_elementwise_cases_hold_every_pattern_crossed_pairwise():
    patterns = {c.pattern for c in ELEMENTWISE_CASES}
    assert len(patterns) == sum(4 ** r for r in range(6))
    # a scalar (rank 0) has one pattern and no sizes: pairs are asked of ranks 1-5
    rows = [(c.rank, c.dtype, c.chain, c.aliasing, c.size, c.core_num, c.dims) for c in ELEMENTWISE_CASES if c.rank]
    values = {"rank": (1, 2, 3, 4, 5), "dtype": sc.DTYPES, "chain": sc.CHAINS, "aliasing": sc.ALIASING,
              "size": sc.EW_SIZES, "core_num": sc.CORE_NUMS, "dims": sc.DIMS}
    assert sc.missing_pairs(rows, sc.EW_PAIRED, values) == []


def test_sizes_sit_on_the_side_of_the_threshold_they_name():
    for case in REDUCE_CASES:
        shape = case.shape()
        n = math.prod(shape)
        reduced = math.prod(shape[a] for a in case.axes)
        if case.size == "tiny":
            assert max(shape) <= 3
        elif case.size == "long":
            assert max(shape[a] for a in case.axes) >= sc.SPLIT_ROW
        elif case.size == "blocks":
            assert 2 * aicore.MIN_ELEMENTS_PER_BLOCK < n < aicore.PARALLEL_MIN_ELEMENTS, case.id
        elif case.size == "heavy":
            assert aicore.PARALLEL_MIN_ELEMENTS // 4 < n < aicore.PARALLEL_MIN_ELEMENTS // 3, case.id
        elif case.size == "parallel":
            assert n > aicore.PARALLEL_MIN_ELEMENTS, case.id
        elif case.size == "lanes":
            assert max(shape[a] for a in case.axes) in (63, 65, sc.SWEEP_CHUNK - 1, sc.SWEEP_CHUNK + 1)
        assert reduced >= 1


def _launches(graph, core_num, thresholds=(aicore.PARALLEL_MIN_ELEMENTS, 0)):
    """(variant, parallel, multi-block) of every kernel each program of a case would launch, without
    compiling anything: the lowering's own choice (kernels.lower.choose_launch, work_weight)."""
    found = set()
    _, graphs = programs(graph, core_num)
    for g in graphs.values():
        subs = [n.subgraph for n in g.nodes if n.subgraph is not None] or []
        for sub in subs:
            spec, sizes = describe(sub)
            variant, block_dim, _, _ = choose_launch(spec, sizes, core_num)
            for threshold in thresholds:
                parallel = aicore.launch_threads(block_dim, math.prod(sizes), threshold, work_weight(spec)) > 1
                found.add((variant, parallel, block_dim > 1))
    return found


def test_every_kernel_variant_and_thread_mode_is_reached(monkeypatch):
    """The cases reach rows, columns, split and elementwise kernels, each with one block, several
    blocks on one thread, and several blocks over the pool's threads."""
    monkeypatch.setattr(aicore, "host_threads", lambda: 2)   # a one-core machine reaches the same cases
    found = set()
    for case in REDUCE_CASES:
        if case.size != "small":
            found |= _launches(reduce_graph(case)[0], case.core_num)
    for case in ELEMENTWISE_CASES:
        if case.size != "small":
            found |= _launches(elementwise_graph(case)[0], case.core_num)
    want = {(v, p, m) for v in ("elementwise", "rows", "columns", "split")
            for p, m in ((False, False), (False, True), (True, True))}
    assert want - found == set()


def test_heavy_cases_sit_on_both_sides_of_the_weighted_threshold(monkeypatch):
    """Below PARALLEL_MIN_ELEMENTS points, a kernel whose work per point makes up the rest launches over
    the threads and a light one does not: the "heavy" cases hold both, rows and elementwise."""
    monkeypatch.setattr(aicore, "host_threads", lambda: 2)
    found = set()
    for case in REDUCE_CASES:
        if case.size == "heavy" and case.core_num > 1:
            found |= {("reduce", v == "elementwise", p) for v, p, _ in
                      _launches(reduce_graph(case)[0], case.core_num, (aicore.PARALLEL_MIN_ELEMENTS,))}
    for case in ELEMENTWISE_CASES:
        if case.size == "heavy" and case.core_num > 1:
            found |= {("elementwise", True, p) for _, p, _ in
                      _launches(elementwise_graph(case)[0], case.core_num, (aicore.PARALLEL_MIN_ELEMENTS,))}
    assert {("reduce", False, True), ("reduce", False, False), ("elementwise", True, True),
            ("elementwise", True, False)} <= found, found


def test_dynamic_cases_change_launch_choices_within_one_compile():
    """The dynamic cases' kernels, compiled once for symbolic sizes, launch differently at the sizes they
    run at (kernels/plan.py chooses per call): a variant and a block_dim that change within one compile."""
    from ir.symbolic import evaluate
    variants, block_dims = False, False
    for case in REDUCE_CASES:
        if case.dims != "dynamic":
            continue
        hints = {f"d{a}": case.shape()[a] for a in case.dynamic_axes}
        _, graphs = programs(reduce_graph(case)[0], case.core_num)
        for g in graphs.values():
            for sub in [n.subgraph for n in g.nodes if n.subgraph is not None]:
                spec, sizes = describe(sub)
                launches = {choose_launch(spec, tuple(evaluate(d, s) for d in sizes), case.core_num)[:2]
                            for s in [hints] + case.other_sizes()}
                variants |= len({v for v, _ in launches}) > 1
                block_dims |= len({b for _, b in launches}) > 1
    assert variants and block_dims
