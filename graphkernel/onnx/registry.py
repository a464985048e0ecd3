"""The table of ONNX ops graphkernel converts: one Converter per op type.

    @converter("Reshape", static=(1,))
    def reshape(b: Builder, n: NodeInfo) -> list:   # the node's outputs: arrays or IR Values
        ...

`static` lists the inputs that must be known at compile time (a Reshape's shape, a Slice's starts, ...):
an initializer feeding one of them stays a constant rather than becoming a Parameter. `min_version` is
the oldest op version (since_version at the model's opset) whose semantics the converter implements.
The converters were written against opsets 13 to REVIEWED_OPSET (21); later versions of our ops add
types (bfloat16, float8, int4, ...), which the loader rejects, and a few attributes (Cast's round_mode,
Range's stash_type), which `unreviewed_attributes` finds so that a node setting one is refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from graphkernel.onnx.types import OnnxImportError

MIN_OPSET = 13
REVIEWED_OPSET = 21


@dataclass(frozen=True)
class Converter:
    op_type: str
    fn: Callable
    static: tuple[int, ...]
    min_version: int


CONVERTERS: dict[str, Converter] = {}


def converter(op_type: str, static: tuple[int, ...] = (), min_version: int = MIN_OPSET):
    def register(fn):
        if op_type in CONVERTERS:
            raise RuntimeError(f"two converters for ONNX {op_type}: {CONVERTERS[op_type].fn.__module__} and "
                               f"{fn.__module__}")
        CONVERTERS[op_type] = Converter(op_type, fn, static, min_version)
        return fn
    return register


def supported_ops() -> list[str]:
    _load_tables()
    return sorted(CONVERTERS)


def lookup(op_type: str, domain: str, version: int | None, node_name: str, opset: int) -> Converter:
    """The converter for a node, or OnnxImportError naming op, node and opset and listing what we have."""
    _load_tables()
    conv = CONVERTERS.get(op_type) if domain in ("", "ai.onnx") else None
    if conv is None or version is None or version < conv.min_version:
        what = f"{domain}::{op_type}" if domain not in ("", "ai.onnx") else op_type
        why = "is not supported" if conv is None or version is None else \
            f"version {version} is not supported (graphkernel implements version {conv.min_version} and up)"
        raise OnnxImportError(f"op {what} (node {node_name!r}, opset {opset}) {why}; graphkernel supports: "
                              f"{', '.join(sorted(CONVERTERS))}")
    return conv


def unreviewed_attributes(op_type: str, opset: int, attrs) -> list[str]:
    """The attributes among `attrs` that `op_type` gained after REVIEWED_OPSET (none at or below it)."""
    if opset <= REVIEWED_OPSET:
        return []
    import onnx.defs
    try:
        known = onnx.defs.get_schema(op_type, REVIEWED_OPSET, "").attributes
    except Exception:  # noqa: BLE001 - SchemaError: the op is newer than REVIEWED_OPSET
        return sorted(attrs)
    return sorted(a for a in attrs if a not in known)


def _load_tables() -> None:
    from graphkernel.onnx import ops_activation, ops_math, ops_nn, ops_reduce, ops_shape  # noqa: F401
