"""ONNX models to fuzz: a seed corpus of small valid models, mutations of their protobuf fields and of their
bytes, and single-node models of any op drawn from its schema.

    SEEDS                        name -> function building a valid ModelProto (onnx.helper)
    mutated_models("fields")     (seed name, ModelProto or its bytes) after 1-3 field mutations
    mutated_models("bytes")      (seed name, bytes) after bit flips, truncation, insertion, deletion
    random_node_models(ops)      (op, ModelProto): one node of an op in `ops` (default: the ones we convert)
    HOST_OPS                     the ONNX ops we do not convert (mix_compile_mode runs them on the host)

Every mutation takes hypothesis' `draw` and a ModelProto it may edit, and returns what to load.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from graphkernel.onnx import supported_ops
from graphkernel.onnx.registry import MIN_OPSET

F, H, I64, I32, B = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT32,
                      TensorProto.BOOL)


# -- the seed corpus: small valid models ----------------------------------------------------------------

def vi(name, dims, elem=F):
    return helper.make_tensor_value_info(name, elem, dims)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def elementwise_chain():
    n = helper.make_node
    return model([n("Mul", ["x", "two"], ["a"], name="mul"), n("Add", ["a", "y"], ["b"], name="add"),
                  n("Tanh", ["b"], ["c"], name="tanh"), n("Sub", ["c", "x"], ["d"], name="sub"),
                  n("Pow", ["d", "two"], ["z"], name="pow")],
                 [vi("x", [2, 3]), vi("y", [3])], [vi("z", [2, 3])], [const("two", np.float32(2))])


def matmul_add_gelu():
    n = helper.make_node
    rng = np.random.default_rng(0)
    return model([n("MatMul", ["x", "w"], ["h"], name="matmul"), n("Add", ["h", "bias"], ["hb"], name="bias"),
                  n("Gelu", ["hb"], ["y"], name="gelu", approximate="tanh")],
                 [vi("x", ["batch", 4])], [vi("y", ["batch", 5])],
                 [const("w", rng.standard_normal((4, 5)).astype(np.float32)),
                  const("bias", rng.standard_normal(5).astype(np.float32))], opset=20)


def layer_norm():
    n = helper.make_node
    return model([n("LayerNormalization", ["x", "gamma", "beta"], ["y", "mean", "inv"], name="ln", axis=-1,
                    epsilon=1e-5)],
                 [vi("x", [2, 3, 4])], [vi("y", [2, 3, 4]), vi("mean", [2, 3, 1]), vi("inv", [2, 3, 1])],
                 [const("gamma", np.ones(4, np.float32)), const("beta", np.zeros(4, np.float32))])


def softmax():
    n = helper.make_node
    return model([n("Softmax", ["x"], ["s"], name="softmax", axis=1),
                  n("ReduceMax", ["s"], ["m"], name="rmax", axes=[1], keepdims=0),
                  n("Cast", ["m"], ["y"], name="cast", to=H)],
                 [vi("x", [3, 5])], [vi("y", [3], H)], opset=17)


def reshape_transpose():
    n = helper.make_node
    return model([n("Reshape", ["x", "shape"], ["r"], name="reshape"),
                  n("Transpose", ["r"], ["t"], name="transpose", perm=[2, 0, 1]),
                  n("Flatten", ["t"], ["y"], name="flatten", axis=1)],
                 [vi("x", [2, 12])], [vi("y", [4, 6])], [const("shape", np.array([0, 3, 4], np.int64))])


def split_concat_slice_gather():
    n = helper.make_node
    return model([n("Split", ["x", "sizes"], ["p", "q"], name="split", axis=1),
                  n("Concat", ["q", "p"], ["c"], name="concat", axis=1),
                  n("Slice", ["c", "starts", "ends", "slice_axes"], ["s"], name="slice"),
                  n("Gather", ["s", "idx"], ["g"], name="gather", axis=0),
                  n("Unsqueeze", ["g", "unsqueeze_axes"], ["u"], name="unsqueeze"),
                  n("Where", ["cond", "u", "u"], ["y"], name="where")],
                 [vi("x", [4, 6]), vi("cond", [1, 4], B)], [vi("y", [1, 2, 4])],
                 [const("sizes", np.array([2, 4], np.int64)), const("starts", np.array([0, 1], np.int64)),
                  const("ends", np.array([3, 5], np.int64)), const("slice_axes", np.array([0, 1], np.int64)),
                  const("unsqueeze_axes", np.array([0], np.int64)),
                  const("idx", np.array([1, 0], np.int64))])


def reductions_and_shape_math():
    n = helper.make_node
    return model([n("Shape", ["x"], ["sh"], name="shape"),
                  n("ReduceSum", ["x", "ax"], ["r"], name="rsum", keepdims=1),
                  n("Expand", ["r", "sh"], ["e"], name="expand"),
                  n("Div", ["e", "x"], ["d"], name="div"),
                  n("ReduceMean", ["d"], ["y"], name="rmean", keepdims=0)],
                 [vi("x", [3, 4])], [vi("y", [])], [const("ax", np.array([-1], np.int64))], opset=18)


SEEDS = {f.__name__: f for f in (elementwise_chain, matmul_add_gelu, layer_norm, softmax, reshape_transpose,
                                 split_concat_slice_gather, reductions_and_shape_math)}


# -- mutations ------------------------------------------------------------------------------------------
# Each takes hypothesis' `draw` and a ModelProto (a copy it may edit) and returns what to load: the
# ModelProto, or bytes.

INTS = st.one_of(st.integers(-4, 8),
                 st.sampled_from([-1, 0, 1, 2, 2**31 - 1, -2**31, 2**62, -2**63, 2**63 - 1]))
SMALL_DIMS = st.one_of(st.integers(0, 8), st.sampled_from([-1, -7, 2**31, 2**40]))
FLOATS = st.one_of(st.floats(-10, 10), st.sampled_from([0.0, -0.0, float("nan"), float("inf"), 1e300]))
ELEM_TYPES = st.integers(0, 23)   # every TensorProto.DataType (and 0, UNDEFINED)
ATTR_NAMES = ["axis", "axes", "perm", "to", "keepdims", "approximate", "epsilon", "split", "num_outputs",
              "allowzero", "noop_with_empty_axes", "start", "end", "value", "alpha", "beta", "transA",
              "stash_type", "bogus"]
ATTR_TYPES = [AttributeProto.FLOAT, AttributeProto.INT, AttributeProto.STRING, AttributeProto.TENSOR,
              AttributeProto.GRAPH, AttributeProto.FLOATS, AttributeProto.INTS, AttributeProto.STRINGS,
              AttributeProto.TENSORS, AttributeProto.UNDEFINED]


def _names(m) -> list[str]:
    g = m.graph
    out = [v.name for v in list(g.input) + list(g.output)] + [t.name for t in g.initializer]
    return out + [o for node in g.node for o in list(node.input) + list(node.output)]


def _value_infos(m) -> list:
    return list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info)


def mutate_dims(draw, m):
    infos = [v for v in _value_infos(m) if v.type.HasField("tensor_type")]
    if not infos:
        return m
    shape = draw(st.sampled_from(infos)).type.tensor_type.shape
    dims = shape.dim
    action = draw(st.sampled_from(["value", "param", "clear", "add", "remove", "drop_shape"]))
    if action == "drop_shape":
        draw(st.sampled_from(infos)).type.tensor_type.ClearField("shape")
    elif action == "add" or not dims:
        dims.add().dim_value = draw(SMALL_DIMS)
    elif action == "remove":
        del dims[draw(st.integers(0, len(dims) - 1))]
    else:
        d = dims[draw(st.integers(0, len(dims) - 1))]
        if action == "value":
            d.dim_value = draw(SMALL_DIMS)
        elif action == "param":
            d.dim_param = draw(st.sampled_from(["n", "batch", "", "a b"]))
        else:
            d.Clear()
    return m


def mutate_elem_type(draw, m):
    targets = [v.type.tensor_type for v in _value_infos(m) if v.type.HasField("tensor_type")]
    targets += list(m.graph.initializer)
    if not targets:
        return m
    target = draw(st.sampled_from(targets))
    if isinstance(target, TensorProto):
        target.data_type = draw(ELEM_TYPES)
    else:
        target.elem_type = draw(ELEM_TYPES)
    return m


def _attr_of_type(draw, name: str, kind: int):
    if kind == AttributeProto.FLOAT:
        return helper.make_attribute(name, draw(FLOATS))
    if kind == AttributeProto.INT:
        return helper.make_attribute(name, draw(INTS))
    if kind == AttributeProto.STRING:
        return helper.make_attribute(name, draw(st.sampled_from(["none", "tanh", "", "\x00\xff", "x" * 300])))
    if kind == AttributeProto.FLOATS:
        return helper.make_attribute(name, draw(st.lists(FLOATS, max_size=4)), attr_type=kind)
    if kind == AttributeProto.INTS:
        return helper.make_attribute(name, draw(st.lists(INTS, max_size=5)), attr_type=kind)
    if kind == AttributeProto.STRINGS:
        return helper.make_attribute(name, draw(st.lists(st.sampled_from(["a", ""]), max_size=3)),
                                     attr_type=kind)
    if kind == AttributeProto.TENSOR:
        return helper.make_attribute(name, numpy_helper.from_array(
            np.asarray(draw(st.lists(INTS, max_size=3)), np.int64)))
    if kind == AttributeProto.TENSORS:
        return helper.make_attribute(name, [numpy_helper.from_array(np.zeros(2, np.float32))])
    if kind == AttributeProto.GRAPH:
        return helper.make_attribute(name, helper.make_graph([], "g", [], []))
    attr = AttributeProto()
    attr.name = name
    return attr  # UNDEFINED type, no value


def mutate_attribute(draw, m):
    nodes = list(m.graph.node)
    if not nodes:
        return m
    node = draw(st.sampled_from(nodes))
    action = draw(st.sampled_from(["retype", "revalue", "remove", "add", "duplicate"]))
    attrs = node.attribute
    if action in ("retype", "revalue", "remove", "duplicate") and len(attrs):
        i = draw(st.integers(0, len(attrs) - 1))
        name, kind = attrs[i].name, attrs[i].type
        if action == "remove":
            del attrs[i]
        elif action == "duplicate":
            attrs.add().CopyFrom(attrs[i])
        else:
            kind = draw(st.sampled_from(ATTR_TYPES)) if action == "retype" else kind
            attrs[i].CopyFrom(_attr_of_type(draw, name, kind))
    else:
        name, kind = draw(st.sampled_from(ATTR_NAMES)), draw(st.sampled_from(ATTR_TYPES))
        attrs.add().CopyFrom(_attr_of_type(draw, name, kind))
    return m


def mutate_names(draw, m):
    nodes = list(m.graph.node)
    names = sorted(set(_names(m))) + ["", "nowhere"]
    action = draw(st.sampled_from(["node_input", "node_output", "graph_output", "graph_input", "dangling",
                                   "cycle", "duplicate_output", "self_loop"]))
    if action == "graph_output" and len(m.graph.output):
        m.graph.output[draw(st.integers(0, len(m.graph.output) - 1))].name = draw(st.sampled_from(names))
    elif action == "graph_input" and len(m.graph.input):
        m.graph.input[draw(st.integers(0, len(m.graph.input) - 1))].name = draw(st.sampled_from(names))
    elif not nodes:
        return m
    elif action == "cycle" and len(nodes) > 1:  # an earlier node reads a later node's result
        i = draw(st.integers(0, len(nodes) - 2))
        j = draw(st.integers(i + 1, len(nodes) - 1))
        if len(nodes[i].input) and len(nodes[j].output):
            nodes[i].input[draw(st.integers(0, len(nodes[i].input) - 1))] = nodes[j].output[0]
    elif action == "self_loop":
        node = draw(st.sampled_from(nodes))
        if len(node.input) and len(node.output):
            node.input[0] = node.output[0]
    elif action == "duplicate_output" and len(nodes) > 1:
        a, b = draw(st.permutations(nodes))[:2]
        if len(a.output) and len(b.output):
            a.output[0] = b.output[0]
    else:
        node = draw(st.sampled_from(nodes))
        field = node.output if action == "node_output" else node.input
        if len(field):
            field[draw(st.integers(0, len(field) - 1))] = "nowhere" if action == "dangling" else \
                draw(st.sampled_from(names))
    return m


def mutate_opset(draw, m):
    action = draw(st.sampled_from(["version", "domain", "extra", "clear"]))
    if action == "clear":
        del m.opset_import[:]
    elif action == "extra":
        domain = draw(st.sampled_from(["", "com.example", "ai.onnx.ml"]))
        m.opset_import.add().CopyFrom(helper.make_opsetid(domain, draw(st.integers(-1, 30))))
    elif len(m.opset_import):
        if action == "version":
            m.opset_import[0].version = draw(st.integers(-2, 30))
        else:
            m.opset_import[0].domain = draw(st.sampled_from(["ai.onnx", "com.example", "x"]))
    if draw(st.booleans()):
        m.ir_version = draw(st.integers(0, 12))
    return m


OP_TYPES = supported_ops() + ["Sin", "CumSum", "NonZero", "Loop", "If", "Foo", ""]


def mutate_op_type(draw, m):
    if len(m.graph.node):
        node = m.graph.node[draw(st.integers(0, len(m.graph.node) - 1))]
        node.op_type = draw(st.sampled_from(OP_TYPES))
        if draw(st.booleans()):
            node.domain = draw(st.sampled_from(["", "ai.onnx", "com.example"]))
    return m


def _values(t) -> np.ndarray:
    """An initializer's values, or none when an earlier mutation broke it."""
    try:
        return numpy_helper.to_array(t)
    except Exception:
        return np.zeros(0, np.float32)


