"""kernels.views: a view is numpy's slice of the same array, keeps its base alive, and the generated
kernels cut their segments, rows and chunks with views only (no numba slice)."""
import ast

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit

from kernels import DeviceConfig, lower
from kernels.codegen import render
from kernels.launch import choose_launch
from kernels.layout import describe
from kernels.views import PYTHON, view, view_strided
from ir import GraphBuilder
from tests.kernel_graphs import random_array, reference
from tests.test_kernels_aicore import GRAPHS
from tests.tolerance import assert_close


@njit
def _copy_of_view(a, start, count):
    return view(a, start, count).copy()


@njit
def _copy_of_strided_view(a, start, count, step):
    return view_strided(a, start, count, step).copy()


@njit
def _view_of_strided_view(a, start, count, step, start2, count2):
    return view(view_strided(a, start, count, step), start2, count2).copy()


@njit
def _write_through(a, start, count, step, value):
    v = view_strided(a, start, count, step)
    for j in range(count):
        v[j] = value


@st.composite
def strided_case(draw):
    size = draw(st.integers(1, 60))
    start = draw(st.integers(0, size - 1))
    step = draw(st.integers(1, 7))
    count = draw(st.integers(0, (size - 1 - start) // step + 1))
    return size, start, count, step


@settings(max_examples=60, deadline=None)
@given(strided_case(), st.sampled_from(["float32", "float64", "int64", "uint16", "bool"]))
def test_views_are_numpys_slices(case, dtype):
    size, start, count, step = case
    a = (np.arange(size) * 7 % 11).astype(dtype)
    want = a[start:start + count * step:step]
    np.testing.assert_array_equal(_copy_of_strided_view(a, start, count, step), want)
    np.testing.assert_array_equal(PYTHON["view_strided"](a, start, count, step), want)
    if start + count <= size:
        np.testing.assert_array_equal(_copy_of_view(a, start, count), a[start:start + count])
        np.testing.assert_array_equal(PYTHON["view"](a, start, count), a[start:start + count])
    # a view of a strided view (what a rows kernel's chunk of a strided row is)
    start2 = count // 3
    count2 = count - start2
    np.testing.assert_array_equal(_view_of_strided_view(a, start, count, step, start2, count2),
                                  want[start2:start2 + count2])


def test_writes_through_a_view_reach_the_base_and_nothing_else():
    a = np.zeros(20, np.float32)
    _write_through(a, 3, 5, 3, np.float32(2.5))
    want = np.zeros(20, np.float32)
    want[3:18:3] = 2.5
    np.testing.assert_array_equal(a, want)


def test_a_view_returned_from_a_kernel_keeps_its_base_alive():
    @njit
    def tail(a):
        return view(a, 5, 3)

    for _ in range(200):   # a view that did not own a reference to its base would free it twice
        base = np.arange(10, dtype=np.float64)
        v = tail(base)
        del base   # freed here unless the view holds it
        np.testing.assert_array_equal(v, [5.0, 6.0, 7.0])


def _strided_row_graph():
    b = GraphBuilder()
    x = b.input((3, 4, 5))
    return b.graph(b.op("ReduceSum", b.op("Mul", x, x), axis=(1,)))


KERNEL_GRAPHS = {**GRAPHS, "strided_row": _strided_row_graph}


@pytest.mark.parametrize("label", list(KERNEL_GRAPHS))
def test_generated_kernels_cut_with_views_not_slices(label):
    graph = KERNEL_GRAPHS[label]()
    spec, sizes = describe(graph)
    variant = choose_launch(spec, sizes, 32)[0]
    _, source = render(spec, variant)
    slices = [ast.unparse(node) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Slice)]
    assert not slices, f"{variant} kernel slices {slices[:3]}"
    assert "view(" in source or "view_strided(" in source
    # compiled and run, the views give the reference's numbers
    arrays = [random_array(v.shape, seed=k) for k, v in enumerate(graph.inputs)]
    outs = lower(graph, DeviceConfig()).run(arrays)
    for got, want in zip(outs, reference(graph, arrays)):
        assert_close(got, want)


def test_a_row_along_a_strided_axis_is_a_strided_view():
    spec, sizes = describe(_strided_row_graph())
    _, source = render(spec, choose_launch(spec, sizes, 32)[0])
    assert "view_strided(" in source
