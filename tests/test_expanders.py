"""Expanders: each composite op's expansion equals its numpy reference, keeps its types, verifies, and
follows the kernel contract (keepdims reductions); the expand flags are respected."""
import importlib
import pkgutil

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ir.dtypes import DType
from ir.errors import IRError
from ir.ops import OPS, Pattern, get
from ir.ops.float_status import STATUS_OPS
from graphkernel import expanders
from graphkernel.expanders import EXPANDERS, expand, expands
from graphkernel.settings.flags import GraphKernelFlags, parse_flags
from graphkernel.settings.options import CompileOptions
from ir import GraphBuilder
from pass_helpers import F16, F32, F64, I32, interpret, ops, random_inputs, tt, verify
from tolerance import assert_close

FLOATS = (F16, DType.bfloat16, F32, F64)

# (op, input shapes, attrs): every composite op, several shapes and axes (negative ones too)
CASES = [
    ("ReduceMean", [(4, 6, 8)], dict(axis=-1)),
    ("ReduceMean", [(4, 6, 8)], dict(axis=(0, -1), keep_dims=True)),
    ("ReduceMean", [(4, 6, 8)], dict(axis=(1,), keep_dims=False)),
    ("ReduceMean", [(4, 6, 8)], dict(axis=())),
    ("ReduceMean", [(3, 300)], dict(axis=1, keep_dims=True)),
    ("ReduceMean", [(7,)], dict(axis=0)),
    ("Square", [(5, 3)], {}),
    ("BiasAdd", [(2, 3, 4, 5), (3,)], {}),
    ("BiasAdd", [(4, 3), (3,)], {}),
    ("BiasAdd", [(2, 4, 5, 3), (3,)], dict(data_format="NHWC")),
    ("Sigmoid", [(4, 8)], {}),
    ("ReLU", [(4, 8)], {}),
    ("GeLU", [(4, 8)], {}),
    ("GeLU", [(2, 3, 16)], {}),
    ("Softmax", [(4, 8)], {}),
    ("Softmax", [(4, 6, 8)], dict(axis=1)),
    ("Softmax", [(4, 6, 8)], dict(axis=(-2, -1))),
    ("Softmax", [(2, 1024)], dict(axis=-1)),
    ("LogSoftmax", [(4, 8)], {}),
    ("LogSoftmax", [(4, 6, 8)], dict(axis=-3)),
    ("LayerNorm", [(4, 8), (8,), (8,)], {}),
    ("LayerNorm", [(4, 6, 8), (6, 8), (6, 8)], dict(begin_norm_axis=1, begin_params_axis=-2)),
    ("LayerNorm", [(4, 6, 8), (8,), (8,)], dict(begin_norm_axis=-2, begin_params_axis=-1, epsilon=1e-5)),
    ("LayerNorm", [(2, 1024), (1024,), (1024,)], dict(epsilon=1e-5)),
    ("Erfc", [(4, 8)], {}),
    ("Softsign", [(4, 8)], {}),
    ("SquaredDifference", [(4, 8), (8,)], {}),
    ("SquaredDifference", [(3, 1, 5), (4, 1)], {}),
    ("OnesLike", [(3, 5)], {}),
    ("SquareSumAll", [(4, 8), (4, 8)], {}),
    ("SquareSumAll", [(), ()], {}),
    ("EqualCount", [(4, 8), (4, 8)], {}),
    ("SigmoidCrossEntropyWithLogits", [(4, 8), (4, 8)], {}),
    ("SoftmaxCrossEntropyWithLogits", [(4, 8), (4, 8)], {}),
    ("ArgMaxWithValue", [(4, 8)], {}),
    ("ArgMaxWithValue", [(4, 6, 8)], dict(axis=-1, keep_dims=True)),
    ("ArgMaxWithValue", [(4, 6, 8)], dict(axis=1)),
    ("StridedSlice", [(4, 6, 8)], dict(begin=(1, 0), end=(3, 5), strides=(1, 2), ellipsis_mask=0)),
    ("Squeeze", [(4, 1, 8, 1)], {}),
    ("Squeeze", [(4, 1, 8, 1)], dict(axis=(1,))),
    ("ExpandDims", [(4, 8)], dict(axis=1)),
    ("Tile", [(4, 1, 3)], dict(multiples=(2, 3, 1))),
    ("Tile", [(3,)], dict(multiples=(2, 1, 4))),
    ("ZerosLike", [(3, 5)], {}),
    ("AddN", [(3, 5), (3, 5), (3, 5)], {}),
    ("Argmax", [(4, 6, 8)], {}),
    ("Argmax", [(4, 6, 8)], dict(axis=1, output_type=DType.int64)),
    ("StridedSlice", [(4, 1, 8)], dict(begin=(0, 0), end=(0, 1), strides=(1, 1), begin_mask=1, end_mask=1,
                                      shrink_axis_mask=2)),
    ("StridedSlice", [(4, 6, 8)], dict(begin=(0, 2), end=(0, -1), strides=(1, -1), ellipsis_mask=1,
                                      new_axis_mask=0)),
    ("Identity", [(3, 5)], {}),
    ("FastGeLU", [(4, 8)], {}),
    ("FastGeLU", [(2, 3, 16)], {}),
    ("BatchNorm", [(4, 3), (3,), (3,), (3,), (3,)], dict(is_training=True)),
    ("BatchNorm", [(2, 3, 4, 5), (3,), (3,), (3,), (3,)], dict(is_training=True, momentum=0.5)),
    ("BatchNorm", [(2, 4, 5, 3), (3,), (3,), (3,), (3,)], dict(is_training=True, data_format="NHWC")),
    ("Flatten", [(2, 3, 4, 5)], {}),
    ("Flatten", [(3,)], {}),
    ("AdaptiveAvgPool2D", [(2, 3, 6, 4)], dict(output_size=1)),          # global: a ReduceMean
    ("AdaptiveAvgPool2D", [(2, 3, 6, 4)], dict(output_size=(3, 2))),     # even bins: windows of a Reshape
    ("AdaptiveAvgPool2D", [(3, 7, 5)], dict(output_size=(3, None))),     # uneven bins: bin matrices
]
# every composite op expanded, those off by default too
EXPAND_ALL = CompileOptions(flags=parse_flags("--enable_expand_ops=" + ",".join(
    name for name, d in OPS.items() if d.expandable and not d.expand_by_default), read_env=False))


