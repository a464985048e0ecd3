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
    """The converter for a node, or OnnxImportError naming op, node and opset and listing what we have."""
    conv = CONVERTERS.get(op_type) if domain in ("", "ai.onnx") else None
    if conv is None or version is None or version < conv.min_version:
        what = f"{domain}::{op_type}" if domain not in ("", "ai.onnx") else op_type
        why = "is not supported" if conv is None or version is None else \
            f"version {version} is not supported (graphkernel implements version {conv.min_version} and up)"
        raise OnnxImportError(f"op {what} (node {node_name!r}, opset {opset}) {why}; graphkernel supports: "
                              f"{', '.join(sorted(CONVERTERS))}")
    return conv
