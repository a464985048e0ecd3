"""Composite fusion: kernel counts of the issue's workloads, flags that change them, fused == unfused."""
import numpy as np
import pytest

from graphkernel import Tensor, context
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from ir import GraphBuilder
from fusion_helpers import (fusion_log, F16, bert_layer, composites, fuse_all, gelu, interpret, kernel_count,
                            layer_norm, ops_of, options, random_inputs, softmax, t)
from tolerance import assert_close
from graphkernel.expanders import expand


def check_values(graph, fused, rtol_scale=1.0):
    arrays = random_inputs(graph, seed=3)
    for got, want in zip(interpret(fused, arrays), interpret(graph, arrays)):
        assert_close(got, want, rtol_scale=rtol_scale)


def expanded(op, *types, **attrs):
    """A graph of one composite op run through the expanders."""
    g = GraphBuilder(*types)
    opts = options()
    graph = expand(g.graph(*g.ops(op, *g.inputs, **attrs)), opts)
    return graph


def bias_gelu_graph(expander: bool):
    g = GraphBuilder(t(8, 1024), t(1024))
    x, b = g.inputs
    h = g.op("BiasAdd", x, b) if expander else g.op("Add", x, b)
    y = g.op("GeLU", h) if expander else gelu(g, h)
    graph = g.graph(y)
    return expand(graph, options()) if expander else graph


@pytest.mark.parametrize("expander", [False, True])
def test_bias_gelu_is_one_kernel(expander):
    graph = bias_gelu_graph(expander)
    _, final = fuse_all(graph, options())
    assert kernel_count(final) == 1
    check_values(graph, final)


@pytest.mark.parametrize("expander", [False, True])
def test_layer_norm_over_a_1024_row_is_one_kernel(expander):
    if expander:
        graph = expanded("LayerNorm", t(8, 1024), t(1024), t(1024))
    else:
        g = GraphBuilder(t(8, 1024), t(1024), t(1024))
        graph = g.graph(layer_norm(g, *g.inputs))
    _, final = fuse_all(graph, options())
    assert kernel_count(final) == 1
    (comp,) = composites(final)
    assert ops_of(comp).count("ReduceSum") == 2
    check_values(graph, final)


@pytest.mark.parametrize("expander", [False, True])
def test_softmax_over_a_1024_row_is_one_kernel(expander):
    if expander:
        graph = expanded("Softmax", t(8, 1024))
    else:
        g = GraphBuilder(t(8, 1024))
        graph = g.graph(softmax(g, g.inputs[0]))
    _, final = fuse_all(graph, options())
    assert kernel_count(final) == 1
    check_values(graph, final)


def test_matmul_bias_gelu_is_the_matmul_and_one_composite():
    g = GraphBuilder(t(8, 64), t(64, 256), t(256))
    x, w, b = g.inputs
    graph = expand(g.graph(g.op("GeLU", g.op("BiasAdd", g.op("MatMul", x, w), b))), options())
    opts = options()
    _, final = fuse_all(graph, opts)
    assert [n.op for n in final.nodes if n.op != "Const"] == ["MatMul", "Composite"]
    assert kernel_count(final) == 2
    assert any(not r.accepted and "MatMul is OPAQUE" in r.reason for r in fusion_log())
    check_values(graph, final)


def test_unexpanded_composite_op_is_never_fused():
    g = GraphBuilder(t(8, 32))
    (x,) = g.inputs
    graph = g.graph(g.op("Mul", g.op("Softmax", x), g.const(2.0)))
    opts = options()
    _, final = fuse_all(graph, opts)
    assert [n.op for n in final.nodes if n.op != "Const"] == ["Softmax", "Mul"]
    assert any("unexpanded composite op" in r.reason for r in fusion_log())