def single_op_graph(op, shapes, attrs, dtype, name="Default/net/Op-op0"):
    g = GraphBuilder(*(tt(dtype, *s) for s in shapes))
    return g.graph(*g.ops(op, *g.inputs, name=name, **attrs))


def scaled_inputs(graph, seed=0):
    """Random inputs with some large magnitudes, so overflow paths (exp, tanh) are exercised too."""
    arrays = random_inputs(graph, seed)
    if arrays and graph.inputs[0].dtype.is_float and arrays[0].size >= 4:
        flat = arrays[0].reshape(-1)
        flat[:4] = np.array([30.0, -30.0, 8.0, -8.0], dtype=flat.dtype)
    return arrays


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op,shapes,attrs", CASES, ids=[f"{op}-{i}" for i, (op, _, _) in enumerate(CASES)])
def test_expansion_matches_the_reference(op, shapes, attrs, dtype):
    graph = single_op_graph(op, shapes, attrs, dtype)
    expanded = verify(expand(graph, EXPAND_ALL))
    assert not any(get(n.op).expandable for n in expanded.nodes), ops(expanded)
    assert tuple(v.type for v in expanded.outputs) == tuple(v.type for v in graph.outputs)
    arrays = scaled_inputs(graph)
    for got, want in zip(interpret(expanded, arrays), interpret(graph, arrays)):
        assert_close(got, want, err_msg=f"{op} {attrs} {dtype}")


