"""ONNX models built with onnx.helper, run through graphkernel and compared with
onnx.reference.ReferenceEvaluator: BERT-style layers (fusion on and off, CPU and the numba target), and the
frontend's own behaviours (MatMul ranks, multi-output order, Parameters, dynamic dims, static inputs,
constant folding, Gather, integer Div, scope names)."""
import numpy as np
import pytest

import onnx

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from graphkernel import Tensor, context  # noqa: E402
import graphkernel.onnx as gx  # noqa: E402
from graphkernel.onnx.examples import bert_layer_inputs, bert_layer_model  # noqa: E402
from tolerance import assert_close  # noqa: E402

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, dims, elem=F):
    return helper.make_tensor_value_info(name, elem, dims)


def reference(m, feeds: dict):
    return ReferenceEvaluator(m).run(None, feeds)


def run(m, feeds: dict):
    cell = gx.load(m)
    out = cell(*[Tensor(feeds[n]) for n in cell.input_names])
    return [t.asnumpy() for t in (out if isinstance(out, tuple) else (out,))]


# -- BERT-style layers ------------------------------------------------------------------------------

BERT = dict(hidden=32, heads=4, seq=8, batch=2)


def _bert(gelu, fuse):
    context.set_context(enable_graph_kernel=fuse)
    m = bert_layer_model(gelu=gelu, **BERT)
    feeds = bert_layer_inputs(m)
    cell = gx.load(m)
    args = [Tensor(feeds["x"]), Tensor(feeds["mask"])]
    got = cell(*args).asnumpy()
    assert_close(got, reference(m, feeds)[0])
    return len(cell.compile(*args).kernels)


@pytest.mark.parametrize("gelu", ["erf", "tanh", "op"])
def test_bert_layer_matches_reference_fused_and_unfused(cpu, gelu):
    unfused = _bert(gelu, False)
    fused = _bert(gelu, True)
    assert fused < unfused  # bias+GeLU, softmax and the LayerNorms fuse


@pytest.mark.parametrize("gelu", ["erf", "tanh"])
def test_bert_layer_on_numba_kernels(gelu):
    context.set_context(device_target="Ascend")
    unfused = _bert(gelu, False)
    fused = _bert(gelu, True)
    assert fused < unfused


def test_bert_layer_weights_are_parameters(cpu):
    cell = gx.load(bert_layer_model(**BERT))
    names = dict(cell.parameters_and_names())
    assert any(n.startswith("attention.query.weight") for n in names)
    assert all(p.size > 64 for p in names.values())  # small tensors (shapes, LayerNorm's) stay constants


# -- MatMul ranks: numpy semantics -------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [((4,), (4, 3)), ((2, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
                                   ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((2, 3, 4), (2, 4, 5))])
def test_matmul_ranks(cpu, sa, sb):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    out_shape = np.matmul(a, b).shape
    m = model([helper.make_node("MatMul", ["a", "b"], ["y"])], [vi("a", sa), vi("b", sb)],
              [vi("y", out_shape)])
    (got,) = run(m, {"a": a, "b": b})
    assert_close(got, np.matmul(a, b))


def test_gemm_transposes_alpha_beta(cpu):
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (5, 4), (5,)))
    m = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)],
              [vi("a", [4, 3]), vi("b", [5, 4]), vi("c", [5])], [vi("y", [3, 5])])
    feeds = {"a": a, "b": b, "c": c}
    assert_close(run(m, feeds)[0], reference(m, feeds)[0])


# -- outputs, parameters, shapes ---------------------------------------------------------------------

def test_several_outputs_in_declared_order(cpu):
    x = np.random.default_rng(2).standard_normal((2, 3, 6)).astype(np.float32)
    scale = numpy_helper.from_array(np.linspace(0.5, 1.5, 6, dtype=np.float32), "scale")
    nodes = [helper.make_node("LayerNormalization", ["x", "scale"], ["y", "mean", "inv"], axis=-1),
             helper.make_node("Split", ["x"], ["s0", "s1"], axis=2, num_outputs=2)]
    outs = [vi("inv", [2, 3, 1]), vi("s1", [2, 3, 3]), vi("y", [2, 3, 6]), vi("s0", [2, 3, 3])]
    m = model(nodes, [vi("x", [2, 3, 6])], outs, [scale], opset=18)
    cell = gx.load(m)
    assert cell.output_names == ["inv", "s1", "y", "s0"]
    got = cell(Tensor(x))
    assert isinstance(got, tuple) and len(got) == 4
    for g, e in zip(got, reference(m, {"x": x})):
        assert_close(g.asnumpy(), e)


