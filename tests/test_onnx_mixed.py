"""ONNX with mixed compute: ops graphkernel does not convert run on the host through onnx.reference.

Models with an unsupported op in the middle (CumSum; TopK with two outputs and a constant k; Mod on
integers; Hardmax, whose output types come from a trial run when inference is skipped) against
ReferenceEvaluator on both targets; constant-only host nodes fold at trace time; without
mix_compile_mode the error names the op and the node and says to set it.
"""
import numpy as np
import pytest

import onnx

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphkernel.onnx as gx  # noqa: E402
from graphkernel import GraphKernelError, Tensor, context  # noqa: E402
from graphkernel.onnx import host_fallback  # noqa: E402
from tolerance import assert_close  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
TARGETS = pytest.mark.parametrize("target", ["CPU", "Ascend"])


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, dims, elem=F):
    return helper.make_tensor_value_info(name, elem, dims)


def cumsum_model():
    nodes = [helper.make_node("Mul", ["x", "x"], ["a"], name="square"),
             helper.make_node("CumSum", ["a", "axis"], ["b"], name="running_total"),
             helper.make_node("Exp", ["b"], ["c"], name="exp"),
             helper.make_node("Add", ["c", "x"], ["y"], name="add")]
    axis = numpy_helper.from_array(np.array(1, np.int64), "axis")
    return model(nodes, [vi("x", [3, 4])], [vi("y", [3, 4])], [axis])


def topk_model():
    nodes = [helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
             helper.make_node("TopK", ["t", "k"], ["values", "indices"], name="top2", axis=-1),
             helper.make_node("Mul", ["values", "values"], ["sq"], name="square"),
             helper.make_node("Cast", ["indices"], ["idx"], name="to_float", to=F),
             helper.make_node("Add", ["sq", "idx"], ["y"], name="add")]
    k = numpy_helper.from_array(np.array([2], np.int64), "k")
    return model(nodes, [vi("x", [5, 6])], [vi("y", [5, 2]), vi("indices", [5, 2], I64)], [k])


def mod_model():
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="sum"),
             helper.make_node("Mod", ["s", "m"], ["r"], name="mod"),
             helper.make_node("Mul", ["r", "a"], ["y"], name="mul")]
    m = numpy_helper.from_array(np.array(7, np.int64), "m")
    return model(nodes, [vi("a", [4, 4], I64), vi("b", [4, 4], I64)], [vi("y", [4, 4], I64)], [m])


def hardmax_model():
    nodes = [helper.make_node("Sub", ["x", "x0"], ["d"], name="sub"),
             helper.make_node("Hardmax", ["d"], ["h"], name="hardmax", axis=-1),
             helper.make_node("ReduceSum", ["h", "axes"], ["y"], name="total", keepdims=0)]
    x0 = numpy_helper.from_array(np.full((2, 5), 0.25, np.float32), "x0")
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    return model(nodes, [vi("x", [2, 5])], [vi("y", [5])], [x0, axes])