def test_every_expandable_op_has_an_expander():
    from test_grad_ops import CASES as GRAD_OP_CASES   # the gradient ops' expansions are tested there
    assert set(EXPANDERS) == {name for name, d in OPS.items() if d.expandable}
    assert {c[0] for c in CASES} | {c[0] for c in GRAD_OP_CASES} | {
        "SparseSoftmaxCrossEntropyWithLogits", "OneHot",   # int inputs: their own tests below
        "AdamWeightDecay",   # float32 scalars with float16 tensors: tests/op_cases.py
        # MindSpore's in-place optimizer primitives: tests/op_cases.py, tests/test_optimizer_primitives.py
        "ApplyMomentum", "Adam", "FusedCastAdamWeightDecay", "LambApplyOptimizerAssign", "LambApplyWeightAssign",
        *STATUS_OPS, "FloatStatus"} == set(EXPANDERS)   # statuses of fixed dtypes: tests/op_cases.py


def test_each_expander_module_registers_its_expanders_once():
    """`@expands(op)` is the one registration: every module of the folder holds a registered expander, every
    public `expand_*` function is registered, and a second expander for an op is refused, naming both."""
    modules = {fn.__module__ for fn in EXPANDERS.values()}
    folder = {f"graphkernel.expanders.{m.name}" for m in pkgutil.iter_modules(expanders.__path__)} - {
        "graphkernel.expanders.registry"}
    assert modules == folder
    for name in folder:
        module = importlib.import_module(name)
        functions = {v for k, v in vars(module).items() if k.startswith("expand_") and callable(v)}
        assert functions <= set(EXPANDERS.values()), f"{name}: {functions - set(EXPANDERS.values())}"
    with pytest.raises(ValueError, match=r"two expanders for Square: graphkernel\.expanders\.square\.expand_square"):
        expands("Square")(lambda node, inputs, b: inputs)
    assert EXPANDERS["Square"].__module__ == "graphkernel.expanders.square"


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("is_grad", [False, True])
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_sparse_softmax_cross_entropy_expansion(dtype, is_grad, label_dtype):
    labels = np.array([0, 7, 3, 3, -1, 8], label_dtype)   # -1 and 8: outside [0, 8), an all-zero one-hot row
    g = GraphBuilder(tt(dtype, 6, 8), tt(I32 if label_dtype == np.int32 else DType.int64, 6))
    graph = g.graph(g.op("SparseSoftmaxCrossEntropyWithLogits", *g.inputs, is_grad=is_grad))
    expanded = verify(expand(graph, CompileOptions()))
    assert "SparseSoftmaxCrossEntropyWithLogits" not in ops(expanded)
    logits = np.random.default_rng(1).standard_normal((6, 8)).astype(dtype.np) * 3
    (got,), (want,) = interpret(expanded, [logits, labels]), interpret(graph, [logits, labels])
    assert_close(got, want)
    assert got.shape == ((6, 8) if is_grad else ())


@pytest.mark.parametrize("dtype", (I32, F32), ids=str)
def test_square_and_relu_of_integers(dtype):
    g = GraphBuilder(tt(dtype, 3, 5))
    (x,) = g.inputs
    graph = g.graph(g.op("Square", x), g.op("ReLU", x))
    expanded = verify(expand(graph, CompileOptions()))
    arrays = random_inputs(graph, 1)
    for got, want in zip(interpret(expanded, arrays), interpret(graph, arrays)):
        assert_close(got, want, bitwise=True)


def test_softmax_is_the_stable_form_with_keepdims_reductions():
    graph = single_op_graph("Softmax", [(4, 8)], {}, F32)
    expanded = expand(graph, CompileOptions())
    assert ops(expanded) == ["ReduceMax", "Sub", "Exp", "ReduceSum", "RealDiv"]
    reductions = [n for n in expanded.nodes if get(n.op).pattern == Pattern.REDUCE]
    assert all(n.attr("keep_dims") for n in reductions)
    x = np.array([[1000.0, 1000.0, 0.0, -1000.0]], dtype=np.float32)
    graph = single_op_graph("Softmax", [(1, 4)], {}, F32)
    (y,) = interpret(expand(graph, CompileOptions()), [x])
    assert_close(y, np.array([[0.5, 0.5, 0.0, 0.0]], dtype=np.float32))