def test_parameter_set_data_changes_result_without_retrace(cpu):
    w = np.ones((16, 16), np.float32)
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 16])], [vi("y", [2, 16])],
              [numpy_helper.from_array(w, "w")])
    cell = gx.load(m)
    x = Tensor(np.ones((2, 16), np.float32))
    assert_close(cell(x).asnumpy(), np.full((2, 16), 16, np.float32))
    dict(cell.parameters_and_names())["w"].set_data(np.full((16, 16), 2, np.float32))
    assert_close(cell(x).asnumpy(), np.full((2, 16), 32, np.float32))
    assert len(cell._variants) == 1 and next(iter(cell._variants.values())).trace_count == 1


def test_dynamic_dims_compile_once_for_every_size(cpu):
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [vi("x", ["batch", 5])],
              [vi("y", ["batch", 5])])
    cell = gx.load(m)
    compiled = set()
    for batch in (2, 3, 1, 17):
        x = np.random.default_rng(batch).standard_normal((batch, 5)).astype(np.float32)
        assert_close(cell(Tensor(x)).asnumpy(), reference(m, {"x": x})[0])
        compiled.add(id(cell.compile(Tensor(x))))
    assert len(compiled) == 1


@pytest.mark.parametrize("opset", [7, 13])
def test_dropout_mask_follows_a_dynamic_dim(cpu, opset):
    """Dropout's mask of ones has x's shape at every size of a dynamic dim (it was the traced size's
    constant); version 7's mask has x's type, later ones are bool."""
    mask_type = F if opset < 10 else TensorProto.BOOL
    m = model([helper.make_node("Dropout", ["x"], ["y", "mask"])], [vi("x", ["batch", 3])],
              [vi("y", ["batch", 3]), vi("mask", ["batch", 3], mask_type)], opset=opset)
    cell = gx.load(m)
    for batch in (2, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 3)).astype(np.float32)
        y, mask = (t.asnumpy() for t in cell(Tensor(x)))
        assert_close(y, x)
        assert mask.shape == x.shape and mask.dtype == (np.float32 if opset < 10 else np.bool_) and mask.all()


def test_static_input_compiles_per_value(cpu):
    m = model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
              [vi("x", [2, 6]), vi("shape", [2], TensorProto.INT64)], [vi("y", [None, None])])
    cell = gx.load(m)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for shape in ([3, 4], [4, -1]):
        got = cell(Tensor(x), Tensor(np.array(shape, np.int64))).asnumpy()
        assert_close(got, x.reshape(shape))
    assert len(cell._variants) == 2


def test_shape_arithmetic_folds_to_a_static_reshape(cpu):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as torch exports x.view(x.size(0), -1)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]),
             helper.make_node("Concat", ["b1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array(v, np.int64), name)
             for name, v in (("zero", 0), ("axes", [0]), ("minus1", [-1]))]
    m = model(nodes, [vi("x", [2, 3, 4])], [vi("y", [2, 12])], inits)
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    cell = gx.load(m)
    assert_close(cell(Tensor(x)).asnumpy(), x.reshape(2, 12))
    ops = [n.op for n in cell.compile(Tensor(x)).stages["validate"].nodes]
    assert ops == ["Reshape"]


def test_gather_constant_scalar_index_and_runtime_indices(cpu):
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[2, 0], [-1, 1]], np.int64)
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    nodes = [helper.make_node("Gather", ["x", "one"], ["row"], axis=1),
             helper.make_node("Gather", ["x", "idx"], ["picked"], axis=0)]
    m = model(nodes, [vi("x", [3, 4]), vi("idx", [2, 2], TensorProto.INT64)],
              [vi("row", [3]), vi("picked", [2, 2, 4])], [one])
    cell = gx.load(m)
    row, picked = cell(Tensor(x), Tensor(idx))
    assert_close(row.asnumpy(), x[:, 1])
    assert_close(picked.asnumpy(), np.take(x, idx, axis=0))
    ops = {n.op for n in cell.compile(Tensor(x), Tensor(idx)).stages["validate"].nodes}
    assert {"Slice", "Gather"} <= ops


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_div_truncates_toward_zero(cpu, dtype):
    elem = TensorProto.INT32 if dtype == np.int32 else TensorProto.INT64
    m = model([helper.make_node("Div", ["a", "b"], ["y"])], [vi("a", [4], elem), vi("b", [4], elem)],
              [vi("y", [4], elem)])
    a, b = np.array([-7, 7, -8, 9], dtype), np.array([2, -2, 3, 4], dtype)
    (got,) = run(m, {"a": a, "b": b})
    np.testing.assert_array_equal(got, np.array([-3, -3, -2, 2], dtype))


def test_onnx_node_names_are_kept_in_scope_names(cpu):
    hostile = "x'); import os; os._exit(3) #/\"{}{0}\n"
    m = model([helper.make_node("Relu", ["x"], ["y"], name=hostile)], [vi("x", [3])], [vi("y", [3])])
    cell = gx.load(m)
    x = Tensor(np.array([-1, 0, 2], np.float32))
    assert_close(cell(x).asnumpy(), np.array([0, 0, 2], np.float32))
    names = [n.name for n in cell.compile(x).stages["validate"].nodes]
    assert any(name.startswith(f"Default/{hostile}/ReLU-op") for name in names)