def feeds_for(m, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for i in m.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        if i.type.tensor_type.elem_type == I64:
            out[i.name] = rng.integers(-20, 20, shape).astype(np.int64)
        else:
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


MODELS = {"cumsum": cumsum_model, "topk": topk_model, "mod": mod_model, "hardmax": hardmax_model}


@TARGETS
@pytest.mark.parametrize("name", list(MODELS))
def test_an_unsupported_op_in_the_middle_runs_on_the_host(target, name):
    context.set_context(device_target=target, enable_graph_kernel=True, mix_compile_mode=True)
    m = MODELS[name]()
    feeds = feeds_for(m)
    want = ReferenceEvaluator(m).run(None, feeds)
    cell = gx.load(m)
    args = [Tensor(feeds[n]) for n in cell.input_names]
    got = cell(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want):
        assert_close(g.asnumpy(), w)
    kernels = cell.compile(*args).kernels
    assert [k.op_types for k in kernels if k.target == "host"] == [("PyFunc",)]
    assert any(k.target == "copy" for k in kernels)


def test_the_host_node_keeps_the_onnx_node_name_in_its_scope():
    context.set_context(device_target="CPU", mix_compile_mode=True)
    cell = gx.load(cumsum_model())
    graph = cell.compile(Tensor(np.ones((3, 4), np.float32))).graph
    host = [n for n in graph.nodes if n.op == "PyFunc"]
    assert [n.name for n in host] == ["Default/running_total/PyFunc-op1"]
    assert "onnx.CumSum['running_total']" in repr(host[0].attr("fn"))


def test_without_mix_compile_mode_loading_fails_naming_the_op():
    with pytest.raises(gx.OnnxImportError, match="CumSum") as info:
        gx.load(cumsum_model())
    message = str(info.value)
    assert "running_total" in message and "mix_compile_mode=True" in message


def test_a_host_node_on_constants_folds_at_trace_time():
    context.set_context(device_target="CPU", mix_compile_mode=True)
    nodes = [helper.make_node("CumSum", ["c", "axis"], ["s"], name="const_total"),
             helper.make_node("Add", ["x", "s"], ["y"], name="add")]
    inits = [numpy_helper.from_array(np.arange(4, dtype=np.float32), "c"),
             numpy_helper.from_array(np.array(0, np.int64), "axis")]
    m = model(nodes, [vi("x", [4])], [vi("y", [4])], inits)
    cell = gx.load(m)
    x = np.ones(4, np.float32)
    assert_close(cell(Tensor(x)).asnumpy(), x + np.cumsum(np.arange(4, dtype=np.float32)))
    assert not any(n.op == "PyFunc" for n in cell.compile(Tensor(x)).graph.nodes)


def test_output_types_come_from_a_trial_run_when_inference_cannot_tell(monkeypatch):
    monkeypatch.setattr(host_fallback, "_inferred_types", lambda model: None)
    context.set_context(device_target="CPU", mix_compile_mode=True)
    m = topk_model()
    feeds = feeds_for(m, 1)
    got = gx.load(m)(Tensor(feeds["x"]))
    for g, w in zip(got, ReferenceEvaluator(m).run(None, feeds)):
        assert_close(g.asnumpy(), w)


def test_a_data_dependent_output_shape_fails_clearly_at_run_time():
    context.set_context(device_target="CPU", mix_compile_mode=True)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("NonZero", ["r"], ["nz"], name="nonzero")]
    m = model(nodes, [vi("x", [6])], [vi("nz", [1, None], I64)])
    cell = gx.load(m)
    with pytest.raises(GraphKernelError, match="nonzero.*has shape \\[1, 4\\], out_shapes declares \\[1, 0\\]"):
        cell(Tensor(np.array([1, -1, 2, 0, 3, 4], np.float32)))


@pytest.mark.parametrize("between", [[], ["Transpose"]], ids=["Shape(NonZero)", "Shape(Transpose(NonZero))"])
def test_no_shape_is_folded_from_a_trial_run_of_a_host_op(between):
    """NonZero's output shape on zeros is a guess: folding Shape from it would give a wrong answer."""
    context.set_context(device_target="CPU", mix_compile_mode=True)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("NonZero", ["r"], ["t0"], name="nonzero")]
    for i, op in enumerate(between):
        nodes.append(helper.make_node(op, [f"t{i}"], [f"t{i + 1}"], name=f"between{i}"))
    nodes.append(helper.make_node("Shape", [f"t{len(between)}"], ["s"], name="shape"))
    cell = gx.load(model(nodes, [vi("x", [2, 7])], [vi("s", [2], I64)]))
    with pytest.raises(GraphKernelError, match=r"Shape node 'shape' .*: the shape of its input depends on "
                                               r"run-time data"):
        cell(Tensor(np.ones((2, 7), np.float32)))


def test_an_if_whose_branches_read_outer_values_runs_on_the_host():
    context.set_context(device_target="CPU", mix_compile_mode=True)
    then_branch = helper.make_graph([helper.make_node("Exp", ["x"], ["t"])], "then", [], [vi("t", [3, 4])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [3, 4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
             helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch, name="if")]
    m = model(nodes, [vi("x", [3, 4])], [vi("y", [3, 4])],
              inits=[numpy_helper.from_array(np.float32(0), "zero")])
    cell = gx.load(m)
    for sign in (1, -1):
        x = np.full((3, 4), 0.5 * sign, np.float32)
        (want,) = ReferenceEvaluator(m).run(None, {"x": x})
        assert_close(cell(Tensor(x)).asnumpy(), want)


def test_graphkernel_run_takes_mix_compile_mode(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path
    path = tmp_path / "cumsum.onnx"
    onnx.save(cumsum_model(), path)
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "graphkernel", "run", str(path), "--device-target", "CPU",
                               "--repeat", "1", *extra], capture_output=True, text=True, env=env, cwd=root,
                              timeout=600)
    refused = run()
    assert refused.returncode == 2 and "mix_compile_mode" in refused.stderr
    mixed = run("--mix-compile-mode")
    assert mixed.returncode == 0, mixed.stderr
    op_types = [line.split()[2] for line in mixed.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert "PyFunc" in op_types and "CopyToHost" in op_types