def mutate_initializer(draw, m):
    inits = list(m.graph.initializer)
    if not inits:
        return m
    t = draw(st.sampled_from(inits))
    action = draw(st.sampled_from(["truncate", "extend", "dims", "values", "external", "move", "clear"]))
    if action in ("truncate", "extend"):
        raw = t.raw_data or _values(t).tobytes()
        cut = draw(st.integers(0, len(raw)))
        t.raw_data = raw[:cut] if action == "truncate" else raw + draw(st.binary(min_size=1, max_size=16))
    elif action == "dims":
        del t.dims[:]
        t.dims.extend(draw(st.lists(SMALL_DIMS, max_size=4)))
    elif action == "values" and t.data_type in (I64, I32):  # axes, shapes, indices: the static inputs
        dtype = np.int64 if t.data_type == I64 else np.int32
        info = np.iinfo(dtype)
        values = [v for v in draw(st.lists(INTS, min_size=1, max_size=5)) if info.min <= v <= info.max]
        arr = np.array(values, dtype=dtype).reshape(
            [len(values)] if len(t.dims) else [] if len(values) == 1 else [len(values)])
        t.CopyFrom(numpy_helper.from_array(arr, t.name))
    elif action == "external":  # data in a file: missing, or outside the model's directory
        t.ClearField("raw_data")
        del t.external_data[:]
        location = draw(st.sampled_from(["missing.bin", "../../etc/passwd", "/etc/passwd", ""]))
        for key, value in (("location", location), ("offset", str(draw(st.integers(-1, 8)))),
                           ("length", str(draw(st.integers(0, 64))))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        t.data_location = TensorProto.EXTERNAL
    elif action == "move":  # the values in float_data / int64_data instead of raw_data
        arr = _values(t).reshape(-1)
        kept = draw(st.integers(0, arr.size + 1))  # sometimes fewer values than the dims say
        t.ClearField("raw_data")
        if arr.dtype.kind == "f":
            t.float_data.extend(arr.astype(np.float32).tolist()[:kept])
        else:
            t.int64_data.extend(arr.astype(np.int64).tolist()[:kept])
    elif action == "clear":
        t.ClearField("raw_data")
    return m


def mutate_nodes(draw, m):
    nodes = m.graph.node
    if not len(nodes):
        return m
    action = draw(st.sampled_from(["delete", "duplicate", "swap", "add_input", "drop_input", "add_output",
                                   "drop_output", "drop_graph_input", "drop_initializer"]))
    i = draw(st.integers(0, len(nodes) - 1))
    if action == "delete":
        del nodes[i]
    elif action == "duplicate":
        nodes.add().CopyFrom(nodes[i])
    elif action == "swap":
        j = draw(st.integers(0, len(nodes) - 1))
        a, b = type(nodes[i])(), type(nodes[j])()
        a.CopyFrom(nodes[i])
        b.CopyFrom(nodes[j])
        nodes[i].CopyFrom(b)
        nodes[j].CopyFrom(a)
    elif action == "add_input":
        nodes[i].input.append(draw(st.sampled_from(sorted(set(_names(m))) + [""])))
    elif action == "drop_input" and len(nodes[i].input):
        del nodes[i].input[draw(st.integers(0, len(nodes[i].input) - 1))]
    elif action == "add_output":
        nodes[i].output.append(draw(st.sampled_from(["extra", ""])))
    elif action == "drop_output" and len(nodes[i].output):
        del nodes[i].output[-1]
    elif action == "drop_graph_input" and len(m.graph.input):
        del m.graph.input[draw(st.integers(0, len(m.graph.input) - 1))]
    elif action == "drop_initializer" and len(m.graph.initializer):
        del m.graph.initializer[draw(st.integers(0, len(m.graph.initializer) - 1))]
    return m


FIELD_MUTATIONS = [mutate_dims, mutate_elem_type, mutate_attribute, mutate_names, mutate_opset,
                   mutate_op_type, mutate_initializer, mutate_nodes]


def mutate_bytes(draw, data: bytes) -> bytes:
    """Bit flips, truncation, insertion or deletion in the serialized model."""
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "flip", "byte", "truncate", "insert", "delete"]))
        if action == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "byte":
            data[at] = draw(st.integers(0, 255))
        elif action == "truncate":
            del data[at:]
        elif action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[at:at + draw(st.integers(1, 16))]
    return bytes(data)


