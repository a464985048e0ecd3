"""The default black/white/gray lists and the CANN alias table, read from ONE data file:
graphkernel/data/precision_lists.json.

    ops:     {"MatMul": {"list": "white", "fp32": false, "why": "..."}, ...}   one row per op of ours
    aliases: {"ReduceSumD": "ReduceSum", "Matmul": "MatMul", ...}            CANN / TF names -> ours

    resolve("ReduceSumD") -> "ReduceSum"   resolve("Conv2D") -> None (neither ours nor a known alias)
    default_list("Exp") -> "black"         lacks_fp32("MatMul") -> True (allow_fp32_to_fp16 lowers it)
    render_table()  -> the README's table of per-op defaults, generated from the data file

white: runs in float16 under allow_mix_precision; black: stays float32; gray: follows its inputs.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from ir.ops import OPS, canonical_name

WHITE, BLACK, GRAY = "white", "black", "gray"
LISTS = (WHITE, BLACK, GRAY)
DATA_FILE = "precision_lists.json"


@dataclass(frozen=True)
class OpPrecision:
    list: str             # default list: white, black or gray
    fp32_supported: bool  # False: the emulated AI Core computes this op in float16 only
    why: str


@dataclass(frozen=True)
class PrecisionTable:
    ops: dict[str, OpPrecision]
    aliases: dict[str, str]


@functools.cache
def table() -> PrecisionTable:
    """The data file, checked: every list name is known, every op and alias target is registered."""
    text = resources.files("graphkernel").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    doc = json.loads(text)
    ops = {}
    for op, row in doc["ops"].items():
        if op not in OPS or row["list"] not in LISTS:
            raise RuntimeError(f"graphkernel/data/{DATA_FILE}: bad row {op}: {row}")
        ops[op] = OpPrecision(row["list"], bool(row["fp32"]), row["why"])
    for alias, op in doc["aliases"].items():
        if op not in ops:
            raise RuntimeError(f"graphkernel/data/{DATA_FILE}: alias {alias} -> {op}, which has no row")
    return PrecisionTable(ops, dict(doc["aliases"]))


def resolve(name: str) -> str | None:
    """Our op for a name in a user's file: ours (or a MindSpore alias), a CANN alias, or None."""
    ours = canonical_name(name)
    if ours in OPS and ours != "Const":
        return ours
    return table().aliases.get(name)


def default_list(op: str) -> str:
    row = table().ops.get(op)
    return row.list if row is not None else GRAY


def lacks_fp32(op: str) -> bool:
    row = table().ops.get(op)
    return row is not None and not row.fp32_supported


def default_lists() -> dict[str, str]:
    return {op: row.list for op, row in table().ops.items()}


def render_table() -> str:
    """A Markdown table of every op's defaults (the README's), generated from the data file."""
    t = table()
    names: dict[str, list[str]] = {}
    for alias, op in sorted(t.aliases.items()):
        names.setdefault(op, []).append(f"`{alias}`")
    order = {WHITE: 0, BLACK: 1, GRAY: 2}
    rows = ["| op | default list | float32 on the emulated AI Core | also accepted as | why |",
            "|---|---|---|---|---|"]
    for op, row in sorted(t.ops.items(), key=lambda kv: (order[kv[1].list], kv[0])):
        fp32 = "yes" if row.fp32_supported else "no (float16 only)"
        rows.append(f"| {op} | {row.list} | {fp32} | {', '.join(names.get(op, [])) or '-'} | {row.why} |")
    return "\n".join(rows) + "\n"
