"""The AI Core model is exercised: blocks cover exactly their share, tiles with their live data fit the UB.

The generated source is plain Python, so the grid can be run without numba, block by block, over
arrays that count the writes to every element: each output element must be written exactly once
whatever block_dim and tile are.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kernels import aicore
from kernels.lanes import PYTHON as LANES_IN_PYTHON
from kernels.views import PYTHON as VIEWS_IN_PYTHON
from kernels.codegen import render
from kernels.compile import kernel_globals
from kernels.layout import describe
from kernels.reduction import split_partials
from kernels.launch import choose_launch
from ir import GraphBuilder
from tests.kernel_graphs import random_array, reference
from tests.test_kernels_reduce import layer_norm, softmax, sum_of_squares


@given(total=st.integers(0, 10_000), block_dim=st.integers(1, 64))
@settings(deadline=None, max_examples=200)
def test_block_ranges_partition_the_work(total, block_dim):
    spans = [aicore.block_range(total, block_dim, b) for b in range(block_dim)]
    assert spans[0][0] == 0 and spans[-1][1] == total
    assert all(spans[k][1] == spans[k + 1][0] for k in range(block_dim - 1))
    sizes = [e - s for s, e in spans]
    assert max(sizes) - min(sizes) <= 1


def test_block_dim_bounds():
    assert aicore.block_dim_for(16, 32) == 1  # small: one block, no parallel launch
    assert aicore.block_dim_for(16 * 1024 * 1024, 32) == 32
    assert aicore.block_dim_for(16 * 1024 * 1024, 7) == 7
    assert aicore.block_dim_for(10 ** 9, 32, single_core=True) == 1


def test_small_launches_keep_their_blocks_on_one_thread():
    """block_dim is the emulated device's; host threads join only when there is enough work."""
    big = aicore.PARALLEL_MIN_ELEMENTS
    assert aicore.launch_threads(8, big // 4) == 1
    assert aicore.launch_threads(1, 100 * big) == 1
    assert aicore.launch_threads(8, big) == min(8, aicore.host_threads())
    assert aicore.launch_threads(8, 10, min_elements=0) == min(8, aicore.host_threads())


def test_lowering_follows_launch_threads():
    from kernels import DeviceConfig, lower
    from ir import GraphBuilder
    b = GraphBuilder()
    x = b.input((256, 1024))
    g = b.graph(b.op("Add", x, b.const(1.0)))
    small, forced = lower(g, DeviceConfig()), lower(g, DeviceConfig(parallel_min_elements=0))
    assert small.kernels[0].block_dim == forced.kernels[0].block_dim > 1
    assert small.steps[0].threads == 1
    assert forced.steps[0].threads == min(forced.kernels[0].block_dim, aicore.host_threads())


# kernels.mathfn's, kernels.lanes' and kernels.views' functions are numba intrinsics: in pure Python,
# numpy stands in for the first, kernels.lanes.PYTHON and kernels.views.PYTHON (their plain-Python
# semantics) for the others
PURE_PYTHON_MATH = {"exp_f32": lambda x: np.exp(np.float32(x)), "log_f32": lambda x: np.log(np.float32(x)),
                    "tanh_f32": lambda x: np.tanh(np.float32(x)),
                    "erf_f32": lambda x: np.float32(math.erf(float(x))), **LANES_IN_PYTHON,
                    **VIEWS_IN_PYTHON}


class Counting:
    """A flat array view that counts writes per element of its base."""

    def __init__(self, data, counts, offset=0, step=1):
        self.data, self.counts, self.offset, self.step = data, counts, offset, step

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.data))
            return Counting(self.data[index], self.counts, self.offset + start * self.step, self.step * step)
        return self.data[index]

    def __setitem__(self, index, value):
        self.data[index] = value
        self.counts[self.offset + int(index) * self.step] += 1

    def __len__(self):
        return len(self.data)


def run_in_python(graph, arrays, block_dim, tile):
    spec, sizes = describe(graph)
    variant, _, default_tile, lanes = choose_launch(spec, sizes, 32)
    name, source = render(spec, variant)
    namespace = {**kernel_globals(), **PURE_PYTHON_MATH}
    source = "\n".join(line for line in source.splitlines() if not line.startswith("from kernels."))
    exec(source, namespace)
    outs = [np.full(v.type.size, np.nan, v.dtype.np) for v in graph.outputs]
    counts = [np.zeros(o.size, np.int64) for o in outs]
    ins = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    tile = default_tile if variant == "split" else tile  # the split chunk is fixed by design
    kernel, wrapped = namespace[name], [Counting(o, c) for o, c in zip(outs, counts)]
    parts = [np.full(n, np.nan, d.np) for d, n in split_partials(spec, sizes, tile)] if variant == "split" else []
    fold = (0,) if parts else ()
    for blk in reversed(range(block_dim)):   # a launch over threads calls the kernel per chunk of blocks,
        kernel(*ins, *wrapped, *parts, *sizes, block_dim, tile, lanes, blk, blk + 1, *fold)   # in any order
    if parts:
        kernel(*ins, *wrapped, *parts, *sizes, block_dim, tile, lanes, 0, 0, 1)   # the fold
    return [o.reshape(v.shape) for o, v in zip(outs, graph.outputs)], counts, variant