# -- random single-node models: every op we convert, with inputs and attributes drawn from its schema -----

OUR_TYPES = [F, F, F, H, TensorProto.DOUBLE, I32, I64, B]
SCHEMA_STRINGS = ["none", "tanh", "NOTSET", "constant", ""]


def _schema(op: str, opset: int):
    import onnx.defs
    try:
        return onnx.defs.get_schema(op, opset, "")
    except Exception:  # the op is younger than the opset: take its first version
        return onnx.defs.get_schema(op, onnx.defs.onnx_opset_version(), "")


def _attr_value(draw, name: str, kind):
    """A value of the schema's attribute type (an AttributeProto.AttributeType)."""
    kinds = {"FLOAT": AttributeProto.FLOAT, "INT": AttributeProto.INT, "STRING": AttributeProto.STRING,
             "FLOATS": AttributeProto.FLOATS, "INTS": AttributeProto.INTS, "TENSOR": AttributeProto.TENSOR}
    if kind.name == "STRING":
        return helper.make_attribute(name, draw(st.sampled_from(SCHEMA_STRINGS)))
    if kind.name == "INT" and name == "to":
        return helper.make_attribute(name, draw(st.sampled_from(OUR_TYPES + [TensorProto.UINT8,
                                                                              TensorProto.STRING])))
    if kind.name == "TENSOR":
        dtype = draw(st.sampled_from([np.float32, np.int64, np.float16, np.bool_, np.int32]))
        shape = draw(st.sampled_from([(), (1,), (2,), (2, 2)]))
        value = np.ones(shape, dtype) * draw(st.integers(-2, 3))
        return helper.make_attribute(name, numpy_helper.from_array(value))
    if kind.name in kinds:
        return _attr_of_type(draw, name, kinds[kind.name])
    return None  # graphs, sparse tensors, type protos: not for our ops


