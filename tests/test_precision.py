"""Precision modes, mixlists and customize_dtypes (CANN's options; the float16 ReduceSum case).

Graphs are built with ir.GraphBuilder and run through the precision pass directly where a test is about
placement; through a Cell on the CPU target where it is about results, context keys or dumps.
"""
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ir import GraphBuilder
from ir.errors import GraphKernelError
from ir.ops import OPS
from graphkernel import Tensor, context
from graphkernel.compiler import options_from_context
from graphkernel.context import ContextError
from graphkernel.expanders import expand
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.precision import precision
from graphkernel.precision import (PrecisionConfigError, read_customize_dtypes, read_mixlist, render_table,
                                   resolve)
from graphkernel.precision.lists import table
from graphkernel.settings.config_file import strip_line_comments
from fusion_helpers import bert_layer, options
from graphkernel.compiler import compile_graph
from ir.dtypes import DType
from pass_helpers import F16, F32, F64, I32, interpret, random_inputs, tt, verify
from tolerance import assert_close

MODES = ("must_keep_origin_dtype", "allow_fp32_to_fp16", "force_fp16", "allow_mix_precision",
         "allow_mix_precision_fp16", "allow_fp32_to_bf16", "allow_mix_precision_bf16")
BF16 = DType.bfloat16


def mm_graph():
    """x @ w + b -> Exp -> ReduceSum, and the Add's result as a second output."""
    g = GraphBuilder(tt(F32, 4, 8), tt(F32, 8, 16), tt(F32, 16))
    x, w, b = g.inputs
    y = g.op("Add", g.op("MatMul", x, w), b)
    s = g.op("ReduceSum", g.op("Exp", y), axis=(1,))
    return g.graph(s, y)


def run_pass(graph, mode, mixlist=None, customize=None):
    out = precision(graph, CompileOptions(precision_mode=mode, mixlist=mixlist, customize_dtypes=customize))
    verify(out)
    return out


def dtype_of(graph, op):
    """The dtype each `op` node computes in (its first float input, else its result)."""
    found = [n for n in graph.nodes if n.op == op]
    assert found, f"no {op} in the graph"
    return [next((v.dtype for v in n.inputs if v.dtype.is_float), n.types[0].dtype) for n in found]


def casts(graph):
    return [(n.inputs[0].node.op, n.attr("dtype")) for n in graph.nodes if n.op == "Cast"]


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---- modes -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_interface_dtypes_never_change(mode):
    g = mm_graph()
    out = run_pass(g, mode)
    assert [v.type for v in out.inputs] == [v.type for v in g.inputs]
    assert [v.type for v in out.outputs] == [v.type for v in g.outputs]


def test_must_keep_origin_dtype_changes_nothing():
    g = mm_graph()
    assert run_pass(g, "must_keep_origin_dtype") is g


def test_allow_fp32_to_fp16_lowers_only_ops_without_float32():
    out = run_pass(mm_graph(), "allow_fp32_to_fp16")
    assert dtype_of(out, "MatMul") == [F16]
    assert dtype_of(out, "Add") == dtype_of(out, "Exp") == dtype_of(out, "ReduceSum") == [F32]
    assert casts(out) == [("Input", F16), ("Input", F16), ("MatMul", F32)]


def test_force_fp16_lowers_every_op():
    out = run_pass(mm_graph(), "force_fp16")
    for op in ("MatMul", "Add", "Exp", "ReduceSum"):
        assert dtype_of(out, op) == [F16], op
    # inputs cast down once each; both outputs cast back
    assert casts(out) == [("Input", F16), ("Input", F16), ("Input", F16), ("ReduceSum", F32), ("Add", F32)]


def test_allow_mix_precision_white_black_gray():
    out = run_pass(mm_graph(), "allow_mix_precision")
    assert dtype_of(out, "MatMul") == [F16]          # white
    assert dtype_of(out, "Add") == [F16]             # gray after a white op: stays float16, no cast between
    assert dtype_of(out, "Exp") == [F32]             # black
    assert dtype_of(out, "ReduceSum") == [F32]       # gray after a black op
    add = next(n for n in out.nodes if n.op == "Add")
    assert add.inputs[0].node.op == "MatMul"
    # one cast back of the Add serves both the Exp and the graph output
    assert casts(out) == [("Input", F16), ("Input", F16), ("Input", F16), ("Add", F32)]


