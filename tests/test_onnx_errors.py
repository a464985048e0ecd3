"""Bad input to the ONNX frontend: each gives a GraphKernelError that names the thing, never a protobuf,
onnx or numba traceback."""
import numpy as np
import pytest


from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from graphkernel import Tensor  # noqa: E402
import graphkernel.onnx as gx  # noqa: E402
from graphkernel.onnx import OnnxImportError, OnnxInputError  # noqa: E402
from ir.errors import GraphKernelError  # noqa: E402

F = TensorProto.FLOAT


def vi(name, dims, elem=F):
    return helper.make_tensor_value_info(name, elem, dims)


def model(nodes, inputs, outputs, inits=(), opset=17, domains=()):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets)


def add_model():
    return model([helper.make_node("Add", ["a", "b"], ["y"], name="the_add")],
                 [vi("a", ["n", 3]), vi("b", ["n", 3])], [vi("y", ["n", 3])])


# -- the model itself ---------------------------------------------------------------------------------

def test_truncated_bytes():
    data = add_model().SerializeToString()
    for cut in (len(data) // 2, len(data) - 3, 7):
        with pytest.raises(OnnxImportError, match="not an ONNX model|truncated|onnx.checker"):
            gx.load(data[:cut])


@pytest.mark.parametrize("data", [b"", b"this is not an ONNX model at all \x00\xff\xfe", bytes(range(256))])
def test_non_onnx_bytes(data):
    with pytest.raises(OnnxImportError, match="not an ONNX model|onnx.checker"):
        gx.load(data)


def test_unreadable_path_and_wrong_source_type(tmp_path):
    with pytest.raises(OnnxImportError, match="missing.onnx"):
        gx.load(tmp_path / "missing.onnx")
    with pytest.raises(OnnxImportError, match="int"):
        gx.load(42)


def test_model_failing_the_checker():
    m = model([helper.make_node("Relu", ["nowhere"], ["y"])], [vi("x", [3])], [vi("y", [3])])
    with pytest.raises(OnnxImportError, match="onnx.checker"):
        gx.load(m)


def test_unsupported_op_names_op_node_opset_and_lists_ours():
    m = model([helper.make_node("Tan", ["x"], ["y"], name="my_tangent")], [vi("x", [3])], [vi("y", [3])])
    with pytest.raises(OnnxImportError) as err:
        gx.load(m)
    msg = str(err.value)
    for part in ("Tan", "my_tangent", "opset 17", "MatMul", "LayerNormalization"):
        assert part in msg


def test_custom_domain_op_is_unsupported():
    m = model([helper.make_node("FusedGelu", ["x"], ["y"], domain="com.example")], [vi("x", [3])],
              [vi("y", [3])], domains=["com.example"])
    with pytest.raises(OnnxImportError, match="com.example::FusedGelu"):
        gx.load(m)


def test_opset_newer_than_onnx_knows_and_op_version_too_old():
    """The model's opset beyond the installed onnx's is refused; an old opset is refused per op, when the op's
    version in force there is older than graphkernel implements (Add 6, broadcasting by attribute)."""
    import onnx.defs
    m = add_model()
    m.opset_import[0].version = onnx.defs.onnx_opset_version() + 1
    with pytest.raises(OnnxImportError, match=f"uses opset {onnx.defs.onnx_opset_version() + 1}"):
        gx.load(m)
    m.opset_import[0].version = 6
    with pytest.raises(OnnxImportError, match=r"op Add \(node 'the_add'\) is version 6 at the model's opset 6"):
        gx.load(m)


def test_unsupported_input_and_initializer_types():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", [3], TensorProto.FLOAT8E4M3FN)],
              [vi("y", [3], TensorProto.FLOAT8E4M3FN)])
    with pytest.raises(OnnxImportError, match="'x'.*FLOAT8E4M3FN"):
        gx.load(m)
    w = helper.make_tensor("w_f8", TensorProto.FLOAT8E5M2, [2], [1.0, 2.0])
    m = model([helper.make_node("Identity", ["w_f8"], ["y"])], [], [vi("y", [2], TensorProto.FLOAT8E5M2)],
              [w])
    with pytest.raises(OnnxImportError, match="w_f8.*FLOAT8E5M2"):
        gx.load(m)


def test_shape_from_runtime_data_is_rejected_naming_the_node(cpu):
    nodes = [helper.make_node("Cast", ["s"], ["shape"], to=TensorProto.INT64),
             helper.make_node("Mul", ["shape", "shape"], ["shape2"]),
             helper.make_node("Reshape", ["x", "shape2"], ["y"], name="view")]
    m = model(nodes, [vi("x", [4]), vi("s", [2])], [vi("y", [None, None])])
    cell = gx.load(m)
    with pytest.raises(OnnxImportError, match="'view'.*compile time"):
        cell(Tensor(np.ones(4, np.float32)), Tensor(np.ones(2, np.float32)))


# -- the call -------------------------------------------------------------------------------------------

def test_missing_input_is_named(cpu):
    cell = gx.load(add_model())
    with pytest.raises(OnnxInputError, match="missing input.*'b'"):
        cell(Tensor(np.ones((2, 3), np.float32)))
    with pytest.raises(OnnxInputError, match="takes 2 input"):
        cell(*[Tensor(np.ones((2, 3), np.float32))] * 3)
    with pytest.raises(OnnxInputError, match=r"inputs are positional, in the model's order \(a, b\); got "
                                             r"keyword argument\(s\) 'b'"):
        cell(Tensor(np.ones((2, 3), np.float32)), b=Tensor(np.ones((2, 3), np.float32)))


def test_wrong_shape_and_rank_are_named(cpu):
    cell = gx.load(add_model())
    a = Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(OnnxInputError, match="'b'.*dim 1 = 3"):
        cell(a, Tensor(np.ones((2, 4), np.float32)))
    with pytest.raises(OnnxInputError, match="'b'.*rank"):
        cell(a, Tensor(np.ones(3, np.float32)))
    with pytest.raises(OnnxInputError, match="'b'.*'n'"):  # the same named dim, two sizes
        cell(a, Tensor(np.ones((5, 3), np.float32)))


def test_wrong_dtype_is_named(cpu):
    cell = gx.load(add_model())
    with pytest.raises(OnnxInputError, match="'a'.*float64.*float32"):
        cell(Tensor(np.ones((2, 3), np.float64)), Tensor(np.ones((2, 3), np.float32)))


def test_dynamic_dims_of_random_inputs_default_to_one():
    cell = gx.load(add_model())
    a, b = cell.random_inputs()
    assert a.shape == b.shape == (1, 3)
    a, b = cell.random_inputs(dims={"n": 2})
    assert a.shape == b.shape == (2, 3)


def test_bad_gather_index_on_constants_names_the_node(cpu):
    data = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "data")
    idx = numpy_helper.from_array(np.array([5], np.int64), "idx")
    m = model([helper.make_node("Gather", ["data", "idx"], ["y"], name="pick")], [], [vi("y", [1, 3])],
              [data, idx])
    with pytest.raises(OnnxImportError, match="'pick'"):
        gx.load(m)()


def test_frontend_errors_derive_from_graphkernel_error():
    assert issubclass(OnnxImportError, GraphKernelError) and issubclass(OnnxInputError, GraphKernelError)
