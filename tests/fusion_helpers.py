"""Helpers for the fusion tests: graphs built with ir.GraphBuilder, run on the reference, fused.

    g = GraphBuilder(t(4, 4)); (x,) = g.inputs
    graph = g.graph(g.op("Mul", x, g.const(2.0)))
    basic, composite = fuse_all(graph, options())
"""
from __future__ import annotations

import numpy as np

from ir.dtypes import DType
from ir.builder import GraphBuilder
from ir.graph import Graph, TensorType, Value
from ir.interpret import interpret as ir_interpret
from ir.verify import verify as ir_verify
from graphkernel.settings.flags import parse_flags
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.pass_context import FusionLog, PassContext
from graphkernel.passes.basic_fusion import basic_fusion
from graphkernel.passes.composite_fusion import composite_fusion
from graphkernel.passes.fusion_utils import kernel_count

F32, F16 = DType.float32, DType.float16


def options(flags: str = "", opt_level: int | None = None, core_num: int = 32,
            switched_off: tuple[str, ...] = ()) -> CompileOptions:
    """Fusion on, with these graph_kernel_flags and the fusion_switch_file names turned off."""
    text = flags + (f" --opt_level={opt_level}" if opt_level is not None else "")
    return CompileOptions(enable_graph_kernel=True, flags=parse_flags(text, read_env=False),
                          core_num=core_num, fusion_switch_off=frozenset(switched_off))


def fusion_log() -> FusionLog:
    """The decisions of the passes this test ran by hand (tests/conftest.py opens a PassContext per test)."""
    return PassContext.current().log


def t(*shape: int, dtype: DType = F32) -> TensorType:
    return TensorType(tuple(shape), dtype)


def interpret(graph: Graph, arrays) -> list[np.ndarray]:
    """The numpy reference (composites through their subgraphs)."""
    return list(ir_interpret(graph, list(arrays)))


def verify(graph: Graph) -> None:
    ir_verify(graph)


def fuse_all(graph: Graph, opts: CompileOptions) -> tuple[Graph, Graph]:
    """(after basic fusion, after composite fusion), each verified."""
    basic = basic_fusion(graph, opts)
    verify(basic)
    composite = composite_fusion(basic, opts)
    verify(composite)
    return basic, composite


def composites(graph: Graph) -> list:
    return [n for n in graph.nodes if n.op == "Composite"]


def ops_of(node) -> list[str]:
    return [n.op for n in node.subgraph.nodes if n.op != "Const"]


def random_inputs(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.shape).astype(v.dtype.np) for v in graph.inputs]


__all__ = ["F32", "F16", "options", "t", "interpret", "verify", "fuse_all", "composites",
           "ops_of", "random_inputs", "kernel_count", "softmax", "layer_norm", "gelu", "bert_layer"]


# --- expanded composite ops, written by hand as the expanders produce them ---

def softmax(g: GraphBuilder, x: Value, axis: int = -1) -> Value:
    m = g.op("ReduceMax", x, axis=(axis,), keep_dims=True)
    e = g.op("Exp", g.op("Sub", x, m))
    s = g.op("ReduceSum", e, axis=(axis,), keep_dims=True)
    return g.op("RealDiv", e, s)


def layer_norm(g: GraphBuilder, x: Value, gamma: Value, beta: Value, eps: float = 1e-7) -> Value:
    n = x.shape[-1]
    dtype = x.dtype
    mean = g.op("Mul", g.op("ReduceSum", x, axis=(-1,), keep_dims=True), g.const(1.0 / n, dtype))
    centered = g.op("Sub", x, mean)
    var = g.op("Mul", g.op("ReduceSum", g.op("Mul", centered, centered), axis=(-1,), keep_dims=True),
               g.const(1.0 / n, dtype))
    inv = g.op("Rsqrt", g.op("Add", var, g.const(eps, dtype)))
    return g.op("Add", g.op("Mul", g.op("Mul", centered, inv), gamma), beta)


def gelu(g: GraphBuilder, x: Value) -> Value:
    dtype = x.dtype
    cube = g.op("Mul", g.op("Mul", x, x), x)
    inner = g.op("Mul", g.op("Add", x, g.op("Mul", cube, g.const(0.044715, dtype))),
                 g.const(0.7978845608028654, dtype))
    return g.op("Mul", g.op("Mul", x, g.const(0.5, dtype)),
                g.op("Add", g.op("Tanh", inner), g.const(1.0, dtype)))


def bert_layer(batch: int = 2, seq: int = 8, hidden: int = 64, heads: int = 4):
    """A BERT encoder layer (attention, LayerNorm, GeLU feed-forward) with its composite ops unexpanded."""
    d = hidden // heads
    g = GraphBuilder(t(batch * seq, hidden), *[t(hidden, hidden), t(hidden)] * 4, t(hidden), t(hidden),
                t(hidden, 4 * hidden), t(4 * hidden), t(4 * hidden, hidden), t(hidden), t(hidden), t(hidden))
    x, wq, bq, wk, bk, wv, bv, wo, bo, g1, b1, w1, c1, w2, c2, g2, b2 = g.inputs

    def split_heads(v):
        return g.op("Transpose", g.op("Reshape", v, shape=(batch, seq, heads, d)), perm=(0, 2, 1, 3))

    q, k, v = (split_heads(g.op("BiasAdd", g.op("MatMul", x, w), b)) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
    probs = g.op("Softmax", g.op("Mul", g.op("BatchMatMul", q, k, transpose_b=True), g.const(d ** -0.5)))
    ctx = g.op("Reshape", g.op("Transpose", g.op("BatchMatMul", probs, v), perm=(0, 2, 1, 3)),
               shape=(batch * seq, hidden))
    h1 = g.ops("LayerNorm", g.op("Add", g.op("BiasAdd", g.op("MatMul", ctx, wo), bo), x), g1, b1)[0]
    ff = g.op("GeLU", g.op("BiasAdd", g.op("MatMul", h1, w1), c1))
    out = g.ops("LayerNorm", g.op("Add", g.op("BiasAdd", g.op("MatMul", ff, w2), c2), h1), g2, b2)[0]
    return g.graph(out)