def _node_input(draw, name: str, inits: list, graph_inputs: list) -> str:
    """A graph input of a random type and shape, or an initializer (small ints are the static inputs)."""
    kind = draw(st.sampled_from(["input", "input", "ints", "float_const", "static_input"]))
    if kind == "static_input":  # ints the model reads as shape data, given at the call
        graph_inputs.append(vi(name, draw(st.sampled_from([[], [1], [2], [3]])), I64))
    elif kind == "ints":
        values = draw(st.lists(st.integers(-3, 5), min_size=0, max_size=4))
        shape = draw(st.sampled_from(["vector", "vector", "scalar"])) if len(values) == 1 else "vector"
        arr = np.array(values, np.int64)
        inits.append(const(name, arr.reshape(()) if shape == "scalar" else arr))
    elif kind == "float_const":
        inits.append(const(name, np.asarray(draw(st.floats(-3, 3, width=32)), np.float32)))
    else:
        dims = draw(st.lists(st.integers(0, 4), max_size=4))
        graph_inputs.append(vi(name, dims, draw(st.sampled_from(OUR_TYPES))))
    return name


def _host_ops() -> list[str]:
    """Default-domain ONNX ops we do not convert, which mix_compile_mode runs through onnx.reference
    (without the ones taking subgraphs or producing random or string data)."""
    import onnx.defs
    skip = {"Loop", "If", "Scan", "SequenceMap", "RandomNormal", "RandomUniform", "RandomNormalLike",
            "RandomUniformLike", "Multinomial", "Bernoulli", "StringNormalizer", "StringConcat",
            "StringSplit", "RegexFullMatch", "TfIdfVectorizer"}
    ours = set(supported_ops())
    return sorted({s.name for s in onnx.defs.get_all_schemas() if s.domain == "" and not s.deprecated}
                  - ours - skip)


