"""Random graphs through the kernels: fused == unfused, both == the numpy reference.

A graph is a chain of elementwise ops over a (2, 3, 4) iteration space whose operands broadcast in
every pattern, optionally ending in a reduction and a reduce-then-broadcast-back (one composite).
Dynamic dims are one more axis: some of the space's dims are symbolic sizes (ir/symbolic.py), the
programs are lowered once and run at the hinted sizes and at two others (1 and 5 along each of them).
Fused and unfused agree bit for bit unless the graph sums: a fused kernel may not collapse the
reduced axes an operand broadcasts along, so its sum can split into lanes differently (the
dtype's tolerance is promised there; only `deterministic` promises bits, across core counts).
"""
import numpy as np
from hypothesis import given, note, settings, strategies as st

from ir import print_graph
from ir.symbolic import Dim, evaluate_shape
from ir.specialize import specialize, symbols_of
from kernels import DeviceConfig, lower
from ir import GraphBuilder
from tests.fuzz_helpers import examples
from tests.kernel_graphs import fused, random_array, reference
from tests.tolerance import assert_close

SHAPE = (2, 3, 4)
OPERAND_SHAPES = [(2, 3, 4), (4,), (3, 1), (2, 1, 4), (), (1, 3, 4)]
BINARY = ["Add", "Sub", "Mul", "Maximum", "Minimum"]
UNARY = ["Neg", "Abs", "Tanh", "Exp"]
CFG = DeviceConfig()


def symbolic(shape: tuple, dynamic: tuple) -> tuple:
    """An operand's shape (right-aligned to SHAPE) with the dims of the `dynamic` axes symbolic."""
    lead = len(SHAPE) - len(shape)
    return tuple(Dim.symbol(f"d{lead + i}", n) if lead + i in dynamic and n != 1 else n
                 for i, n in enumerate(shape))


@st.composite
def graphs(draw):
    dynamic = draw(st.sampled_from([(), (), (0,), (2,), (0, 1, 2)]))
    b = GraphBuilder()
    x = b.input(symbolic(SHAPE, dynamic))
    values = [x]
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            op = draw(st.sampled_from(UNARY))
            arg = draw(st.sampled_from(values))
            if op == "Exp":  # keep magnitudes moderate
                arg = b.op("Mul", arg, b.const(0.25))
            values.append(b.op(op, arg))
        else:
            op = draw(st.sampled_from(BINARY))
            other = (b.input(symbolic(draw(st.sampled_from(OPERAND_SHAPES)), dynamic)) if draw(st.booleans())
                     else draw(st.sampled_from(values)))
            values.append(b.op(op, draw(st.sampled_from(values)), other))
    y = values[-1]
    if y.shape != x.shape:
        y = b.op("Add", y, x)
    outputs = [y]
    if draw(st.booleans()):
        axis = draw(st.sampled_from([(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)]))
        reduce_op = draw(st.sampled_from(["ReduceSum", "ReduceMax", "ReduceMin"]))
        r = b.op(reduce_op, y, axis=axis, keep_dims=True)
        outputs = [b.op("Sub", y, r)]
        if draw(st.booleans()):  # multi-output: the reduction too, without keep_dims
            outputs.append(b.op(reduce_op, y, axis=axis))
    if draw(st.booleans()):  # an intermediate is an output as well
        outputs.append(draw(st.sampled_from(values)))
    return b.graph(*outputs)


@given(graph=graphs(), seed=st.integers(0, 3))
@settings(deadline=None, max_examples=examples(15))
def test_fused_equals_unfused_equals_reference(graph, seed):
    note(print_graph(graph))   # a failing graph's text, for tests/corpus/
    unfused_program = lower(graph, CFG)
    one = lower(fused(graph), CFG)
    assert len(one.kernels) == 1
    sums = any(n.op == "ReduceSum" for n in graph.nodes)
    names = symbols_of(graph)
    for sizes in [names] + ([{k: 1 for k in names}, {k: 5 for k in names}] if names else []):
        shapes = [evaluate_shape(v.shape, sizes) for v in graph.inputs]
        arrays = [random_array(shape, seed=seed + k) for k, shape in enumerate(shapes)]
        unfused = unfused_program.run(arrays)
        fused_out = one.run(arrays)
        want = reference(specialize(graph, sizes) if names else graph, arrays)
        for f, u, r in zip(fused_out, unfused, want):
            assert f.shape == r.shape
            assert_close(f, u, bitwise=not sums)
            assert_close(f, r, rtol_scale=20)
            assert np.isfinite(f).all()
