"""Older opsets: ONNX versions each op on its own, and graphkernel converts a node when the op's version in
force at the model's opset is one its converter implements (graphkernel/onnx/registry.py).

    the node cases at older opsets    every ONNX backend node case (the conformance test's), its model
                                      imported at each older opset that puts other versions of its ops in
                                      force and still passes onnx.checker's full check: converted and
                                      compared with onnx.reference.ReferenceEvaluator at that opset, or,
                                      when an op's version there is older than its converter's
                                      min_version, refused naming op, version and opset
    explicit tests                    the old forms no node case reaches (axes and sizes as attributes,
                                      Clip's bounds as attributes), and the versions whose onnx.reference
                                      implementation departs from the ONNX spec (REFERENCE_DEPARTS)
    coverage                          every version before 13 we convert runs in one or the other
"""
import math

import numpy as np
import pytest

import onnx
import onnx.defs
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from graphkernel import Tensor, context
import graphkernel.onnx as gx
from graphkernel.onnx import OnnxImportError
from graphkernel.onnx.registry import CONVERTERS
from test_onnx_node_conformance import CASES, EXPECTED_REJECTION, _array
from tolerance import assert_close

F = TensorProto.FLOAT

# versions whose onnx.reference (1.23.2) implementation departs from the ONNX spec, or is missing: the
# node cases holding them are left out of the sweep and the explicit tests below check them against the
# spec's formula
REFERENCE_DEPARTS = {
    ("Softmax", 1): "computes version 13's single axis, not the input coerced to 2-D at axis",
    ("Softmax", 11): "computes version 13's single axis, not the input coerced to 2-D at axis",
    ("LogSoftmax", 1): "computes version 13's single axis, not the input coerced to 2-D at axis",
    ("LogSoftmax", 11): "computes version 13's single axis, not the input coerced to 2-D at axis",
    ("BatchNormalization", 7): "goes to training mode when is_test (an attribute of version 6) is absent, "
                               "and fails",
    ("BatchNormalization", 9): "normalizes by the batch's statistics blended by momentum, where version 9 "
                               "with Y alone is in test mode",
    ("DequantizeLinear", 10): "has no implementation before version 19",
}


def _versions(m, opset: int):
    """The versions in force at `opset` of the model's ops, or None when one is younger than the opset."""
    out = []
    for node in m.graph.node:
        try:
            out.append(onnx.defs.get_schema(node.op_type, opset, node.domain).since_version)
        except Exception:  # noqa: BLE001 - SchemaError: the op did not exist yet
            return None
    return tuple(out)


def _default_opset(m) -> int:
    return next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


def _at_opset(m, opset: int):
    out = onnx.ModelProto()
    out.CopyFrom(m)
    for o in out.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = opset
    return out


def _variants():
    """(case, opset, model, versions): each node case at every opset before 13 (its own included) that puts
    a new tuple of versions of its ops in force, where the model passes onnx.checker's full check."""
    out = []
    for case in CASES:
        if case.name in EXPECTED_REJECTION:   # refused at its own opset for other reasons (types, ...)
            continue
        own = _default_opset(case.model)
        seen = set() if own < 13 else {_versions(case.model, own)}
        for opset in range(min(own, 12), 0, -1):
            versions = _versions(case.model, opset)
            if versions is None or versions in seen:
                continue
            seen.add(versions)
            m = _at_opset(case.model, opset)
            try:
                onnx.checker.check_model(m, full_check=True)
            except Exception:  # noqa: BLE001 - an input, attribute or type the op's version there lacks
                continue
            ops = [(n.op_type, v) for n, v in zip(m.graph.node, versions)]
            if not any(op in REFERENCE_DEPARTS for op in ops):
                out.append((case, opset, m, ops))
    return out


VARIANTS = _variants()


def _too_old(ops):
    return [(op, v) for op, v in ops if v < CONVERTERS[op].min_version]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v[0].name}@opset{v[1]}")
def test_node_cases_at_older_opsets(variant, cpu):
    case, opset, m, ops = variant
    context.set_context(enable_graph_kernel=True)
    too_old = _too_old(ops)
    if too_old:
        op, version = too_old[0]
        with pytest.raises(OnnxImportError, match=rf"op {op} \(node .*\) is version {version} at the model's "
                                                  rf"opset {opset}, which graphkernel does not implement"):
            gx.load(m)
        return
    cell = gx.load(m)
    ref = ReferenceEvaluator(m)
    for inputs, _ in case.data_sets:
        arrays = [_array(a) for a in inputs]
        expected = ref.run(None, {vi.name: a for vi, a in zip(m.graph.input, arrays)})
        got = cell(*[Tensor(a) for a in arrays])
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(expected)
        for name, g, e in zip(cell.output_names, got, expected):
            g, e = g.asnumpy(), np.asarray(e)
            assert g.dtype == e.dtype and g.shape == e.shape, f"output {name}: {g.dtype}{g.shape}, expected " \
                                                              f"{e.dtype}{e.shape}"
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                       err_msg=f"output {name}")


