"""The op table (ir/ops) holds every fact about an op, and what is generated from it agrees with it:
P.<Op> classes, ops.<functional>, Tensor methods, ONNX converters, kernel emitters, docs/ops.md."""
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphkernel.onnx
import kernels.emitters
from graphkernel import Tensor, context, ops
from graphkernel.tools.op_table import render
from graphkernel.ops import operations as P
from ir.ops import ALIASES, OPS, Cost, Pattern, evaluate, make_node
from kernels.fusible import unsupported_reason
from ir import GraphBuilder
from tests.kernel_graphs import fused
from tests.op_samples import dtypes, kernel_ops, sample
from tests.tolerance import assert_close

ROOT = Path(__file__).resolve().parents[1]


def test_docs_op_table_is_current():
    text = (ROOT / "docs" / "ops.md").read_text("utf-8")
    assert text == render(), "regenerate it: python -m graphkernel.tools.op_table > docs/ops.md"
    for name in OPS:
        assert f"| {name} |" in text


def test_every_primitive_row_has_its_class_and_every_alias_is_the_same_class():
    for name, d in OPS.items():
        if d.api.primitive:
            assert getattr(P, name).op == name
            assert getattr(ops, name) is getattr(P, name)
            assert getattr(P, name).call_attrs == d.api.call_attrs
    for alias, name in ALIASES.items():
        assert getattr(P, alias) is getattr(P, name)


def test_call_attributes_are_attributes_of_the_op():
    for name, d in OPS.items():
        assert set(d.api.call_attrs) <= {a.name for a in d.attrs}, name


def _eager(fn, arrays):
    return np.asarray(fn(*[Tensor(a) for a in arrays]).asnumpy())


@pytest.mark.parametrize("op", [op for op in kernel_ops(1) + kernel_ops(2) if OPS[op].api.functional or OPS[op].api.method])
def test_functional_and_method_compute_the_op(op):
    d = OPS[op]
    context.set_context(device_target="CPU")
    dtype = dtypes(op)[0]
    arrays = [sample(op, (3, 4), dtype, seed=k) for k in range(d.arity)]
    node = make_node(op, [v for v in _inputs(arrays)])
    (want,) = evaluate(node, arrays)
    if d.api.functional:
        assert_close(_eager(getattr(ops, d.api.functional), arrays), want, bitwise=True)
    if d.api.method:
        assert_close(_eager(lambda x, *rest: getattr(x, d.api.method)(*rest), arrays), want, bitwise=True)


def _inputs(arrays):
    from ir.dtypes import as_dtype
    from ir.graph import Graph, TensorType
    return Graph.with_inputs([TensorType(a.shape, as_dtype(a.dtype)) for a in arrays])


ONNX_TYPES = {"float32": TensorProto.FLOAT, "bool": TensorProto.BOOL}


@pytest.mark.parametrize("op,onnx_op", [(name, o) for name, d in OPS.items() for o in d.onnx])
def test_onnx_names_convert_to_exactly_the_op(op, onnx_op, tmp_path):
    d = OPS[op]
    dtype = "bool" if d.domain == "bool" else "float32"
    names = [f"x{k}" for k in range(d.arity)]
    out_dtype = make_node(op, _inputs([np.zeros((2, 3), dtype)] * d.arity)).out.dtype.name
    graph = helper.make_graph(
        [helper.make_node(onnx_op, names, ["y"], name="n")], "one",
        [helper.make_tensor_value_info(n, ONNX_TYPES[dtype], [2, 3]) for n in names],
        [helper.make_tensor_value_info("y", ONNX_TYPES[out_dtype], [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    cell = graphkernel.onnx.load(model)
    arrays = [sample(op, (2, 3), dtype, seed=k) for k in range(d.arity)]
    compiled = cell.compile(*[Tensor(a) for a in arrays])
    assert [n.op for n in compiled.stages["validate"].nodes] == [op]


def test_an_op_without_an_emitter_fails_at_import_and_is_never_fused(monkeypatch):
    monkeypatch.delitem(kernels.emitters.EMITTERS, "Exp")
    with pytest.raises(ImportError, match="Exp"):
        kernels.emitters._check_table()
    b = GraphBuilder()
    x = b.input((4,))
    assert "Exp has no kernel emitter" in unsupported_reason(fused(b.graph(b.op("Exp", x))).nodes[0].subgraph)


def test_facts_the_kernels_and_the_cost_model_read_agree_with_the_emitters():
    """float16_exact ops need no rounding: their emitters only select or negate; transcendental ops cost
    the most and reductions have reducers."""
    for name, d in OPS.items():
        if d.pattern == Pattern.REDUCE and not d.expandable:
            assert name in kernels.emitters.REDUCERS
        if d.float16_exact:
            assert d.cost <= Cost.ARITH, name
