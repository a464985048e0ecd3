"""customize_dtypes (CANN's format): per-op dtypes that override the precision mode for single ops.

    # by node name (our MindSpore-style scope names)
    Default/net/ReLU-op3::InputDtype:float16,OutputDtype:float16
    # by op type (ours or a CANN name through the alias table)
    OpType::MatMul:InputDtype:float32,float32,OutputDtype:float32

One op per line; `#` starts a comment line; blank lines are skipped. Dtypes are positional (input i
takes the i-th InputDtype; a list shorter than the op's inputs repeats its last entry, extra entries are
ignored). Only float16, bfloat16 and float32 act, on float16/bfloat16/float32 values: the emulated AI Core
computes float ops in those, so other CANN dtypes (int8 in CANN's example) are accepted and ignored. A name entry wins over a
type entry; an entry naming a composite op (by name or type) also governs the primitives expanded from
it. Ignored under must_keep_origin_dtype, as in CANN. A missing file, a line that does not parse, an
unknown dtype or a second entry for the same name or type is a PrecisionConfigError naming file and line.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from ir.dtypes import DType
from graphkernel.settings.config_file import PrecisionConfigError, parsed_once, read_text
from graphkernel.precision.lists import resolve, unknown_name

KEY = "customize_dtypes"
BY_TYPE = "OpType"
# CANN dtype names; only float16, bfloat16 and float32 change what a graphkernel op computes in
DTYPES = {"float16": DType.float16, "half": DType.float16, "float32": DType.float32, "float": DType.float32,
          "float64": None, "double": None, "bfloat16": DType.bfloat16, "int4": None, "int8": None, "int16": None,
          "int32": None, "int64": None, "uint8": None, "uint16": None, "uint32": None, "uint64": None,
          "bool": None}
FORMAT = ("expected 'Opname::InputDtype:dtype1,...,OutputDtype:dtype1,...' or "
          "'OpType::TypeName:InputDtype:dtype1,...,OutputDtype:dtype1,...'")


@dataclass(frozen=True)
class DtypeRule:
    inputs: tuple[DType | None, ...]    # positional; None: leave that input as the mode decides
    outputs: tuple[DType | None, ...]
    line: int

    def input_dtype(self, i: int) -> DType | None:
        return self.inputs[min(i, len(self.inputs) - 1)] if self.inputs else None

    def output_dtype(self, i: int) -> DType | None:
        return self.outputs[min(i, len(self.outputs) - 1)] if self.outputs else None


@dataclass(frozen=True)
class CustomizeDtypes:
    path: str
    by_name: tuple[tuple[str, DtypeRule], ...]
    by_type: tuple[tuple[str, DtypeRule], ...]

    def rule_for(self, name: str, op_types: tuple[str, ...], scopes: tuple[str, ...]) -> DtypeRule | None:
        """The rule of a node: by its name or an enclosing composite's name first, then by type."""
        names = dict(self.by_name)
        for key in (name, *scopes):
            if key in names:
                return names[key]
        types = dict(self.by_type)
        for op in op_types:
            if op in types:
                return types[op]
        return None


def _dtypes(path: str, lineno: int, text: str) -> tuple[DType | None, ...]:
    out = []
    for name in (t.strip() for t in text.split(",")):
        if not name:
            continue
        if name not in DTYPES:
            raise PrecisionConfigError(f"{KEY} file {path!r}, line {lineno}: unknown dtype {name!r}; "
                                       f"accepted: {', '.join(DTYPES)}")
        out.append(DTYPES[name])
    return tuple(out)


def parse_rule(path: str, lineno: int, spec: str) -> DtypeRule:
    """`InputDtype:...,OutputDtype:...` (either part may be left out, not both)."""
    head, sep, outs = spec.partition("OutputDtype:")
    head = head.strip()
    if head and not head.startswith("InputDtype:"):
        raise PrecisionConfigError(f"{KEY} file {path!r}, line {lineno}: {head!r} does not start with "
                                   f"InputDtype: or OutputDtype:; {FORMAT}")
    rule = DtypeRule(_dtypes(path, lineno, head[len("InputDtype:"):]), _dtypes(path, lineno, outs), lineno)
    if not rule.inputs and not rule.outputs:
        raise PrecisionConfigError(f"{KEY} file {path!r}, line {lineno}: no dtypes given; {FORMAT}")
    return rule


@parsed_once
def read_customize_dtypes(path: str) -> CustomizeDtypes:
    by_name: dict[str, DtypeRule] = {}
    by_type: dict[str, DtypeRule] = {}
    for lineno, raw in enumerate(read_text(path, KEY, PrecisionConfigError).splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        target, sep, spec = line.partition("::")
        if not sep or not target.strip():
            raise PrecisionConfigError(f"{KEY} file {path!r}, line {lineno}: {line!r}: {FORMAT}")
        target = target.strip()
        table, key = by_name, target
        if target == BY_TYPE:
            type_name, sep, spec = spec.partition(":")
            if not sep or not type_name.strip():
                raise PrecisionConfigError(f"{KEY} file {path!r}, line {lineno}: {line!r}: {FORMAT}")
            table, key = by_type, resolve(type_name.strip())
            if key is None:
                warnings.warn(f"{KEY} file {path!r}, line {lineno}: op type {unknown_name(type_name.strip())} "
                              "(ignored)", UserWarning, stacklevel=2)
                continue
        if key in table:
            raise PrecisionConfigError(f"{KEY} file {path!r}, line {lineno}: a second entry for {key!r} "
                                       f"(the first is on line {table[key].line})")
        table[key] = parse_rule(path, lineno, spec)
    return CustomizeDtypes(path, tuple(sorted(by_name.items())), tuple(sorted(by_type.items())))