def test_the_sweep_converts_and_refuses():
    """The sweep is not empty on either side: older versions converted, and older still refused."""
    converted = [v for v in VARIANTS if not _too_old(v[3])]
    refused = [v for v in VARIANTS if _too_old(v[3])]
    assert len(converted) > 300 and len(refused) > 100
    assert {"test_and2d", "test_not_2d", "test_dropout_default_old", "test_dynamicquantizelinear_expanded"} <= \
        {case.name for case, *_ in converted}


# -- explicit tests ---------------------------------------------------------------------------------------

def vi(name, arr_or_dims, elem=F):
    if isinstance(arr_or_dims, np.ndarray):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr_or_dims.dtype),
                                             arr_or_dims.shape)
    return helper.make_tensor_value_info(name, elem, arr_or_dims)


def one_node(op, feeds: dict, outputs, opset: int, inits=(), declared=None, full_check=True, **attrs):
    """A one-node model of `op` at `opset` on the graph inputs `feeds` (name -> array), outputs typed by
    ONNX's shape inference or `declared` (name -> float dims) where it leaves them untyped; checked by
    onnx.checker as the loader checks it, and by its full check (shape inference) unless told not to."""
    node = helper.make_node(op, list(feeds) + [name for name, _ in inits], list(outputs), name=f"the_{op}",
                            **attrs)
    graph = helper.make_graph([node], "m", [vi(k, v) for k, v in feeds.items()],
                              [helper.make_value_info(o, onnx.TypeProto()) for o in outputs],
                              [numpy_helper.from_array(a, name) for name, a in inits])
    m = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    for out in m.graph.output:
        if not out.type.HasField("tensor_type"):
            out.CopyFrom(vi(out.name, declared[out.name]))
    onnx.checker.check_model(m, full_check=full_check)
    return m


def run(m, feeds: dict):
    cell = gx.load(m)
    out = cell(*[Tensor(feeds[n]) for n in cell.input_names])
    return [t.asnumpy() for t in (out if isinstance(out, tuple) else (out,))]


def reference(m, feeds: dict):
    return [np.asarray(a) for a in ReferenceEvaluator(m).run(None, feeds)]


def _x(shape=(2, 3, 4), seed=0, positive=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    return np.abs(x) + np.float32(0.5) if positive else x


@pytest.mark.parametrize("op,opset,attrs,shape", [
    ("Squeeze", 11, dict(axes=[-1]), (2, 3, 1)),
    ("Squeeze", 11, {}, (1, 3, 1)),
    ("Squeeze", 1, dict(axes=[0]), (1, 3, 4)),
    ("Unsqueeze", 11, dict(axes=[0, -1]), (2, 3)),
    ("Unsqueeze", 1, dict(axes=[1]), (2, 3)),
    ("Split", 11, dict(axis=-1, split=[1, 3]), (2, 3, 4)),
    ("Split", 2, dict(axis=1, split=[2, 1]), (2, 3, 4)),
    ("Split", 2, {}, (4, 3)),
])
def test_axes_and_sizes_as_attributes(cpu, op, opset, attrs, shape):
    """Squeeze's and Unsqueeze's axes and Split's sizes, attributes before version 13."""
    outputs = ["y", "z"] if op == "Split" else ["y"]
    feeds = {"x": _x(shape)}
    m = one_node(op, feeds, outputs, opset, **attrs)
    for got, expected in zip(run(m, feeds), reference(m, feeds), strict=True):
        assert_close(got, expected)


REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2", "ReduceSumSquare",
              "ReduceLogSum", "ReduceLogSumExp"]


@pytest.mark.parametrize("opset,attrs", [(12, dict(axes=[0, -1], keepdims=0)), (11, {}),
                                         (1, dict(axes=[1], keepdims=1))])
@pytest.mark.parametrize("op", REDUCTIONS)
def test_reductions_with_axes_as_attribute(cpu, op, opset, attrs):
    feeds = {"x": _x(positive=True)}
    m = one_node(op, feeds, ["y"], opset, **attrs)
    assert_close(run(m, feeds)[0], reference(m, feeds)[0])


@pytest.mark.parametrize("opset", [6, 10])
@pytest.mark.parametrize("bounds", [dict(min=-0.5, max=0.25), dict(min=0.1), dict(max=-0.2), {}])
def test_clip_bounds_as_attributes(cpu, opset, bounds):
    feeds = {"x": _x()}
    m = one_node("Clip", feeds, ["y"], opset, **bounds)
    assert_close(run(m, feeds)[0], reference(m, feeds)[0])