def elementwise_graph():
    b = GraphBuilder()
    x, row, col = b.input((5, 7)), b.input((7,)), b.input((5, 1))
    return b.graph(b.op("Add", b.op("Mul", x, row), col), b.op("Mul", col, b.const(2.0)))


GRAPHS = {"elementwise": elementwise_graph, "softmax_rows": lambda: softmax((6, 9), (1,)),
          "softmax_columns": lambda: softmax((6, 20), (0,)), "layer_norm": lambda: layer_norm((4, 10)),
          "sum_middle": lambda: sum_of_squares((3, 4, 5), (1,)).nodes[0].subgraph,
          "sum_middle_columns": lambda: sum_of_squares((3, 4, 150), (1,)).nodes[0].subgraph}


@pytest.mark.parametrize("block_dim,tile", [(1, 1000), (3, 4), (7, 1), (32, 3)])
@pytest.mark.parametrize("label", list(GRAPHS))
def test_every_output_element_written_exactly_once(label, block_dim, tile):
    graph = GRAPHS[label]()
    arrays = [random_array(v.shape, seed=k) for k, v in enumerate(graph.inputs)]
    outs, counts, _ = run_in_python(graph, arrays, block_dim, tile)
    for c, v in zip(counts, graph.outputs):
        full = v.type.size
        # an output broadcast along a kept axis is rewritten by every unit with the same value
        assert c.min() >= 1 and (c.max() == 1 or full < math.prod(graph.inputs[0].shape))
    for got, want in zip(outs, reference(graph, arrays)):
        np.testing.assert_allclose(got, want, rtol=3e-5, atol=1e-6)


def test_split_chunks_cover_the_row_once():
    graph = sum_of_squares((40, 1024)).nodes[0].subgraph
    a = random_array((40, 1024))
    outs, counts, variant = run_in_python(graph, [a], 7, 0)
    assert variant == "split" and counts[0].tolist() == [1]
    np.testing.assert_allclose(outs[0], np.sum(a.astype(np.float64) ** 2), rtol=1e-5)


@pytest.mark.parametrize("label", list(GRAPHS))
@pytest.mark.parametrize("scale", [1, 1000])
def test_tiles_with_live_data_fit_the_ub(label, scale):
    graph = GRAPHS[label]()
    spec, sizes = describe(graph)
    sizes = tuple(s * scale for s in sizes)
    variant, block_dim, tile, _ = choose_launch(spec, sizes, 32)
    live = sum(d.itemsize for d, _ in spec.inputs + spec.outputs) + 4 * len(spec.op_names)
    row = math.prod(s for s, r in zip(sizes, spec.reduce_axes) if r) if spec.has_reduce else 1
    elements = tile if variant != "rows" else tile * row
    if variant != "rows" or row * live <= aicore.UB_BYTES:  # a row larger than the UB is stitched
        assert elements * live <= aicore.UB_BYTES
    assert elements * aicore.ALIGN_BYTES // aicore.ALIGN_BYTES == elements
    assert 1 <= block_dim <= 32


def test_a_specs_cached_facts_leave_its_value_and_key_alone():
    """KernelSpec computes its launch facts once per instance (kernels/layout.py): asked before or after,
    equality, hash, key and a pickled copy (what a background build receives) stay those of its fields."""
    import pickle
    spec, _ = describe(layer_norm((4, 16)))
    fresh, _ = describe(layer_norm((4, 16)))
    key, text = hash(fresh), fresh.key()
    facts = (spec.has_reduce, spec.op_names, spec.op_in_dtypes, spec.num_passes)
    assert spec.op_names is spec.op_names       # computed once
    assert spec == fresh and hash(spec) == key and spec.key() == text
    copy = pickle.loads(pickle.dumps(spec))
    assert copy == spec and copy.key() == text
    assert (copy.has_reduce, copy.op_names, copy.op_in_dtypes, copy.num_passes) == facts
    assert ("ReduceSum", "float32") in spec.op_in_dtypes