def test_onnx_node_names_with_slashes_give_scope_names_without_empty_parts(cpu):
    """Exporters name nodes `/matmul_2/MatMul`: the scope name is Default/matmul_2/MatMul/..., not Default//..."""
    m = model([helper.make_node("Relu", ["x"], ["h"], name="/relu_1/Relu"),
               helper.make_node("Neg", ["h"], ["y"], name="//neg//")], [vi("x", [3])], [vi("y", [3])])
    cell = gx.load(m)
    x = Tensor(np.array([-1, 0, 2], np.float32))
    names = [n.name for n in cell.compile(x).stages["validate"].nodes if n.op != "Const"]
    assert names == ["Default/relu_1/Relu/ReLU-op0", "Default/neg/Neg-op1"]


def test_pynative_mode_runs_the_model_compiled(cpu):
    context.set_context(mode=context.PYNATIVE_MODE)
    m = model([helper.make_node("Sigmoid", ["x"], ["y"])], [vi("x", [3])], [vi("y", [3])])
    x = np.array([-1, 0, 2], np.float32)
    assert_close(run(m, {"x": x})[0], reference(m, {"x": x})[0])


@pytest.mark.parametrize("opset,node,inits,out", [
    (13, helper.make_node("ReduceMean", ["x"], ["y"], axes=[0, -1], keepdims=0), [], [3]),
    (17, helper.make_node("ReduceMax", ["x"], ["y"], axes=[1]), [], [2, 1, 4]),
    (18, helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0), [("axes", [1, 2])], [2]),
    (13, helper.make_node("ReduceSum", ["x", "axes"], ["y"], noop_with_empty_axes=1), [("axes", [])],
     [2, 3, 4]),
    (13, helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0), [], []),
])
def test_reduction_axes_as_attribute_or_input(cpu, opset, node, inits, out):
    x = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)
    tensors = [numpy_helper.from_array(np.array(v, np.int64), name) for name, v in inits]
    m = model([node], [vi("x", [2, 3, 4])], [vi("y", out)], tensors, opset)
    expected = reference(m, {"x": x})[0]
    assert expected.shape == tuple(out)
    assert_close(run(m, {"x": x})[0], expected)


def test_layer_norm_float16_computes_in_float32_with_float32_statistics(cpu):
    """stash_type=1 (the default): mean and variance in float32; Mean and InvStdDev are float32."""
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((3, 16)) * 4 + 2).astype(np.float16)
    scale = rng.standard_normal(16).astype(np.float16)
    m = model([helper.make_node("LayerNormalization", ["x", "scale"], ["y", "mean", "inv"], epsilon=1e-3)],
              [vi("x", [3, 16], TensorProto.FLOAT16)],
              [vi("y", [3, 16], TensorProto.FLOAT16), vi("mean", [3, 1]), vi("inv", [3, 1])],
              [numpy_helper.from_array(scale, "scale")])
    y, mean, inv = run(m, {"x": x})
    x32 = x.astype(np.float32)
    mu = x32.mean(axis=-1, keepdims=True)
    istd = 1 / np.sqrt(((x32 - mu) ** 2).mean(axis=-1, keepdims=True) + np.float32(1e-3))
    assert_close(mean, mu)
    assert_close(inv, istd.astype(np.float32))
    assert_close(y, ((x32 - mu) * istd).astype(np.float16) * scale)


def test_model_with_external_data(cpu, tmp_path):
    w = np.arange(24, dtype=np.float32).reshape(4, 6) / 10
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 4])], [vi("y", [2, 6])],
              [numpy_helper.from_array(w, "w")])
    path = tmp_path / "ext.onnx"
    onnx.save(m, path, save_as_external_data=True, location="ext.bin", size_threshold=0)
    assert (tmp_path / "ext.bin").exists()
    x = np.ones((2, 4), np.float32)
    cell = gx.load(path)
    assert_close(cell(Tensor(x)).asnumpy(), x @ w)


def test_onnx_model_as_a_sub_cell(cpu):
    """An OnnxCell called inside another Cell's construct is inlined into that Cell's graph."""
    from graphkernel.nn import Cell
    from graphkernel.ops import operations as P
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [vi("x", [2, 5])], [vi("y", [2, 5])])

    class Net(Cell):
        def __init__(self):
            super().__init__()
            self.softmax = gx.load(m)
            self.mul = P.Mul()

        def construct(self, x):
            return self.mul(self.softmax(x), 2.0)

    x = np.random.default_rng(7).standard_normal((2, 5)).astype(np.float32)
    net = Net()
    assert_close(net(Tensor(x)).asnumpy(), reference(m, {"x": x})[0] * np.float32(2))
    names = [n.name for n in net.compile(Tensor(x)).stages["validate"].nodes]
    assert any("/Softmax_0/Softmax-op" in name for name in names)