@pytest.mark.parametrize("fp16_mode, bf16_mode", [("allow_fp32_to_fp16", "allow_fp32_to_bf16"),
                                                   ("allow_mix_precision", "allow_mix_precision_bf16"),
                                                   ("allow_mix_precision", "allow_mix_precision_fp16")])
def test_modes_naming_bfloat16_decide_as_their_float16_twins(fp16_mode, bf16_mode):
    """CANN's allow_fp32_to_bf16 and allow_mix_precision_bf16 lower the same ops as the float16 modes,
    to bfloat16; allow_mix_precision_fp16 is allow_mix_precision spelt out."""
    low = BF16 if bf16_mode.endswith("bf16") else F16
    f16, other = run_pass(mm_graph(), fp16_mode), run_pass(mm_graph(), bf16_mode)
    for op in ("MatMul", "Add", "Exp", "ReduceSum"):
        assert dtype_of(other, op) == [low if d == F16 else d for d in dtype_of(f16, op)], op
    assert casts(other) == [(src, low if d == F16 else d) for src, d in casts(f16)]


@pytest.mark.parametrize("mode", ["allow_fp32_to_bf16", "allow_mix_precision_bf16"])
def test_bfloat16_modes_run_on_both_targets_within_bfloat16_tolerance(mode):
    """The lowered graph on the reference and on the kernels, fused: within bfloat16's tolerance of the
    float32 graph (a chain of four roundings), and the kernels equal the reference."""
    g = mm_graph()
    arrays = [a * 0.3 for a in random_inputs(g, seed=1)]
    want = interpret(g, arrays)
    lowered = run_pass(g, mode)
    got = interpret(lowered, arrays)
    for a, e in zip(got, want):
        assert_close(a.astype(BF16.np), e.astype(BF16.np), rtol_scale=4)
    device = compile_graph(lowered, options(), eager=True).run_arrays(arrays)
    for d, r in zip(device, got):
        assert_close(d, r, rtol_scale=2)


def test_gray_op_fed_only_by_graph_inputs_keeps_float32():
    g = GraphBuilder(tt(F32, 4, 4))
    (x,) = g.inputs
    out = run_pass(g.graph(g.op("Mul", x, g.const(2.0))), "allow_mix_precision")
    assert dtype_of(out, "Mul") == [F32] and casts(out) == []


@pytest.mark.parametrize("other, add_dtype", [("Neg", F16), ("Exp", F32)])
def test_gray_op_joining_float16_and_float32_paths(other, add_dtype):
    """A gray op fed by a float16 path and a gray (NEUTRAL) float32 path runs in float16; fed by a
    black-list (KEPT) float32 path it stays float32 and the float16 side is cast back."""
    g = GraphBuilder(tt(F32, 4, 4), tt(F32, 4, 4))
    x, w = g.inputs
    graph = g.graph(g.op("Add", g.op("MatMul", x, w), g.op(other, x)))
    out = run_pass(graph, "allow_mix_precision")
    assert dtype_of(out, other) == [F32] and dtype_of(out, "Add") == [add_dtype]
    cast_back = ("MatMul", F32) in casts(out)
    assert cast_back == (add_dtype == F32)


@pytest.mark.parametrize("dtype", [F16, F64])
def test_float16_and_float64_graphs_are_left_alone(dtype):
    g = GraphBuilder(tt(dtype, 4, 4))
    (x,) = g.inputs
    graph = g.graph(g.op("Exp", g.op("MatMul", x, x)))
    assert run_pass(graph, "force_fp16") == graph


@pytest.mark.parametrize("mode", MODES[1:])
def test_results_within_float16_tolerance_of_float32_reference(mode):
    g = mm_graph()
    arrays = random_inputs(g, seed=1)
    arrays = [a * 0.3 for a in arrays]  # keep exp() and the sums in a moderate range
    want = interpret(g, arrays)
    got = interpret(run_pass(g, mode), arrays)
    for a, e in zip(got, want):
        assert a.dtype == np.float32
        # a chain of four float16 roundings (inputs, MatMul, Add, Exp/ReduceSum): 4 float16 ulps
        assert_close(a.astype(np.float16), e.astype(np.float16), rtol_scale=4)