def test_reshape_stays_out_of_composites():
    g = GraphBuilder(t(4, 8))
    (x,) = g.inputs
    y = g.op("Reshape", g.op("Mul", x, g.const(2.0)), shape=(32,))
    graph = g.graph(g.op("Add", y, g.const(1.0)))
    opts = options()
    _, final = fuse_all(graph, opts)
    assert [n.op for n in final.nodes if n.op != "Const"] == ["Mul", "Reshape", "Add"]
    assert kernel_count(final) == 2  # a Reshape is a view, no launch
    assert any("Reshape is INJECTIVE" in r.reason for r in fusion_log())


def test_reduction_without_keep_dims_only_ends_a_kernel():
    g = GraphBuilder(t(8, 64))
    (x,) = g.inputs
    s = g.op("ReduceSum", g.op("Mul", x, x), axis=(1,))
    graph = g.graph(g.op("Mul", s, g.const(0.5)))
    opts = options()
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 2
    assert any("without keep_dims" in r.reason for r in fusion_log() if not r.accepted)
    check_values(graph, final)


def test_sum_of_squares_fuses_producer_into_reduction():
    g = GraphBuilder(t(64, 256))
    (x,) = g.inputs
    graph = g.graph(g.op("ReduceSum", g.op("Mul", x, x), axis=(0, 1)))
    _, final = fuse_all(graph, options())
    assert kernel_count(final) == 1
    check_values(graph, final)


# --- flags ---

def test_disable_cluster_ops_keeps_the_op_out():
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    graph = g.graph(g.op("Pow", g.op("Add", g.op("Mul", x, g.const(2.0)), g.const(1.0)), g.const(3.0)))
    opts = options("--disable_cluster_ops=Pow")
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 2  # {Mul, Add} and Pow
    assert any("Pow is disabled by the *_cluster_ops flags" in r.reason for r in fusion_log())
    opts = options("--disable_cluster_ops=Add")
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 3  # nothing can join Add, and Mul-Pow are not adjacent


def test_enable_cluster_ops_only():
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    graph = g.graph(g.op("Exp", g.op("Add", g.op("Mul", x, g.const(2.0)), g.const(1.0))))
    _, final = fuse_all(graph, options("--enable_cluster_ops_only=Mul,Add"))
    assert kernel_count(final) == 2


def test_composite_op_limit_size_splits_long_chains():
    g = GraphBuilder(t(4, 4))
    (x,) = g.inputs
    y = x
    for i in range(10):
        y = g.op("Add" if i % 2 else "Mul", y, g.const(1.5))
    graph = g.graph(y)
    assert kernel_count(fuse_all(graph, options())[1]) == 1
    opts = options("--composite_op_limit_size=4")
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 3  # 4 + 4 + 2
    assert all(len(ops_of(c)) <= 4 for c in composites(final))
    assert any("exceed composite_op_limit_size=4" in r.reason for r in fusion_log())
    check_values(graph, final)


def test_reduce_fuse_depth_limits_the_chain_before_a_reduction():
    g = GraphBuilder(t(8, 64))
    (x,) = g.inputs
    y = x
    for _ in range(4):
        y = g.op("Mul", y, g.const(1.1))
    graph = g.graph(g.op("ReduceSum", y, axis=(1,), keep_dims=True))
    assert kernel_count(fuse_all(graph, options())[1]) == 1
    opts = options("--reduce_fuse_depth=2")
    _, final = fuse_all(graph, opts)
    assert kernel_count(final) == 2
    assert any("exceed reduce_fuse_depth=2" in r.reason for r in fusion_log())
    check_values(graph, final)


def test_opt_level_flag_does_not_change_what_basic_and_composite_fusion_do():
    graph = bias_gelu_graph(False)
    assert kernel_count(fuse_all(graph, options(opt_level=1))[1]) == 1


def test_float16_graph_fuses_and_matches():
    g = GraphBuilder(t(8, 64, dtype=F16))
    (x,) = g.inputs
    graph = g.graph(gelu(g, x))
    _, final = fuse_all(graph, options())
    assert kernel_count(final) == 1
    arrays = random_inputs(graph)
    assert_close(interpret(final, arrays)[0], interpret(graph, arrays)[0], bitwise=True)