def test_reduce_mean_without_keep_dims_ends_with_a_reshape():
    graph = single_op_graph("ReduceMean", [(4, 6, 8)], dict(axis=(0, 2)), F32)
    expanded = expand(graph, CompileOptions())
    assert ops(expanded) == ["ReduceSum", "Const", "RealDiv", "Reshape"]
    assert expanded.nodes[0].attr("keep_dims") is True
    assert expanded.outputs[0].shape == (6,)


@pytest.mark.parametrize("dtype", [F16, DType.bfloat16], ids=str)
def test_half_float_means_accumulate_in_float32(dtype):
    graph = single_op_graph("ReduceMean", [(2, 4096)], dict(axis=-1), dtype)
    expanded = expand(graph, CompileOptions())
    assert ops(expanded) == ["Cast", "ReduceSum", "Const", "RealDiv", "Cast", "Reshape"]
    x = np.full((2, 4096), 0.1, dtype=dtype.np)
    (got,) = interpret(expanded, [x])
    assert_close(got, np.full(2, 0.1, dtype=dtype.np), bitwise=dtype == DType.bfloat16)


def test_layer_norm_returns_mindspore_shapes():
    graph = single_op_graph("LayerNorm", [(4, 6, 8), (6, 8), (6, 8)], dict(begin_norm_axis=1,
                                                                          begin_params_axis=1), F32)
    expanded = expand(graph, CompileOptions())
    assert [v.shape for v in expanded.outputs] == [(4, 6, 8), (4, 1, 1), (4, 1, 1)]
    reductions = [n for n in expanded.nodes if n.op == "ReduceSum"]
    assert len(reductions) == 2 and all(n.attr("keep_dims") for n in reductions)


def test_bias_add_nchw_reshapes_the_bias_to_the_channel_axis():
    graph = single_op_graph("BiasAdd", [(2, 3, 4, 5), (3,)], {}, F32)
    expanded = expand(graph, CompileOptions())
    assert ops(expanded) == ["Reshape", "Add"]
    assert expanded.nodes[0].out.shape == (3, 1, 1)
    nhwc = expand(single_op_graph("BiasAdd", [(2, 4, 5, 3), (3,)], dict(data_format="NHWC"), F32),
                  CompileOptions())
    assert ops(nhwc) == ["Add"]


def test_scalars_are_shape_0_consts_of_the_input_dtype():
    for dtype in FLOATS:
        expanded = expand(single_op_graph("GeLU", [(4,)], {}, dtype), CompileOptions())
        consts = [n for n in expanded.nodes if n.op == "Const"]
        assert len(consts) == 4
        assert all(n.out.type == tt(dtype) for n in consts)


def test_new_nodes_are_named_after_the_node_they_replace():
    graph = single_op_graph("Softmax", [(4, 8)], {}, F32, name="Default/net/Softmax-op3")
    names = [n.name for n in expand(graph, CompileOptions()).nodes]
    assert names == ["Default/net/Softmax-op3/ReduceMax-0", "Default/net/Softmax-op3/Sub-1",
                     "Default/net/Softmax-op3/Exp-2", "Default/net/Softmax-op3/ReduceSum-3",
                     "Default/net/Softmax-op3/RealDiv-4"]


def test_disable_expand_ops_leaves_the_op_alone():
    g = GraphBuilder(tt(F32, 4, 8))
    (x,) = g.inputs
    graph = g.graph(g.op("GeLU", g.op("Softmax", x)))
    opts = CompileOptions(flags=GraphKernelFlags(disable_expand_ops=frozenset({"Softmax"})))
    expanded = verify(expand(graph, opts))
    assert ops(expanded).count("Softmax") == 1 and "GeLU" not in ops(expanded)
    only = CompileOptions(flags=GraphKernelFlags(enable_expand_ops_only=frozenset({"Softmax"})))
    assert ops(expand(graph, only))[-1] == "GeLU" and "Softmax" not in ops(expand(graph, only))
    arrays = random_inputs(graph)
    assert_close(interpret(expanded, arrays)[0], interpret(graph, arrays)[0])


