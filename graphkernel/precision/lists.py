"""The default black/white/gray lists and the CANN alias table, read from the op table (each op's
`precision` and `cann` facts, ir/ops).

    resolve("ReduceSumD") -> "ReduceSum"   resolve("Conv3D") -> None (neither ours nor a known alias)
    unknown_name("Mull") -> "'Mull' is neither a graphkernel op nor a known CANN alias (did you mean 'Mul'?)"
    default_list("Exp") -> "black"         lacks_fp32("MatMul") -> True (allow_fp32_to_fp16 lowers it)
    render_table()  -> the table of per-op defaults in docs/precision.md, generated from the op table

white: runs in float16 under allow_mix_precision; black: stays float32; gray: follows its inputs.
"""
from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass

from ir.ops import OPS, Precision, canonical_name

WHITE, BLACK, GRAY = "white", "black", "gray"
LISTS = (WHITE, BLACK, GRAY)


@dataclass(frozen=True)
class PrecisionTable:
    ops: dict[str, Precision]     # every op but Const
    aliases: dict[str, str]       # CANN / TensorFlow names -> ours


@functools.cache
def table() -> PrecisionTable:
    ops = {name: d.precision for name, d in OPS.items() if name != "Const"}
    aliases = {alias: name for name, d in OPS.items() for alias in d.cann + d.aliases}
    return PrecisionTable(ops, aliases)


def resolve(name: str) -> str | None:
    """Our op for a name in a user's file: ours (or a MindSpore alias), a CANN alias, or None."""
    ours = canonical_name(name)
    if ours in OPS and ours != "Const":
        return ours
    return table().aliases.get(name)


def unknown_name(name: str) -> str:
    """What a warning says of a name `resolve` does not know, with the nearest known name if one is close."""
    near = difflib.get_close_matches(name, sorted(set(table().ops) | set(table().aliases)), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"{name!r} is neither a graphkernel op nor a known CANN alias{hint}"


def default_list(op: str) -> str:
    row = table().ops.get(op)
    return row.list if row is not None else GRAY


def lacks_fp32(op: str) -> bool:
    row = table().ops.get(op)
    return row is not None and not row.fp32


def default_lists() -> dict[str, str]:
    return {op: row.list for op, row in table().ops.items()}


def render_table() -> str:
    """A Markdown table of every op's defaults (docs/precision.md's), generated from the op table."""
    t = table()
    names: dict[str, list[str]] = {}
    for alias, op in sorted(t.aliases.items()):
        names.setdefault(op, []).append(f"`{alias}`")
    order = {WHITE: 0, BLACK: 1, GRAY: 2}
    rows = ["| op | default list | float32 on the emulated AI Core | also accepted as | why |",
            "|---|---|---|---|---|"]
    for op, row in sorted(t.ops.items(), key=lambda kv: (order[kv[1].list], kv[0])):
        fp32 = "yes" if row.fp32 else "no (float16 only)"
        rows.append(f"| {op} | {row.list} | {fp32} | {', '.join(names.get(op, [])) or '-'} | {row.why} |")
    return "\n".join(rows) + "\n"