@pytest.mark.parametrize("mode", ["allow_fp32_to_fp16", "allow_mix_precision"])
def test_bert_layer_within_float16_tolerance(mode):
    """A BERT encoder layer, expanded: the black LayerNorm and Softmax keep their expansions float32
    (unnamed nodes too: the expander names their primitives `LayerNorm/...`), so nothing overflows."""
    g = expand(bert_layer(), CompileOptions())
    arrays = random_inputs(g, seed=0)
    out = run_pass(g, mode)
    assert {n.name.split("/")[0] for n in out.nodes if n.op == "ReduceSum" and n.inputs[0].dtype == F16} == set()
    assert dtype_of(out, "BatchMatMul") == [F16, F16]
    assert_close(interpret(out, arrays)[0].astype(np.float16), interpret(g, arrays)[0].astype(np.float16),
                 rtol_scale=4)


def test_cast_reads_its_input_as_it_is_under_force_fp16():
    g = GraphBuilder(tt(F32, 4, 4))
    (x,) = g.inputs
    out = run_pass(g.graph(g.op("Cast", x, dtype=I32)), "force_fp16")
    (cast,) = out.nodes                # no float16 detour: it would only lose bits
    assert cast.inputs == (x,) and cast.attr("dtype") == I32


@st.composite
def float32_graphs(draw):
    """Random graphs of 4x4 float32 values: MatMul (white), Exp (black), gray elementwise ops,
    keep-dims reductions, comparisons with Select, Casts to float16 and back."""
    g = GraphBuilder(tt(F32, 4, 4), tt(F32, 4, 4))
    values = list(g.inputs)
    for _ in range(draw(st.integers(1, 10))):
        op = draw(st.sampled_from(["MatMul", "Exp", "Add", "Mul", "Neg", "ReduceSum", "Select", "Cast"]))
        a, b = draw(st.sampled_from(values)), draw(st.sampled_from(values))
        try:
            if op in ("Exp", "Neg"):
                values.append(g.op(op, a))
            elif op == "ReduceSum":
                values.append(g.op(op, a, axis=(1,), keep_dims=True))
            elif op == "Select":
                values.append(g.op("Select", g.op("Greater", a, b), a, b))
            elif op == "Cast":
                values.append(g.op("Cast", a, dtype=draw(st.sampled_from([F16, F32]))))
            else:
                values.append(g.op(op, a, b))
        except GraphKernelError:
            continue
    return g.graph(*draw(st.lists(st.sampled_from(values[2:] or values), min_size=1, max_size=3)))


def inserted_casts(graph):
    return [n for n in graph.nodes if n.op == "Cast" and "/Cast-to-" in n.name]


@settings(deadline=None, max_examples=60)
@given(float32_graphs(), st.sampled_from(MODES))
def test_random_graphs_keep_interface_and_place_casts_once(graph, mode):
    out = run_pass(graph, mode)
    assert [v.type for v in out.outputs] == [v.type for v in graph.outputs]
    casts_made = inserted_casts(out)
    assert not any(c.inputs[0].node in casts_made for c in casts_made), "a Cast of a Cast the pass made"
    assert len({(c.inputs[0], c.attr("dtype")) for c in casts_made}) == len(casts_made), "a Cast made twice"
    has_white = any(n.op == "MatMul" for n in graph.nodes)
    if mode == "must_keep_origin_dtype" or (not has_white and mode != "force_fp16"):
        assert out == graph
    if mode == "force_fp16":
        for n in out.nodes:
            if n.op not in ("Cast", "Const"):
                assert all(v.dtype != F32 for v in n.inputs + n.outputs), n


# ---- lists, from the op table ------------------------------------------------------------------------

def test_every_op_has_a_list_and_the_table_renders_it():
    rows = table().ops
    assert set(OPS) - {"Const"} == set(rows)
    rendered = render_table()
    for op in rows:
        assert f"| {op} |" in rendered
    assert rows["MatMul"].list == "white" and not rows["MatMul"].fp32
    assert rows["Exp"].list == "black" and rows["ReduceSum"].list == "gray"


def test_precision_page_holds_the_current_table():
    text = (Path(__file__).parents[1] / "docs" / "precision.md").read_text("utf-8")
    assert render_table() in text, "regenerate the table of docs/precision.md with graphkernel.precision.render_table()"