def test_expand_is_pure_and_a_no_op_without_composites():
    graph = single_op_graph("LayerNorm", [(4, 8), (8,), (8,)], {}, F32)
    before = graph.key()
    expand(graph, CompileOptions())
    assert graph.key() == before
    primitive = single_op_graph("Exp", [(4, 8)], {}, F32)
    assert expand(primitive, CompileOptions()) is primitive


def test_an_expansion_with_wrong_types_names_the_expander(monkeypatch):
    def bad_square(node, inputs, b):
        return (b.op("Cast", *inputs, dtype=F64),)

    monkeypatch.setitem(EXPANDERS, "Square", bad_square)
    with pytest.raises(IRError, match=r"bad_square.*Square.*infers f32\[3\]"):
        expand(single_op_graph("Square", [(3,)], {}, F32), CompileOptions())


def test_expansions_that_hold_composite_ops_are_expanded_too(monkeypatch):
    real_relu = EXPANDERS["ReLU"]

    def relu_via_square(node, inputs, b):
        """The outer ReLU expands into sqrt(square(relu(x))): two more composite ops to expand."""
        if "/ReLU-" in node.name:
            return real_relu(node, inputs, b)
        return (b.op("Sqrt", b.op("Square", b.op("ReLU", inputs[0]))),)

    monkeypatch.setitem(EXPANDERS, "ReLU", relu_via_square)
    graph = single_op_graph("ReLU", [(8,)], {}, F32)
    expanded = verify(expand(graph, CompileOptions()))
    assert ops(expanded) == ["Const", "Maximum", "Mul", "Sqrt"]
    arrays = random_inputs(graph)
    assert_close(interpret(expanded, arrays)[0], interpret(graph, arrays)[0])


def test_a_runaway_expansion_is_an_error(monkeypatch):
    monkeypatch.setitem(EXPANDERS, "Square", lambda n, i, b: (b.op("Square", i[0]),))
    with pytest.raises(IRError, match="did not finish"):
        expand(single_op_graph("Square", [(3,)], {}, F32), CompileOptions())
    assert expanders.MAX_ROUNDS >= 2


def test_a_bert_block_expands_and_verifies():
    g = GraphBuilder(tt(F32, 8, 16), tt(F32, 16, 32), tt(F32, 32), tt(F32, 32), tt(F32, 32))
    x, w, bias, gamma, beta = g.inputs
    h = g.op("GeLU", g.op("BiasAdd", g.op("MatMul", x, w), bias))
    y, _, _ = g.ops("LayerNorm", h, gamma, beta, epsilon=1e-5)
    graph = g.graph(g.op("Softmax", y))
    expanded = verify(expand(graph, CompileOptions()))
    assert ops(expanded).count("MatMul") == 1
    arrays = random_inputs(graph, 3)
    assert_close(interpret(expanded, arrays)[0], interpret(graph, arrays)[0])


