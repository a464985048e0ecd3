"""The complete table of ONNX converters: importing this module imports every ops_*.py, each of which
fills registry.CONVERTERS as it is imported; `lookup` and `supported_ops` read the filled table.
"""
from __future__ import annotations

# imported for their effect: each module registers its converters
from graphkernel.onnx import ops_activation, ops_math, ops_nn, ops_quantize, ops_reduce, ops_shape  # noqa: F401
from graphkernel.onnx.registry import CONVERTERS, Converter
from graphkernel.onnx.types import OnnxImportError


def supported_ops() -> list[str]:
    """The ONNX op types graphkernel converts."""
    return sorted(CONVERTERS)


def lookup(op_type: str, domain: str, version: int | None, node_name: str, opset: int) -> Converter:
    """The converter for a node, or OnnxImportError: an op we lack (naming op, node and opset, listing
    ours), or an op in force at a version older than its converter implements (naming op, node, version
    and opset)."""
    conv = CONVERTERS.get(op_type) if domain in ("", "ai.onnx") else None
    if conv is None or version is None:
        what = f"{domain}::{op_type}" if domain not in ("", "ai.onnx") else op_type
        raise OnnxImportError(f"op {what} (node {node_name!r}, opset {opset}) is not supported; graphkernel "
                              f"supports: {', '.join(sorted(CONVERTERS))}")
    if version < conv.min_version:
        raise OnnxImportError(f"op {op_type} (node {node_name!r}) is version {version} at the model's opset "
                              f"{opset}, which graphkernel does not implement: it converts {op_type} version "
                              f"{conv.min_version} and later (opset {conv.min_version} on; onnx.version_converter "
                              "converts a model to a newer opset)")
    return conv