@pytest.mark.parametrize("cann, ours", [("ReduceSumD", "ReduceSum"), ("Matmul", "MatMul"),
                                        ("MatMulV2", "MatMul"), ("BatchMatMulV2", "BatchMatMul"),
                                        ("SoftmaxV2", "Softmax"), ("Gelu", "GeLU"), ("Relu", "ReLU"),
                                        ("RealDiv", "RealDiv"), ("Cast", "Cast"), ("TensorAdd", "Add")])
def test_cann_names_resolve_through_the_alias_table(cann, ours):
    assert resolve(cann) == ours


@pytest.mark.parametrize("name", ["Conv3D", "Bias", "Xlog1py", "Const"])
def test_names_that_are_not_ours_resolve_to_none(name):
    assert resolve(name) is None


# ---- modify_mixlist: CANN's format ------------------------------------------------------------------------

SEED_001_EXAMPLE = """{
  "black-list": {                  // 黑名单
     "to-remove": [                // 黑名单算子转换为灰名单算子
     "Xlog1py"
     ],
     "to-add": [                   // 白名单或灰名单算子转换为黑名单算子
     "Matmul",
     "Cast"
     ]
  },
  "white-list": {                  // 白名单
     "to-remove": [                // 白名单算子转换为灰名单算子
     "Conv2D"
     ],
     "to-add": [                   // 黑名单或灰名单算子转换为白名单算子
     "Bias"
     ]
  }
}
"""


def test_seed_001_example_file_comments_aliases_and_unknown_names(tmp_path):
    path = write(tmp_path, "ops_info.json", SEED_001_EXAMPLE)
    with pytest.warns(UserWarning) as record:
        mixlist = read_mixlist(path)
    warned = " ".join(str(w.message) for w in record)
    for name in ("Xlog1py", "Bias"):
        assert f"{name!r} is neither a graphkernel op nor a known CANN alias" in warned
    assert "Conv2D" not in warned   # an op of ours since convolutions came (ir/ops/conv.py)
    assert "ops_info.json" in warned
    assert mixlist.lists() == {"MatMul": "black", "Cast": "black", "Conv2D": "gray"}


def test_a_misspelt_op_name_suggests_the_nearest(tmp_path):
    path = write(tmp_path, "ops_info.json", '{"black-list": {"to-add": ["Mull"]}}')
    with pytest.warns(UserWarning, match=r"'Mull' is neither a graphkernel op nor a known CANN alias \(did you "
                                         r"mean 'Mul'\?\) \(ignored\)"):
        read_mixlist(path)
    path = write(tmp_path, "dtypes.cfg", "OpType::Mull:InputDtype:float32,OutputDtype:float32\n")
    with pytest.warns(UserWarning, match=r"op type 'Mull' is neither .* \(did you mean 'Mul'\?\)"):
        read_customize_dtypes(path)


# CANN's three worked examples, with A = MatMul (white by default).
@pytest.mark.parametrize("edit, final", [
    ({"black-list": {"to-add": ["MatMul"]}}, "black"),
    ({"black-list": {"to-add": ["MatMul"]}, "white-list": {"to-remove": ["MatMul"]}}, "black"),
    ({"white-list": {"to-remove": ["MatMul"]}}, "gray"),
])
def test_seed_001_worked_examples(tmp_path, edit, final):
    mixlist = read_mixlist(write(tmp_path, "mix.json", json.dumps(edit)))
    assert mixlist.lists() == {"MatMul": final}
    out = run_pass(mm_graph(), "allow_mix_precision", mixlist=mixlist)
    assert dtype_of(out, "MatMul") == [F32]  # black stays float32; gray fed by graph inputs follows them
    assert casts(out) == []


def test_removed_from_black_goes_gray_and_added_to_white_goes_white(tmp_path):
    mixlist = read_mixlist(write(tmp_path, "m.json", '{"black-list": {"to-remove": ["Exp"]}, '
                                                     '"white-list": {"to-add": ["ReduceSum"]}}'))
    assert mixlist.lists() == {"Exp": "gray", "ReduceSum": "white"}
    out = run_pass(mm_graph(), "allow_mix_precision", mixlist=mixlist)
    assert dtype_of(out, "Exp") == [F16] and dtype_of(out, "ReduceSum") == [F16]


def test_removing_an_op_from_a_list_it_is_not_on_warns(tmp_path):
    with pytest.warns(UserWarning, match=r"black-list.to-remove\[0\] 'MatMul': MatMul is not on the black-list"):
        assert read_mixlist(write(tmp_path, "m.json", '{"black-list": {"to-remove": ["MatMul"]}}')).lists() == {}


