"""Property test: the gradients of random differentiable programs (the fusion property test's generator,
with a scalar loss over every output) agree: the reference interpreter, the emulated device unfused and
the emulated device fused at every opt_level, within float32 tolerance; every graph verifies and no
Gradient node survives the pipeline."""
import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from fuzz_helpers import fuzz_settings
from fusion_helpers import interpret, options, random_inputs
from test_fusion_property import random_graph
from tolerance import assert_close
from graphkernel.compiler import compile_graph
from graphkernel.settings.options import CompileOptions
from ir import GraphBuilder, print_graph
from ir.autodiff import differentiate
from ir.graph import Graph


def with_loss_gradient(graph: Graph, weights_seed: int) -> Graph:
    """`graph`'s outputs, a loss sum(out_k * w_k) over them, and its gradient with respect to every input."""
    rng = np.random.default_rng(weights_seed)
    b = GraphBuilder(*[v.type for v in graph.inputs])
    values = dict(zip(graph.inputs, b.inputs))
    for node in graph.nodes:
        new = b.add(node.replace(inputs=tuple(values[v] for v in node.inputs)))
        values.update(zip(node.outputs, new.outputs))
    outputs = [values[v] for v in graph.outputs]
    loss = None
    for out in outputs:
        w = b.const(rng.uniform(-1, 1, out.shape), out.dtype)
        term = b.reduce("ReduceSum", b.op("Mul", out, w), (), keep_dims=False)
        loss = term if loss is None else b.op("Add", loss, term)
    grads = b.ops("Gradient", loss, *b.inputs, seeds=1)
    return b.graph(loss, *grads)


PROGRAMS = (random_graph(), st.sampled_from(["", "--opt_level=3", "--opt_level=1"]), st.integers(0, 3))


@pytest.mark.twin   # of the 80-example run below
@fuzz_settings(5)
@given(*PROGRAMS)
def test_gradients_fused_equal_unfused_equal_reference(graph, flags, seed):
    check(graph, flags, seed)


@pytest.mark.slow
@fuzz_settings(80)
@given(*PROGRAMS)
def test_gradients_fused_equal_unfused_equal_reference_long(graph, flags, seed):
    check(graph, flags, seed)


def check(graph, flags, seed):
    program = with_loss_gradient(graph, seed)
    note(print_graph(program))
    arrays = random_inputs(graph, seed=seed)
    want = interpret(differentiate(program), arrays)
    unfused = compile_graph(program, CompileOptions(), eager=True)
    fused = compile_graph(program, options(flags), eager=True)
    for compiled in (unfused, fused):
        assert not any(n.op == "Gradient" for n in compiled.graph.nodes)
        for got, ref in zip(compiled.run_arrays(arrays), want):
            assert_close(got, ref)
    assert fused.kernel_count <= unfused.kernel_count