HOST_OPS = _host_ops()


def _count(low: int, high: int, cap: int):
    """How many inputs or outputs: the schema's range, capped (variadic ops allow 2**31 - 1)."""
    return st.integers(low, max(low, min(high, cap)))


@st.composite
def random_node_models(draw, ops=None):
    """One node of an op (by default one we convert), at an opset we support, its inputs and attributes
    drawn from the schema."""
    import onnx.defs
    op = draw(st.sampled_from(ops or supported_ops()))
    opset = draw(st.integers(MIN_OPSET, onnx.defs.onnx_opset_version()))   # old ones: older op versions
    schema = _schema(op, opset)
    opset = max(opset, schema.since_version)
    inits, graph_inputs, inputs = [], [], []
    for i in range(draw(_count(schema.min_input, schema.max_input, 4))):
        omitted = i >= schema.min_input and draw(st.booleans())  # an optional input left out
        inputs.append("" if omitted else _node_input(draw, f"in{i}", inits, graph_inputs))
    attrs = [_attr_value(draw, name, a.type) for name, a in sorted(schema.attributes.items())
             if a.required or draw(st.booleans())]
    outputs = [f"out{i}" for i in range(draw(_count(schema.min_output, schema.max_output, 3)))]
    node = helper.make_node(op, inputs, outputs, name=f"the_{op}")
    node.attribute.extend(a for a in attrs if a is not None)
    graph = helper.make_graph([node], "one_node", graph_inputs, [vi(o, []) for o in outputs], inits)
    return op, helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@st.composite
def mutated_models(draw, kind: str):
    """A seed model with 1-3 field mutations (kind "fields") or byte mutations (kind "bytes")."""
    if draw(st.integers(0, 3)) == 0:
        seed, m = draw(random_node_models())
    else:
        seed = draw(st.sampled_from(sorted(SEEDS)))
        m = SEEDS[seed]()
    if kind == "bytes":
        return seed, mutate_bytes(draw, m.SerializeToString())
    for _ in range(draw(st.integers(1, 3))):
        m = draw(st.sampled_from(FIELD_MUTATIONS))(draw, m)
    return seed, (m.SerializeToString() if draw(st.booleans()) else m)