def test_one_string_may_name_several_ops_separated_by_commas(tmp_path):
    mixlist = read_mixlist(write(tmp_path, "m.json", '{"black-list": {"to-add": ["Matmul, ReduceSumD"]}}'))
    assert mixlist.lists() == {"MatMul": "black", "ReduceSum": "black"}


def test_line_comments_are_stripped_outside_strings_only():
    text = '{"a": "http://x", // comment\n "b": "\\"//\\""} // end'
    assert json.loads(strip_line_comments(text)) == {"a": "http://x", "b": '"//"'}


@pytest.mark.parametrize("mode", ["force_fp16", "must_keep_origin_dtype"])
def test_mixlist_is_ignored_with_a_warning_outside_allow_mix_precision(cpu, tmp_path, mode):
    context.set_context(precision_mode=mode,
                        modify_mixlist=write(tmp_path, "m.json", '{"black-list": {"to-add": ["MatMul"]}}'))
    with pytest.warns(UserWarning, match=f"has no effect under precision_mode='{mode}'"):
        compiled, _ = compile_net(MatMulSoftmax(), (4, 8), (8, 16))
    assert dtype_of(compiled.graph, "MatMul") == [F16 if mode == "force_fp16" else F32]


# ---- the float16 ReduceSum case: a float16 ReduceSum and the black list ----------------------------------------

def reduce_after_matmul(cast_first=False):
    g = GraphBuilder(tt(F32, 8, 32), tt(F32, 32, 64))
    x, w = g.inputs
    y = g.op("MatMul", x, w)
    if cast_first:
        y = g.op("Cast", y, dtype=F32)   # the user's fix: an explicit Cast to float32 before ReduceSum
    return g.graph(g.op("ReduceSum", y, axis=(0,)))


def test_seed_002_case_04_reduce_sum_follows_matmul_into_float16():
    assert dtype_of(run_pass(reduce_after_matmul(), "allow_mix_precision"), "ReduceSum") == [F16]


def test_seed_002_case_04_black_listing_reduce_sum_d_keeps_it_float32(tmp_path):
    mixlist = read_mixlist(write(tmp_path, "ops_info.json", '{ "black-list": { "to-add": ["ReduceSumD"] } }'))
    out = run_pass(reduce_after_matmul(), "allow_mix_precision", mixlist=mixlist)
    assert dtype_of(out, "MatMul") == [F16] and dtype_of(out, "ReduceSum") == [F32]


def test_seed_002_case_04_a_cast_to_float32_keeps_reduce_sum_float32():
    out = run_pass(reduce_after_matmul(cast_first=True), "allow_mix_precision")
    assert dtype_of(out, "ReduceSum") == [F32]


class MatMulReduceSum(Cell):
    def __init__(self):
        super().__init__()
        self.mm, self.sum = P.MatMul(), P.ReduceSum()

    def construct(self, x, w):
        return self.sum(self.mm(x, w) * 2.0, 0)


def reduce_sum_input_dtypes(graph):
    nodes = [m for n in graph.nodes for m in (n.subgraph.nodes if n.subgraph is not None else (n,))]
    return [n.inputs[0].dtype for n in nodes if n.op == "ReduceSum"]


@pytest.mark.parametrize("fusion", [False, True])
def test_seed_002_case_04_through_the_pipeline(cpu, tmp_path, fusion):
    context.set_context(precision_mode="allow_mix_precision", enable_graph_kernel=fusion)
    compiled, args = compile_net(MatMulReduceSum(), (8, 32), (32, 64))
    assert reduce_sum_input_dtypes(compiled.graph) == [F16]
    float16_sum = compiled(*args).asnumpy()
    context.set_context(modify_mixlist=write(tmp_path, "ops_info.json",
                                             '{ "black-list": { "to-add": ["ReduceSumD"] } }'))
    compiled, _ = compile_net(MatMulReduceSum(), (8, 32), (32, 64))
    assert reduce_sum_input_dtypes(compiled.graph) == [F32]
    float32_sum = compiled(*args).asnumpy()
    assert float16_sum.dtype == float32_sum.dtype == np.float32
    assert_close(float16_sum.astype(np.float16), float32_sum.astype(np.float16), rtol_scale=4)