@st.composite
def reduction_cases(draw):
    """A composite op that reduces, on a random small shape, with axes spelled positive or negative."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    rank = len(shape)
    axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1)))
    spelled = tuple(a - rank if draw(st.booleans()) else a for a in axes)
    op = draw(st.sampled_from(["ReduceMean", "Softmax", "LogSoftmax", "LayerNorm"]))
    if op == "ReduceMean":
        return op, [shape], dict(axis=spelled, keep_dims=draw(st.booleans()))
    if op == "LayerNorm":
        begin = axes[0] - rank if draw(st.booleans()) else axes[0]
        return op, [shape, shape[axes[0]:], shape[axes[0]:]], dict(begin_norm_axis=begin,
                                                                   begin_params_axis=begin)
    return op, [shape], dict(axis=spelled)


@settings(max_examples=40, deadline=None)
@given(reduction_cases(), st.sampled_from(FLOATS))
def test_random_reductions_expand_to_their_reference(case, dtype):
    op, shapes, attrs = case
    graph = single_op_graph(op, shapes, attrs, dtype)
    expanded = verify(expand(graph, EXPAND_ALL))
    arrays = scaled_inputs(graph, seed=len(shapes[0]))
    for got, want in zip(interpret(expanded, arrays), interpret(graph, arrays)):
        assert_close(got, want, err_msg=f"{op} {shapes} {attrs} {dtype}")


def test_a_strided_slice_that_only_drops_or_inserts_axes_is_a_reshape():
    g = GraphBuilder(tt(F32, 4, 1, 8))
    (x,) = g.inputs
    drop = g.op("StridedSlice", x, begin=(0, 0), end=(0, 1), strides=(1, 1), begin_mask=1, end_mask=1,
                shrink_axis_mask=2)
    insert = g.op("StridedSlice", x, begin=(0, 0), end=(1, 1), strides=(1, 1), new_axis_mask=1, ellipsis_mask=2)
    part = g.op("StridedSlice", x, begin=(1,), end=(3,), strides=(1,))
    expanded = verify(expand(g.graph(drop, insert, part), CompileOptions()))
    assert ops(expanded) == ["Reshape", "Reshape", "Slice"]
    assert [v.shape for v in expanded.outputs] == [(4, 8), (1, 4, 1, 8), (2, 1, 8)]


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("dtype", FLOATS + (I32,), ids=str)
def test_one_hot_expansion(dtype, axis):
    indices = np.array([[0, 7, 3], [-1, 8, 2]], np.int32)   # -1 and 8: outside [0, 8), a row of off_value
    g = GraphBuilder(tt(I32, 2, 3), tt(dtype), tt(dtype))
    graph = g.graph(g.op("OneHot", *g.inputs, depth=8, axis=axis))
    expanded = verify(expand(graph, CompileOptions()))
    assert "OneHot" not in ops(expanded)
    arrays = [indices, np.array(3, dtype.np), np.array(-2, dtype.np)]
    (got,), (want,) = interpret(expanded, arrays), interpret(graph, arrays)
    assert_close(got, want, bitwise=True)


def test_batch_norm_is_expanded_unless_disabled():
    graph = single_op_graph("BatchNorm", [(2, 3, 4, 4), (3,), (3,), (3,), (3,)], dict(is_training=True), F32)
    opts = CompileOptions(flags=parse_flags("--disable_expand_ops=BatchNorm", read_env=False))
    assert ops(expand(graph, opts)) == ["BatchNorm"]
    expanded = verify(expand(graph, CompileOptions()))
    assert "BatchNorm" not in ops(expanded)
    reductions = [n for n in expanded.nodes if n.op == "ReduceSum"]
    assert len(reductions) == 2 and all(n.attr("axis") == (0, 2, 3) and n.attr("keep_dims") for n in reductions)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_batch_norm_inference_expansion(dtype, data_format):
    rng = np.random.default_rng(4)
    shape = (2, 3, 5, 4) if data_format == "NCHW" else (2, 5, 4, 3)
    graph = single_op_graph("BatchNorm", [shape, (3,), (3,), (3,), (3,)], dict(data_format=data_format), dtype)
    expanded = verify(expand(graph, EXPAND_ALL))
    assert "BatchNorm" not in ops(expanded)
    arrays = [rng.standard_normal(shape), rng.standard_normal(3), rng.standard_normal(3),
              rng.standard_normal(3), rng.uniform(0.5, 2, 3)]
    arrays = [a.astype(dtype.np) for a in arrays]
    for got, want in zip(interpret(expanded, arrays), interpret(graph, arrays)):
        assert_close(got, want)