def _softmax_2d(x, axis: int, log: bool):
    """Softmax 1 and 11 as the spec words it: x coerced to 2-D [d0*...*d(axis-1), d(axis)*...], normalized
    along the second dim, the result reshaped back."""
    rows = x.astype(np.float64).reshape(math.prod(x.shape[:axis]), -1)
    shifted = rows - rows.max(axis=1, keepdims=True)
    total = np.exp(shifted).sum(axis=1, keepdims=True)
    out = shifted - np.log(total) if log else np.exp(shifted) / total
    return out.reshape(x.shape).astype(x.dtype)


@pytest.mark.parametrize("opset,axis", [(11, None), (11, 0), (11, 2), (11, -2), (1, None), (1, 0)])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_before_13_normalizes_the_input_coerced_to_2d(cpu, op, opset, axis):
    x = _x((2, 3, 4), seed=1)
    attrs = {} if axis is None else dict(axis=axis)
    m = one_node(op, {"x": x}, ["y"], opset, **attrs)
    expected = _softmax_2d(x, (1 if axis is None else axis) % x.ndim, log=op == "LogSoftmax")
    assert_close(run(m, {"x": x})[0], expected)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_before_13_along_the_last_axis_matches_the_reference(cpu, op):
    """Along the last axis the 2-D coercion and version 13's one axis agree, and so does onnx.reference."""
    x = _x((2, 3, 4), seed=2)
    m = one_node(op, {"x": x}, ["y"], 11, axis=2)
    assert_close(run(m, {"x": x})[0], reference(m, {"x": x})[0])


@pytest.mark.parametrize("opset,mask_dtype", [(7, np.float32), (10, np.bool_), (12, np.bool_)])
def test_dropout_old_versions_are_the_identity(cpu, opset, mask_dtype):
    """Dropout 7 and 10 (ratio an attribute, no training mode) and 12: y = x and a mask of ones. Version 7's
    mask has the data's type (its schema's T: onnx.reference returns bool there, version 10's type)."""
    x = _x(seed=3)
    m = one_node("Dropout", {"x": x}, ["y", "mask"], opset, declared={"mask": x.shape},  # inference leaves 7's
                 **({"ratio": 0.3} if opset < 12 else {}))
    y, mask = run(m, {"x": x})
    assert_close(y, reference(m, {"x": x})[0])
    assert mask.dtype == mask_dtype and mask.shape == x.shape and (mask == 1).all()


def _batch_norm_inference(x, scale, bias, mean, var, epsilon=1e-5):
    c = (-1,) + (1,) * (x.ndim - 2)
    return (scale.reshape(c) * (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + epsilon) +
            bias.reshape(c)).astype(x.dtype)


def _bn_inputs(shape=(2, 3, 4, 5), seed=4):
    rng = np.random.default_rng(seed)
    c = shape[1]
    return {"x": rng.standard_normal(shape).astype(np.float32),
            "scale": rng.standard_normal(c).astype(np.float32), "bias": rng.standard_normal(c).astype(np.float32),
            "mean": rng.standard_normal(c).astype(np.float32),
            "var": (rng.random(c) + 0.5).astype(np.float32)}


@pytest.mark.parametrize("opset", [7, 8, 9, 12])
def test_batch_norm_inference_at_old_versions(cpu, opset):
    """Versions 7 (spatial=1, the default) and 9 with Y alone: the given statistics, as version 15's test
    mode (onnx.reference departs at both: REFERENCE_DEPARTS)."""
    feeds = _bn_inputs()
    m = one_node("BatchNormalization", feeds, ["y"], opset, epsilon=1e-3)
    assert_close(run(m, feeds)[0], _batch_norm_inference(*feeds.values(), epsilon=1e-3))


def test_batch_norm_old_forms_we_do_not_implement_are_refused(cpu):
    feeds = _bn_inputs()
    m = one_node("BatchNormalization", feeds, ["y"], 7, spatial=0)
    with pytest.raises(OnnxImportError, match="'the_BatchNormalization'.*spatial=0"):
        run(m, feeds)
    m = one_node("BatchNormalization", feeds, ["y", "m", "v", "sm", "sv"], 9,
                 declared={name: [3] for name in ("m", "v", "sm", "sv")})
    with pytest.raises(OnnxImportError, match="'the_BatchNormalization'.*version 9 in training mode"):
        run(m, feeds)
    m = one_node("BatchNormalization", feeds, ["y", "m", "v"], 15, full_check=False,   # invalid, and
                 declared={"y": feeds["x"].shape, "m": [3], "v": [3]})                 # onnx.checker passes it
    with pytest.raises(OnnxImportError, match="running_mean and running_var are outputs of training mode"):
        run(m, feeds)


