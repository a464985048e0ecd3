"""The table of ONNX ops graphkernel converts: one Converter per op type.

    @converter("Reshape", static=(1,), min_version=5)
    def reshape(b: Builder, n: NodeInfo) -> list:   # the node's outputs: arrays or IR Values
        ...

The ops_*.py modules fill the table as they are imported; converters.py imports them all and looks
converters up. `static` lists the inputs that must be known at compile time (a Reshape's shape, a
Slice's starts, ...): an initializer feeding one of them stays a constant rather than becoming a
Parameter.

ONNX versions each op on its own: a model's opset puts one version of every op in force (its schema's
since_version, onnx.defs.get_schema(op, opset).since_version; the loader records it as the node's
`version`). `min_version` is the oldest version whose semantics the converter implements; it implements
every version from there on (a converter that treats an older version differently, as Squeeze's axes
taken as an attribute before version 13, reads `n.version`). A node whose op is in force at an older
version is refused, naming op, version and opset. Each min_version was set from the op's versions before
13: a version that differs from the next only in the types it allows is implemented; one whose
attributes, inputs or semantics differ is either converted as it is (reading n.version) or refused.
Every converter names its min_version: a new one says which versions it was checked against.

No floor is set on the model's opset beyond ONNX's own (MIN_OPSET, 1): what changed before opset 7 changed
per op version, and is refused per op (Add 1 and 6 broadcast by a `broadcast` attribute, Max 6 not at all,
Cast 1 names its target type by a string, Dropout 6 and BatchNormalization 6 take is_test: versions before
each converter's min_version). A model-wide floor would only refuse models whose every op is in force at a
version graphkernel implements (ONNX's own Not tests are opset-1 models).

The converters were written against opsets 13 to REVIEWED_OPSET (21), or to a later opset a converter
names (`reviewed`: the quantization ops were written against opset 28); later versions of our ops add
types (float8, int4, ...), which the loader rejects, and a few attributes (Cast's round_mode, Range's
stash_type), which `unreviewed_attributes` finds so that a node setting one is refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

MIN_OPSET = 1
REVIEWED_OPSET = 21


@dataclass(frozen=True)
class Converter:
    op_type: str
    fn: Callable
    static: tuple[int, ...]
    min_version: int                   # the oldest version of the op whose semantics the converter implements
    reviewed: int = REVIEWED_OPSET     # the newest opset whose attributes of the op the converter implements


CONVERTERS: dict[str, Converter] = {}


def converter(op_type: str, *, min_version: int, static: tuple[int, ...] = (), reviewed: int = REVIEWED_OPSET):
    def register(fn):
        if op_type in CONVERTERS:
            raise RuntimeError(f"two converters for ONNX {op_type}: {CONVERTERS[op_type].fn.__module__} and "
                               f"{fn.__module__}")
        CONVERTERS[op_type] = Converter(op_type, fn, static, min_version, reviewed)
        return fn
    return register


def unreviewed_attributes(op_type: str, opset: int, attrs) -> list[str]:
    """The attributes among `attrs` that `op_type` gained after the opset its converter was reviewed
    against (none at or below it)."""
    reviewed = CONVERTERS[op_type].reviewed if op_type in CONVERTERS else REVIEWED_OPSET
    if opset <= reviewed:
        return []
    import onnx.defs
    try:
        known = onnx.defs.get_schema(op_type, reviewed, "").attributes
    except Exception:  # noqa: BLE001 - SchemaError: the op is newer than REVIEWED_OPSET
        return sorted(attrs)
    return sorted(a for a in attrs if a not in known)