class MatMulGeLUSoftmax(Cell):
    def __init__(self):
        super().__init__()
        self.mm, self.gelu, self.softmax = P.MatMul(), P.GeLU(), P.Softmax()

    def construct(self, x, w, b):
        return self.softmax(self.gelu(self.mm(x, w) + b))


def test_casts_fuse_like_any_op(cpu):
    context.set_context(precision_mode="allow_mix_precision", enable_graph_kernel=True)
    compiled, _ = compile_net(MatMulGeLUSoftmax(), (4, 8), (8, 16), (16,))
    alone = [k.name for k in compiled.kernels if k.op_types == ("Cast",)]
    assert alone == ["x/Cast-to-float16", "w/Cast-to-float16"]   # MatMul's operands: MatMul is opaque
    fused = [k for k in compiled.kernels if len(k.op_types) > 1 and "Cast" in k.op_types]
    assert fused and fused[0].op_types.count("Cast") == 2           # the bias down, GeLU's result back up


# ---- composite ops govern their expansion -------------------------------------------------------------

class MatMulSoftmax(Cell):
    def __init__(self):
        super().__init__()
        self.mm, self.softmax = P.MatMul(), P.Softmax()

    def construct(self, x, w):
        return self.softmax(self.mm(x, w))


def compile_net(net, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    args = [Tensor((rng.standard_normal(s) * 0.5).astype(np.float32)) for s in shapes]
    return net.compile(*args), args


def test_black_listed_softmax_keeps_its_whole_expansion_float32(cpu):
    context.set_context(precision_mode="allow_mix_precision")
    compiled, _ = compile_net(MatMulSoftmax(), (4, 8), (8, 16))
    g = compiled.stages["precision"]
    assert dtype_of(g, "MatMul") == [F16]
    for op in ("ReduceMax", "Sub", "Exp", "ReduceSum", "RealDiv"):
        assert dtype_of(g, op) == [F32], op


def test_white_listed_softmax_runs_its_expansion_in_float16(cpu, tmp_path):
    context.set_context(precision_mode="allow_mix_precision",
                        modify_mixlist=write(tmp_path, "m.json", '{"white-list": {"to-add": ["SoftmaxV2"]}}'))
    compiled, args = compile_net(MatMulSoftmax(), (4, 8), (8, 16))
    g = compiled.stages["precision"]
    for op in ("ReduceMax", "Sub", "Exp", "ReduceSum", "RealDiv"):
        assert dtype_of(g, op) == [F16], op
    got = compiled(*args).asnumpy()
    assert got.dtype == np.float32
    context.set_context(precision_mode="must_keep_origin_dtype", modify_mixlist=None)
    want = MatMulSoftmax()(*args).asnumpy()
    assert_close(got.astype(np.float16), want.astype(np.float16), rtol_scale=4)


def test_an_edited_mixlist_recompiles_a_compiled_cell_after_set_context(cpu, tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"white-list": {"to-add": ["SoftmaxV2"]}}')
    context.set_context(precision_mode="allow_mix_precision", modify_mixlist=str(path))
    net = MatMulSoftmax()
    compiled, args = compile_net(net, (4, 8), (8, 16))
    assert dtype_of(compiled.stages["precision"], "Exp") == [F16]
    path.write_text('{"black-list": {"to-add": ["Matmul"]}}')
    os.utime(path, ns=(1, 1))   # another version even within one step of the file system's clock
    context.set_context(modify_mixlist=str(path))
    again = net.compile(*args)
    assert again.graph_id != compiled.graph_id
    g = again.stages["precision"]
    assert dtype_of(g, "MatMul") == [F32] and dtype_of(g, "Exp") == [F32]


# ---- customize_dtypes ---------------------------------------------------------------------------------

class MatMulExpRelu(Cell):
    def __init__(self):
        super().__init__()
        self.mm, self.exp, self.exp2, self.relu = P.MatMul(), P.Exp(), P.Exp(), P.ReLU()

    def construct(self, x, w):
        y = self.mm(x, w)
        return self.relu(self.exp(y) + self.exp2(y))


def node_named(graph, name):
    return next(n for n in graph.nodes if n.name == name)


def test_customize_dtypes_by_type_and_by_name_name_wins(cpu, tmp_path):
    cfg = write(tmp_path, "customize_dtypes.cfg", "\n".join([
        "# by op type",
        "OpType::MatMulV2:InputDtype:float32,float32,OutputDtype:float32",
        "OpType::Exp:InputDtype:float16,OutputDtype:float16",
        "",
        "# by name: wins over the type entry",
        "Default/Exp-op2::InputDtype:float32,OutputDtype:float32",
    ]))
    context.set_context(precision_mode="allow_mix_precision", customize_dtypes=cfg)
    compiled, args = compile_net(MatMulExpRelu(), (4, 8), (8, 16))
    g = compiled.stages["precision"]
    assert dtype_of(g, "MatMul") == [F32]                        # white, but the type entry says float32
    exp, exp2 = node_named(g, "Default/Exp-op1"), node_named(g, "Default/Exp-op2")
    assert exp.inputs[0].dtype == F16 and exp.types[0].dtype == F16  # black, but the type entry says f16
    assert exp2.inputs[0].dtype == F32                           # the name entry wins over the type entry
    assert compiled(*args).asnumpy().dtype == np.float32


def test_customize_dtypes_composite_type_governs_its_expansion(cpu, tmp_path):
    cfg = write(tmp_path, "c.cfg", "OpType::Relu:InputDtype:float32,int8,OutputDtype:float32,int8\n")
    context.set_context(precision_mode="force_fp16", customize_dtypes=cfg)
    compiled, _ = compile_net(MatMulExpRelu(), (4, 8), (8, 16))
    g = compiled.stages["precision"]
    assert dtype_of(g, "Exp") == [F16, F16]
    assert dtype_of(g, "Maximum") == [F32]     # ReLU's expansion


def test_customize_dtypes_is_ignored_under_must_keep_origin_dtype(cpu, tmp_path):
    cfg = write(tmp_path, "c.cfg", "OpType::Exp:InputDtype:float16,OutputDtype:float16\n")
    context.set_context(customize_dtypes=cfg)
    with pytest.warns(UserWarning, match=r"customize_dtypes '.*c\.cfg' has no effect under "
                                         r"precision_mode='must_keep_origin_dtype'"):
        compiled, _ = compile_net(MatMulExpRelu(), (4, 8), (8, 16))
    assert "precision" not in compiled.stages
    assert all(v.dtype == F32 for n in compiled.graph.nodes for v in n.outputs)


@pytest.mark.parametrize("text, message", [
    ("Default/x/Exp-op1 InputDtype:float16\n", r"line 1: .*expected 'Opname::InputDtype"),
    ("# comment\nOpType::Exp:InputDtype:flaot16\n", r"line 2: unknown dtype 'flaot16'"),
    ("OpType::Exp:Dtype:float16\n", r"line 1: 'Dtype:float16' does not start with InputDtype"),
    ("OpType::Exp:InputDtype:float16\nOpType::Exp:OutputDtype:float32\n",
     r"line 2: a second entry for 'Exp' \(the first is on line 1\)"),
    ("OpType::Exp:\n", r"line 1: no dtypes given"),
])
def test_customize_dtypes_bad_lines_name_file_and_line(tmp_path, text, message):
    path = write(tmp_path, "bad.cfg", text)
    with pytest.raises(PrecisionConfigError, match=r"customize_dtypes file '.*bad\.cfg', " + message):
        read_customize_dtypes(path)


def test_customize_dtypes_that_cannot_apply_name_file_line_and_node(tmp_path):
    rules = read_customize_dtypes(write(tmp_path, "c.cfg", "\nOpType::Add:InputDtype:float16,float32\n"))
    with pytest.raises(PrecisionConfigError, match=r"c\.cfg', line 2: cannot apply to Add: .*different dtypes"):
        run_pass(mm_graph(), "allow_mix_precision", customize=rules)


def test_customize_dtypes_unknown_type_warns(tmp_path):
    with pytest.warns(UserWarning, match=r"line 1: op type 'Conv3D' is neither"):
        rules = read_customize_dtypes(write(tmp_path, "c.cfg", "OpType::Conv3D:InputDtype:float16\n"))
    assert rules.by_type == ()


# ---- context keys and bad input ------------------------------------------------------------------------

def test_unknown_precision_mode_names_the_key_and_lists_the_modes():
    with pytest.raises(ContextError, match=r"precision_mode.*'fp8'.*must_keep_origin_dtype.*allow_mix_precision"):
        context.set_context(precision_mode="fp8")
    with pytest.raises(ContextError, match=r"precision_mode_v2.*'mixed'.*mixed_float16"):
        context.set_context(precision_mode_v2="mixed")


@pytest.mark.parametrize("v2, mode", [("origin", "must_keep_origin_dtype"), ("fp16", "force_fp16"),
                                      ("mixed_float16", "allow_mix_precision"),
                                      ("mixed_bfloat16", "allow_mix_precision_bf16")])
def test_precision_mode_v2_maps_onto_precision_mode_and_wins(v2, mode):
    context.set_context(precision_mode="allow_fp32_to_fp16", precision_mode_v2=v2)
    assert options_from_context().precision_mode == mode


@pytest.mark.parametrize("key", ["modify_mixlist", "customize_dtypes"])
def test_missing_file_is_an_error_naming_it_at_set_time(tmp_path, key):
    missing = str(tmp_path / "nope.json")
    assert issubclass(PrecisionConfigError, GraphKernelError)
    with pytest.raises(PrecisionConfigError, match=rf"set_context\({key}=...\): {key} file '.*nope\.json': "
                                                   "cannot read it"):
        context.set_context(**{key: missing})
    assert context.get_context(key) is None


@pytest.mark.parametrize("text, message", [
    ('{"black-list": {"to-add": ["Exp",]}}', r"not valid JSON: .* at line 1, column"),
    ('{\n  "black-list": // c\n  {"to-add": [\n "Exp"\n }\n}', r"not valid JSON: .* at line 5"),
    ('["Exp"]', r"expected an object"),
    ('{"gray-list": {"to-add": ["Exp"]}}', r"unknown key 'gray-list'; accepted: black-list, white-list"),
    ('{"black-list": {"add": ["Exp"]}}', r"unknown key black-list.'add'; accepted: to-add, to-remove"),
    ('{"black-list": {"to-add": "Exp"}}', r"black-list.to-add must be a list of op names"),
    ('{"black-list": {"to-add": ["Exp", 3]}}', r"black-list.to-add\[1\] is 3, not an op name"),
    ('{"black-list": {"to-add": ["Matmul"]}, "white-list": {"to-add": ["MatMulV2"]}}',
     r"black-list.to-add\[0\] 'Matmul' and white-list.to-add\[0\] 'MatMulV2' contradict"),
    ('{"black-list": {"to-add": ["Exp"]}, "black-list": {"to-add": ["MatMul"]}}',
     r"key 'black-list' appears twice in one object"),
    ('{ "black-list": { // comment "to-add": ["Matmul"] } }',
     r"not valid JSON: .* at line 1, column \d+ \(a // comment runs to the end of its line\)"),
])
def test_bad_mixlist_names_file_and_line_or_key(tmp_path, text, message):
    path = write(tmp_path, "mix.json", text)
    with pytest.raises(PrecisionConfigError, match=r"modify_mixlist file '.*mix\.json': " + message):
        context.set_context(modify_mixlist=path)


def test_context_keys_reach_the_compile_options(tmp_path):
    mix = write(tmp_path, "m.json", '{"black-list": {"to-add": ["ReduceSumD"]}}')
    cfg = write(tmp_path, "c.cfg", "OpType::Exp:InputDtype:float16\n")
    context.set_context(precision_mode="allow_mix_precision", modify_mixlist=mix, customize_dtypes=cfg)
    opts = options_from_context()
    assert opts.mixlist.lists() == {"ReduceSum": "black"}
    assert dict(opts.customize_dtypes.by_type)["Exp"].inputs == (F16,)
    assert hash(opts) == hash(options_from_context())


# ---- the stage dump -------------------------------------------------------------------------------------

def test_precision_stage_dump_written_only_when_the_mode_is_not_the_default(cpu, tmp_path):
    out_dir = tmp_path / "dots"
    context.set_context(save_graphs=True, save_graphs_path=str(out_dir))
    compile_net(MatMulSoftmax(), (4, 8), (8, 16))
    assert not (out_dir / "hwopt_d_precision_end_graph_0.dot").exists()
    context.set_context(precision_mode="allow_mix_precision")
    compiled, _ = compile_net(MatMulSoftmax(), (4, 8), (8, 16))
    path = out_dir / "hwopt_d_precision_end_graph_1.dot"
    assert path.exists() and any(f.endswith("hwopt_d_precision_end_graph_1.dot") for f in compiled.dump_files)
    assert "Cast" in path.read_text() and "f16" in path.read_text()