def test_every_refused_candidate_has_a_reason():
    graph = expanded("LayerNorm", t(2, 100000), t(100000), t(100000))
    opts = options()
    fuse_all(graph, opts)
    refused = [r for r in fusion_log() if not r.accepted]
    assert refused and all(r.reason.strip() for r in refused)
    assert all(r.stage in ("fuse_basic", "composite") for r in fusion_log())
    assert all(str(r).startswith("[") for r in fusion_log())


def test_bert_layer_keeps_matmuls_out_and_fuses_softmax_layernorm_gelu():
    graph = expand(bert_layer(), options())
    opts = options()
    _, final = fuse_all(graph, opts)
    kinds = [n.op for n in final.nodes if n.op != "Const"]
    assert kinds.count("MatMul") == 6 and kinds.count("BatchMatMul") == 2
    for comp in composites(final):
        assert not {"MatMul", "BatchMatMul", "Reshape", "Transpose"} & set(ops_of(comp))
    fused_ops = [set(ops_of(c)) for c in composites(final)]
    assert sum("Exp" in ops and "ReduceMax" in ops for ops in fused_ops) == 1      # the Softmax
    assert sum("Tanh" in ops for ops in fused_ops) == 1                            # bias + GeLU
    assert sum("Sqrt" in ops and "ReduceSum" in ops for ops in fused_ops) == 2     # the two LayerNorms
    assert kernel_count(final) < kernel_count(graph) // 2
    check_values(graph, final, rtol_scale=10)


# ---- the same counts read from cell.compile(...), through the whole pipeline (expand, simplify, fusion)

class Net(Cell):
    """A Cell whose construct is `fn(self, *inputs)` over the primitives it is given."""

    def __init__(self, fn, **prims):
        super().__init__()
        self.fn = fn
        for name, prim in prims.items():
            setattr(self, name, prim)

    def construct(self, *xs):
        return self.fn(self, *xs)


def tensors(*shapes):
    rng = np.random.default_rng(0)
    return [Tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]


CELL_COUNTS = {   # name: (construct, primitives, input shapes, kernels with fusion on)
    "bias+GeLU": (lambda s, x, b: s.gelu(s.bias_add(x, b)), dict(bias_add=P.BiasAdd(), gelu=P.GeLU()),
                  [(8, 1024), (1024,)], 1),
    "LayerNorm(1024)": (lambda s, x, g, b: s.ln(x, g, b)[0], dict(ln=P.LayerNorm()),
                        [(8, 1024), (1024,), (1024,)], 1),
    "Softmax(1024)": (lambda s, x: s.softmax(x), dict(softmax=P.Softmax()), [(8, 1024)], 1),
    "MatMul+bias+GeLU": (lambda s, x, w, b: s.gelu(s.bias_add(s.matmul(x, w), b)),
                         dict(matmul=P.MatMul(), bias_add=P.BiasAdd(), gelu=P.GeLU()),
                         [(8, 64), (64, 256), (256,)], 2),
    "diamond through MatMul": (lambda s, x, w: s.matmul(x * 2.0, w) + x * 2.0, dict(matmul=P.MatMul()),
                               [(16, 16), (16, 16)], 3),
}


@pytest.mark.parametrize("name", CELL_COUNTS)
def test_kernel_counts_read_from_cell_compile(cpu, name):
    fn, prims, shapes, fused_count = CELL_COUNTS[name]
    args = tensors(*shapes)
    unfused = Net(fn, **prims).compile(*args)
    context.set_context(enable_graph_kernel=True)
    fused = Net(fn, **prims).compile(*args)
    assert fused.kernel_count == fused_count <= unfused.kernel_count
    for got, want in zip(fused.stages["composite"].outputs, unfused.graph.outputs):
        assert got.type == want.type
    assert_close(fused(*args).asnumpy(), unfused(*args).asnumpy())
