"""Property test: random DAGs of primitives (broadcasts, reductions, scalars, several outputs).

For every generated graph, after basic, composite, recompute and parallel fusion (stitch on too):
fused values == unfused values, every graph verifies, the kernel count never grows, every composite is
one kernel by the codegen's contract, every refused candidate in the log has a reason, and fusing the
graph again gives the same dumps (.dot and IR text) after every pass.
"""
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from ir import GraphBuilder
from fusion_helpers import (F16, F32, composites, fusion_log, interpret, kernel_count, options,
                            random_inputs, t, verify)
from tolerance import assert_close
from graphkernel.passes.basic_fusion import basic_fusion
from graphkernel.passes.composite_fusion import composite_fusion
from graphkernel.passes.parallel_fusion import parallel_fusion
from graphkernel.passes.recompute import recompute
from ir import print_graph, to_dot
from kernels.fusible import unsupported_reason

FULL = (4, 8)
INPUT_SHAPES = [(4, 8), (1, 8), (4, 1), (8,), (4, 8)]
UNARY = ["Neg", "Abs", "Tanh", "Exp", "Cast"]
BINARY = ["Add", "Sub", "Mul", "Maximum", "Minimum", "RealDiv"]


@st.composite
def random_graph(draw, dtype=F32):
    n_inputs = draw(st.integers(1, 3))
    g = GraphBuilder(*(t(*INPUT_SHAPES[draw(st.integers(0, len(INPUT_SHAPES) - 1))], dtype=dtype)
                  for _ in range(n_inputs)))
    other = "float32" if dtype == F16 else "float16"
    pool = list(g.inputs)
    pick = lambda: pool[draw(st.integers(0, len(pool) - 1))]  # noqa: E731
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "scalar", "reduce", "broadcast", "select"]))
        x = pick()
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            y = g.op("Cast", g.op("Cast", x, dtype=other), dtype=dtype) if op == "Cast" else g.op(op, x)
        elif kind == "binary":
            y = g.op(draw(st.sampled_from(BINARY)), x, pick())
        elif kind == "scalar":
            y = g.op(draw(st.sampled_from(["Mul", "Add", "Sub"])), x,
                     g.const(draw(st.sampled_from([0.5, 2.0, -1.0])), dtype))
        elif kind == "reduce":
            if not x.shape:
                continue
            axis = draw(st.integers(0, len(x.shape) - 1))
            y = g.op(draw(st.sampled_from(["ReduceSum", "ReduceMax", "ReduceMin"])), x, axis=(axis,), keep_dims=True)
        elif kind == "broadcast":
            y = g.op("BroadcastTo", x, shape=FULL)
        else:
            y = g.op("Select", g.op("Greater", x, pick()), x, pick())
        pool.append(y)
    computed = pool[n_inputs:] or [g.op("Neg", pool[0])]
    outputs = [computed[-1]] + [computed[i] for i in draw(st.lists(st.integers(0, len(computed) - 1), max_size=2))]
    if draw(st.booleans()) and computed[-1].shape:
        outputs.append(g.op("ReduceSum", computed[-1], axis=(0,)))  # a reduction without keep_dims
    return g.graph(*outputs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(random_graph(), random_graph(F16)),
       st.sampled_from(["", "--opt_level=3", "--opt_level=1 --composite_op_limit_size=3"]))
def test_fusion_preserves_values_and_never_adds_kernels(graph, flags):
    note(print_graph(graph))   # a failing graph's text, for tests/corpus/
    opts = options(flags)
    arrays = random_inputs(graph, seed=1)
    want = interpret(graph, arrays)
    current, again = graph, graph
    for fusion_pass in (basic_fusion, composite_fusion, recompute, parallel_fusion):
        fused = fusion_pass(current, opts)
        again = fusion_pass(again, options(flags))
        assert to_dot(again) == to_dot(fused) and print_graph(again) == print_graph(fused), fusion_pass.__name__
        verify(fused)
        assert kernel_count(fused) <= kernel_count(current), fusion_pass.__name__
        current = fused
        for comp in composites(current):
            assert unsupported_reason(comp.subgraph) is None
            assert len([n for n in comp.subgraph.nodes if n.op != "Const"]) <= opts.flags.composite_op_limit_size
        for got, ref in zip(interpret(current, arrays), want):
            assert_close(got, ref, err_msg=fusion_pass.__name__)
    assert all(r.reason for r in fusion_log() if not r.accepted)
    assert all(len(c.outputs) >= 1 for c in composites(current))
