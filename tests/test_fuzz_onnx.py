"""Fuzzing the ONNX frontend: mutated valid models either load (and then compile and run on the CPU target)
or raise one of graphkernel's documented exceptions (GraphKernelError subclasses), never anything else.

    seed models (onnx.helper) --mutate--> bytes (flips, truncation, insertion, deletion)
                              \\--------> protobuf fields (dims, dtypes, attributes, names, opsets, op
                                          types, initializer data, dangling names, cycles, duplicates)
    one node of any op, inputs and attributes drawn from its schema (ours; the others in mix_compile_mode)
    gx.load(...) -> cell(random inputs)   ok, or a deliberate GraphKernelError; anything else fails

The models are in fuzz_onnx_models.py. A short bounded run by default (CI); GRAPHKERNEL_FUZZ_EXAMPLES=20000
runs that many examples per test. Every example runs under a time and a memory bound (fuzz_helpers.py),
so a hang or an unchecked allocation fails too. At the end: what fuzzing found, pinned as plain tests.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given

import onnx

from onnx import helper, numpy_helper  # noqa: E402

from graphkernel import Tensor, context  # noqa: E402
import graphkernel.onnx as gx  # noqa: E402
from fuzz_helpers import EXAMPLE_SECONDS, bounded, deliberate, fuzz_settings  # noqa: E402
from fuzz_onnx_models import (F, HOST_OPS, I32, I64, SEEDS, const, model, mutated_models,  # noqa: E402
                              random_node_models, vi)
from ir.errors import GraphKernelError  # noqa: E402

RUN_ELEMENTS = 1 << 20        # inputs larger than this are not generated (the model still loads)
MEMORY_LIMIT = 256 << 20      # graphkernel's max_device_memory: larger declared tensors are refused


def _random_inputs(cell, seed: int = 0):
    """Random Tensors for the declared inputs (named dims of size 2; static inputs, which the model reads
    as shape data, hold small ints), or None when some input declares no shape or is too large."""
    if not any(s.static for s in cell.spec.inputs):
        named = {d: 2 for s in cell.spec.inputs for d in (s.dims or ()) if isinstance(d, str)}
        inputs = cell.random_inputs(seed=seed, dims=named)
    else:
        rng = np.random.default_rng(seed)
        if any(s.dims is None for s in cell.spec.inputs):
            return None
        shapes = [tuple(d if isinstance(d, int) else 2 for d in s.dims) for s in cell.spec.inputs]
        if sum(np.prod(shape, dtype=object) for shape in shapes) > RUN_ELEMENTS:
            return None
        inputs = [Tensor((rng.integers(-2, 4, shape) if s.static else rng.standard_normal(shape))
                         .astype(s.dtype.np)) for s, shape in zip(cell.spec.inputs, shapes)]
    return inputs if sum(t.asnumpy().size for t in inputs) <= RUN_ELEMENTS else None


def load_and_run(source):
    """Load the model; if that works, compile and run it on the CPU target on random inputs.

    Returns normally, or raises a GraphKernelError; any other exception is a bug the fuzzer found."""
    cell = gx.load(source)
    inputs = _random_inputs(cell)
    if inputs is not None:
        cell(*inputs)


def check(seed: str, source, mix_compile_mode: bool = False) -> None:
    """load_and_run either works or raises a deliberate GraphKernelError, within the time limit."""
    context.set_context(device_target="CPU", max_device_memory=MEMORY_LIMIT,
                        mix_compile_mode=mix_compile_mode)
    try:
        with bounded(EXAMPLE_SECONDS, f"mutated {seed} model"):
            load_and_run(source)
    except GraphKernelError as e:
        if not deliberate(e):
            raise


@fuzz_settings(400)
@given(mutated_models("fields"))
def test_mutated_fields_load_or_raise_our_errors(case):
    check(*case)


@fuzz_settings(400)
@given(random_node_models())
def test_random_nodes_load_or_raise_our_errors(case):
    check(*case)


@fuzz_settings(300)
@given(random_node_models(HOST_OPS))
def test_host_ops_in_mix_compile_mode_load_or_raise_our_errors(case):
    check(*case, mix_compile_mode=True)


@fuzz_settings(200)
@given(mutated_models("bytes"))
def test_mutated_bytes_load_or_raise_our_errors(case):
    check(*case)


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_seed_models_load_and_run(seed):
    context.set_context(device_target="CPU")
    cell = gx.load(SEEDS[seed]())
    cell(*_random_inputs(cell))


# -- what fuzzing found, pinned: each gave an IndexError, ValueError, OverflowError, a hang or a silent
#    wrong answer before ------------------------------------------------------------------------------

def one_node(op, inputs, attrs=None, inits=(), opset=18, outputs=1):
    """A model of one `op` node named "the_node" on graph inputs `inputs` ((name, dims, elem)) and
    initializers `inits` ((name, array))."""
    names = [i[0] for i in inputs] + [name for name, _ in inits]
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, names, outs, name="the_node", **(attrs or {}))
    return model([node], [vi(name, dims, elem) for name, dims, elem in inputs], [vi(o, []) for o in outs],
                 [const(name, arr) for name, arr in inits], opset=opset)


I64S = lambda *v: np.array(v, np.int64)  # noqa: E731
FOUND = {
    "Split of a 0-d tensor": (one_node("Split", [("x", [], F)], {"axis": 0}, outputs=2), "rank 0"),
    "Gather from a 0-d tensor": (one_node("Gather", [("x", [], F)], inits=[("i", I64S(0))]), "rank 0"),
    "reduction axis out of range": (one_node("ReduceSum", [("x", [2, 3], F)], inits=[("axes", I64S(5))]),
                                    "5 is out of range for rank 2"),
    "reduction axes of a 0-d tensor": (one_node("ReduceMax", [("x", [], F)], inits=[("axes", I64S(0))]),
                                       "out of range for rank 0"),
    "Split num_outputs unlike its outputs": (one_node("Split", [("x", [4], F)], {"num_outputs": 2**62},
                                                      outputs=2), "num_outputs=4611686018427387904"),
    "Range of vectors": (one_node("Range", [], inits=[("s", I64S(0, 1)), ("l", I64S(4)), ("d", I64S(1))]),
                         "'start' must be one finite number"),
    "Dropout training_mode of two": (one_node("Dropout", [("x", [2], F)], inits=[
        ("r", np.float32(0.5)), ("t", np.array([True, False]))]), "must be one bool"),
    "LeakyRelu alpha on ints": (one_node("LeakyRelu", [("x", [2], I32)], {"alpha": 0.01}, opset=16),
                                "no exact int32 value"),
    "ThresholdedRelu alpha=inf on ints": (one_node("ThresholdedRelu", [("x", [2], I64)],
                                                   {"alpha": float("inf")}), "inf has no exact int64 value"),
    "ReduceLogSum of nothing in ints": (one_node("ReduceLogSum", [("x", [0, 2], I64)],
                                                 inits=[("axes", I64S(0))]), "cannot hold"),
    "ConstantOfShape negative": (one_node("ConstantOfShape", [], inits=[("s", I64S(2, -3))]), "negative dim"),
    "negative declared dim": (model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", [2, -1])],
                                    [vi("y", [2, -1])]), "declares a negative dim"),
}


@pytest.mark.parametrize("case", sorted(FOUND))
def test_found_by_fuzzing_raises_a_clear_error(case):
    m, message = FOUND[case]
    context.set_context(device_target="CPU")
    with pytest.raises(gx.OnnxImportError, match=re.escape(message)) as err:
        load_and_run(m)
    assert "the_node" in str(err.value) or "graph input" in str(err.value)


def test_non_utf8_name_is_refused_naming_the_field():
    data = one_node("Neg", [("x", [2], F)]).SerializeToString().replace(b"the_node", b"the_\x87ode")
    with pytest.raises(gx.OnnxImportError, match=r"model\.graph\.node\[0\]\.name is not valid UTF-8"):
        gx.load(data)


@pytest.mark.parametrize("op,dims", [("Softmax", [2, 0]), ("LogSoftmax", [0, 3]), ("Transpose", [])])
def test_empty_and_0d_inputs_run_as_the_reference_does(op, dims):
    from onnx.reference import ReferenceEvaluator
    context.set_context(device_target="CPU")
    m = one_node(op, [("x", dims, F)])
    x = np.full(dims, 1.5, np.float32)
    got = gx.load(m)(Tensor(x)).asnumpy()
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _external(tensor, location: str):
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("length", "8")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _external_model(in_attribute: bool):
    """x + w, w's 8 bytes in the file "w.bin" (an initializer, or a Constant node's value)."""
    w = _external(numpy_helper.from_array(np.zeros(2, np.float32), "w"), "w.bin")
    w.ClearField("raw_data")
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="the_node")]
    if in_attribute:
        nodes.insert(0, helper.make_node("Constant", [], ["w"], value=w))
    return model(nodes, [vi("x", [2])], [vi("y", [2])], [] if in_attribute else [w])


def test_external_data_is_read_only_next_to_a_model_file(tmp_path, monkeypatch):
    """A model given as bytes or a ModelProto has no directory: its external data would be read from the
    working directory (any file there, as the model's weights), so it is refused; from a file it is read."""
    context.set_context(device_target="CPU")
    np.arange(2, dtype=np.float32).tofile(tmp_path / "w.bin")
    monkeypatch.chdir(tmp_path)
    m = _external_model(in_attribute=False)
    onnx.save(m, tmp_path / "m.onnx")
    y = gx.load(tmp_path / "m.onnx")(Tensor(np.ones(2, np.float32))).asnumpy()
    np.testing.assert_array_equal(y, [1, 2])
    for source in (m, m.SerializeToString()):
        with pytest.raises(gx.OnnxImportError, match=r"initializer\[0\] \(tensor 'w'\) keeps its data in "
                                                     r"the external file 'w.bin'.*pass the model's file path"):
            gx.load(source)
    onnx.save(_external_model(in_attribute=True), tmp_path / "a.onnx")
    with pytest.raises(gx.OnnxImportError, match=r"node\[0\]\.attribute\[0\]\.t .*initializers only"):
        gx.load(tmp_path / "a.onnx")
