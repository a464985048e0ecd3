"""An ONNX model (path, bytes or ModelProto) -> a checked ModelSpec, which cell.load() makes an OnnxCell.

Everything that can be wrong with the model itself is found here, before any call:

    unreadable file, non-ONNX or truncated bytes   OnnxImportError naming the file / the bytes
    onnx.checker failure                           OnnxImportError with the checker's message
    default-domain opset outside 1..(onnx's newest) OnnxImportError (older op versions are refused per op
                                                   below, as registry.py says)
    an op we lack                                  OnnxImportError naming op, node and opset, listing ours
    an op in force at a version we do not          OnnxImportError naming op, node, version and opset
      implement (Slice 1, at opsets 1 to 9)        (registry.py: each converter's min_version)
    a tensor of a type we lack                     OnnxImportError naming the tensor and its type

Initializers become constants when small (at most SMALL_CONSTANT elements) or read as static data
(a Reshape's shape, a Slice's starts, ...); the others become Parameters, fed to the graph per call.
Graph inputs that have an initializer (old exporters list weights as inputs) count as initializers.
A graph input read as static data is a "static input": its value is part of the compile signature.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from ir.dtypes import DType
from graphkernel.onnx.host_fallback import find_converter, outer_scope_names
from graphkernel.onnx.registry import (CONVERTERS, MIN_OPSET, Converter,
                                       unreviewed_attributes)
from graphkernel.onnx.types import OnnxImportError, declared_dims, format_dims, to_array, to_dtype

SMALL_CONSTANT = 64


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: DType
    dims: tuple | None       # ints, dim_param names or None (unknown); None when no shape is declared
    static: bool = False     # read as shape data (a Reshape's shape, ...): compiled per value

    def __str__(self) -> str:
        return f"{self.name!r}: {self.dtype.value}{format_dims(self.dims)}"


@dataclass(frozen=True)
class NodeSpec:
    op_type: str
    name: str
    version: int
    attrs: dict
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    converter: Converter


@dataclass
class ModelSpec:
    name: str
    opset: int
    inputs: list[InputSpec]
    outputs: list[str]
    nodes: list[NodeSpec]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    weights: dict[str, np.ndarray] = field(default_factory=dict)   # become Parameters


def read_model(source):
    """A ModelProto from a path, bytes or a ModelProto, or OnnxImportError saying what it is not."""
    import onnx
    if isinstance(source, onnx.ModelProto):
        return source, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _parse(bytes(source), "the given bytes"), None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OnnxImportError(f"cannot read ONNX model {path!r}: {e.strerror or e}") from None
        return _parse(data, f"file {path!r}"), os.path.dirname(os.path.abspath(path))
    raise OnnxImportError(f"load() takes a path, bytes or an onnx.ModelProto, not a {type(source).__name__}")


def _parse(data: bytes, what: str):
    import onnx
    if not data:
        raise OnnxImportError(f"{what}: empty, not an ONNX model")
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:  # protobuf's DecodeError and friends: say so in one line
        raise OnnxImportError(f"{what}: not an ONNX model or truncated (protobuf parsing failed: "
                              f"{str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if not model.HasField("graph"):
        raise OnnxImportError(f"{what}: not an ONNX model or truncated (no graph in it)")
    return model


def check_fields(model, from_file: bool) -> None:
    """OnnxImportError naming the field for what protobuf and onnx.checker let through:

    - a string that is not UTF-8: protobuf hands it out as bytes rather than failing, and the checker
      passes it; refusing it here keeps bytes out of names, op types and scope names everywhere after;
    - a tensor whose data is in an external file, unless it is an initializer of a model loaded from
      its file (onnx.checker has then made sure the file is a regular file inside the model's
      directory): a model given as bytes or a ModelProto has no directory, and its relative paths
      would be read from the current working directory; attribute tensors are never read from files.
    """
    from google.protobuf.descriptor import FieldDescriptor
    from onnx import TensorProto
    stack = [(model, "model")]
    while stack:
        message, path = stack.pop()
        if isinstance(message, TensorProto) and message.data_location == TensorProto.EXTERNAL:
            _refuse_external(message, path, from_file)
        for descriptor, value in message.ListFields():
            if descriptor.type not in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_STRING):
                continue  # numbers and bytes (a tensor's data): nothing to decode, nothing to walk
            repeated = descriptor.is_repeated if hasattr(descriptor, "is_repeated") else \
                descriptor.label == descriptor.LABEL_REPEATED  # protobuf before 6
            for i, item in enumerate(value) if repeated else [(None, value)]:
                where = f"{path}.{descriptor.name}" + (f"[{i}]" if repeated else "")
                if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
                    stack.append((item, where))
                elif not isinstance(item, str):
                    raise OnnxImportError(f"{where} is not valid UTF-8 text ({bytes(item)[:60]!r})")


def _refuse_external(tensor, path: str, from_file: bool) -> None:
    if from_file and re.fullmatch(r"model\.graph\.initializer\[\d+\]", path):
        return
    location = next((e.value for e in tensor.external_data if e.key == "location"), "")
    why = ("graphkernel reads external data for the main graph's initializers only" if from_file else
           "a model given as bytes or an onnx.ModelProto has no directory to read it from: pass the "
           "model's file path, or load it with onnx.load(path), which reads its external data")
    raise OnnxImportError(f"{path} (tensor {tensor.name!r}) keeps its data in the external file "
                          f"{location!r}; {why}")


def check_model(model, path: str | None = None) -> None:
    """onnx.checker on the model (on its file when there is one: external data resolve next to it)."""
    import onnx
    try:
        onnx.checker.check_model(path if path is not None else model)
    except Exception as e:  # ValidationError, or protobuf errors on malformed fields
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        raise OnnxImportError(f"the model fails onnx.checker: {' '.join(lines[:3])}") from None


def model_opset(model) -> int:
    import onnx.defs
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise OnnxImportError("the model imports no default-domain (ai.onnx) opset")
    opset, newest = versions[0], onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= newest:
        why = f"the installed onnx knows opsets up to {newest}" if opset > newest else "ONNX's opsets begin at 1"
        raise OnnxImportError(f"the model uses opset {opset}; graphkernel supports opsets {MIN_OPSET} to "
                              f"{newest} ({why})")
    return opset


def _op_version(op_type: str, opset: int, domain: str) -> int | None:
    import onnx.defs
    try:
        return onnx.defs.get_schema(op_type, opset, domain).since_version
    except Exception:  # SchemaError: no such op at this opset
        return None


def _attributes(node) -> dict:
    from onnx import helper
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v for k, v in attrs.items()}


def model_spec(model, base_dir: str | None = None) -> ModelSpec:
    """What OnnxCell needs, every node's converter found and every type checked."""
    opset = model_opset(model)
    graph = model.graph
    if len(graph.sparse_initializer):
        raise OnnxImportError("sparse initializers are not supported")
    nodes = []
    for i, node in enumerate(graph.node):
        name = node.name or f"{node.op_type}_{i}"
        version = _op_version(node.op_type, opset, node.domain)
        conv = find_converter(node, version, name, opset)  # with mix_compile_mode: host_fallback.py
        attrs = _attributes(node)
        ours = conv is CONVERTERS.get(node.op_type)   # not a host fallback, which onnx.reference runs
        newer = unreviewed_attributes(node.op_type, opset, attrs) if ours else []
        if newer:
            raise OnnxImportError(f"op {node.op_type} (node {name!r}, opset {opset}): attribute(s) "
                                  f"{', '.join(newer)} came after opset {conv.reviewed} and graphkernel does "
                                  "not implement them")
        implicit = outer_scope_names(node)  # what an If or Loop body reads from around it (a host op)
        nodes.append(NodeSpec(node.op_type, name, version, attrs, tuple(node.input) + implicit,
                              tuple(node.output), conv))
    static_uses = {n.inputs[i] for n in nodes for i in n.converter.static if i < len(n.inputs)}
    spec = ModelSpec(graph.name, opset, [], [o.name for o in graph.output], nodes)
    for t in graph.initializer:
        arr = to_array(t, f"initializer {t.name!r}", base_dir)
        small = arr.size <= SMALL_CONSTANT or t.name in static_uses
        (spec.constants if small else spec.weights)[t.name] = arr
    for vi in graph.input:
        if vi.name in spec.constants or vi.name in spec.weights:
            continue
        dtype, dims = declared_dims(vi, f"graph input {vi.name!r}")
        if dims is not None and any(isinstance(d, int) and d < 0 for d in dims):
            raise OnnxImportError(f"graph input {vi.name!r} declares a negative dim: {format_dims(dims)}")
        spec.inputs.append(InputSpec(vi.name, dtype, dims, vi.name in static_uses))
    for vi in graph.output:
        if vi.type.tensor_type.elem_type:
            to_dtype(vi.type.tensor_type.elem_type, f"graph output {vi.name!r}")
    return spec