@pytest.mark.parametrize("opset,shape,momentum", [(15, (2, 3, 4, 5), None), (15, (4, 3, 6), 0.7),
                                                  (14, (5, 3), 0.25)])
def test_batch_norm_training_mode_matches_the_reference(cpu, opset, shape, momentum):
    """training_mode=1: Y by the batch's mean and biased variance, the running statistics moved toward them
    by 1 - momentum."""
    feeds = _bn_inputs(shape, seed=5)
    attrs = dict(training_mode=1, **({} if momentum is None else dict(momentum=momentum)))
    m = one_node("BatchNormalization", feeds, ["y", "running_mean", "running_var"], opset, **attrs)
    for got, expected in zip(run(m, feeds), reference(m, feeds), strict=True):
        assert_close(got, expected)


def test_dequantize_linear_10(cpu):
    """Version 10 (per tensor): y = (x - zero_point) * scale (onnx.reference lacks version 10)."""
    x = np.array([[0, 3, 128], [255, 17, 9]], np.uint8)
    m = one_node("DequantizeLinear", {"x": x}, ["y"], 10,
                 inits=[("s", np.float32(0.25)), ("zp", np.uint8(9))])
    assert_close(run(m, {"x": x})[0], ((x.astype(np.float32) - 9) * np.float32(0.25)))


# -- versions we do not implement ---------------------------------------------------------------------------

@pytest.mark.parametrize("opset,op,feeds,attrs,version,out", [
    (9, "Slice", {"x": _x()}, dict(starts=[0], ends=[1], axes=[1]), 1, [2, 1, 4]),   # starts, ends attributes
    (6, "Add", {"a": _x(), "b": _x()}, {}, 6, [2, 3, 4]),                            # broadcast by attribute
    (4, "Reshape", {"x": _x()}, dict(shape=[6, 4]), 1, [6, 4]),                      # the shape an attribute
    (5, "Cast", {"x": _x()}, dict(to="FLOAT16"), 1, [2, 3, 4]),                      # the type a string
    (7, "Max", {"a": _x(), "b": _x()}, {}, 6, [2, 3, 4]),                            # no broadcasting
    (6, "Dropout", {"x": _x()}, dict(is_test=1), 6, [2, 3, 4]),                      # is_test
    (6, "BatchNormalization", _bn_inputs(), dict(is_test=1), 6, [2, 3, 4, 5]),
])
def test_an_op_at_a_version_we_do_not_implement_is_refused_naming_op_version_and_opset(opset, op, feeds, attrs,
                                                                                        version, out):
    m = one_node(op, feeds, ["y"], opset, declared={"y": out}, **attrs)
    with pytest.raises(OnnxImportError) as err:
        gx.load(m)
    msg = str(err.value)
    for part in (f"op {op}", f"'the_{op}'", f"version {version}", f"opset {opset}",
                 f"converts {op} version {CONVERTERS[op].min_version} and later"):
        assert part in msg, (part, msg)


# -- coverage ---------------------------------------------------------------------------------------------

EXPLICIT = {   # (op, version) -> the test above that runs it, for what the node cases at older opsets miss
    **{(op, v): test_axes_and_sizes_as_attributes for op in ("Squeeze", "Unsqueeze") for v in (1, 11)},
    **{(op, v): test_reductions_with_axes_as_attribute for op in REDUCTIONS for v in (1, 11)},
    ("ReduceMax", 12): test_reductions_with_axes_as_attribute,
    ("ReduceMin", 12): test_reductions_with_axes_as_attribute,
    ("Clip", 6): test_clip_bounds_as_attributes,
    **{(op, v): test_softmax_before_13_normalizes_the_input_coerced_to_2d for op in ("Softmax", "LogSoftmax")
       for v in (1, 11)},
    ("Dropout", 10): test_dropout_old_versions_are_the_identity,
    **{("BatchNormalization", v): test_batch_norm_inference_at_old_versions for v in (7, 9)},
    ("DequantizeLinear", 10): test_dequantize_linear_10,
}


def test_every_old_version_we_convert_is_run():
    """Every version before 13 of every op we convert, from its converter's min_version on, runs in the node
    cases at older opsets or in an explicit test (EXPLICIT)."""
    swept = {op for v in VARIANTS if not _too_old(v[3]) for op in v[3]}
    wanted = {(s.name, s.since_version) for s in onnx.defs.get_all_schemas_with_history()
              if s.domain == "" and s.name in CONVERTERS
              and CONVERTERS[s.name].min_version <= s.since_version < 13}
    missing = sorted(wanted - swept - set(EXPLICIT))
    assert not missing, f"versions converted but never run: {missing}"
