"""Every identifier of a generated kernel, from one namer per kernel.

A keyed name is its role's prefix followed by the role's key, joined by "_": `acc_3` holds the lanes
of reduction node 3, `t_in_0` the slice of input 0 a loop walks, `s_out_1_2` the stride of output 1 on
axis 2. Prefixes are distinct words without "_" and key parts are numbers or words without "_", so a
name spells its role and key uniquely: two roles cannot share a name (a constant and a loop variable,
a scratch row and an input load). The fixed names (`start`, `tile`, `j`) are whole words that no
keyed name can spell; the templates write them as they are.

    names = Names()
    names("acc", 3)       -> "acc_3"
    names("t", "in", 0)   -> "t_in_0"
    names("start")        -> "start"
    names.check(source)   every name the kernel function uses was issued here or is a global

The two tables below are the anatomy of a kernel: they tell what every variable of a generated
source is.
"""
from __future__ import annotations

import ast
import builtins

# names of their own: written as they are in the templates
FIXED = {
    # arguments
    "block_dim": "blocks of the launch",
    "tile": "units (or elements) a block walks at a time",
    "width": "columns per unit of a column reduction",
    "block_lo": "the first block this call runs (a launch runs its blocks in chunks, kernels.threads)",
    "block_hi": "past the last block this call runs",
    "fold": "whether this call folds the partials after its blocks (split)",
    # the grid
    "blk": "the block",
    "b": "the block as int64",
    "share": "units every block takes",
    "extra": "blocks that take one unit more",
    "start": "the block's first unit",
    "stop": "past the block's last unit",
    "unit": "the current unit",
    "p": "the current position of the kept axes",
    "rest": "the flat position still to decompose into axis indices",
    # elementwise segments
    "i": "flat position of the segment",
    "row": "row of the segment (all axes but the last)",
    "col": "column of the segment's first element",
    "n": "elements of the segment",
    "j": "element of a segment, row or chunk",
    # reductions
    "k": "lane",
    "q": "first element of the chunk",
    "cnt": "elements of the chunk",
    "qo": "position over the outer reduce axes",
    "nch": "chunks per row (split)",
    "q0": "first element of the unit's chunk (split)",
    "qn": "elements of the unit's chunk (split)",
    "tiles": "column tiles per row (columns)",
    "c0": "first column of the unit (columns)",
    "cw": "columns of the unit (columns)",
    "c": "column of the unit (columns), or chunk (split)",
    "r": "position over the reduce axes (columns)",
    # multi-tensor kernels
    "counts": "elements of each tensor (argument)",
    "total": "elements of all tensors",
    "tn": "the current tensor",
    "base": "flat position of the current tensor's first element in the concatenated space",
    "lo": "the block's first position in the current tensor",
    "hi": "past the block's last position in the current tensor",
}

# prefixes of keyed names: prefix_key
KEYED = {
    "in": "input buffer i (flat, C order)",
    "out": "output buffer k",
    "d": "size of collapsed axis a",
    "s": "stride of a buffer on an axis",
    "o": "flat offset of a buffer at the current position",
    "kb": "a buffer's offset at the current unit (columns)",
    "t": "the view of a buffer or scratch row the current loop walks (kernels.views)",
    "ch": "the chunk of a view the current chunk loop walks",
    "ix": "index on axis a, from a flat position",
    "cst": "scalar constant of node n",
    "sc": "scalar constant of node n as the kernel takes it (argument, float64)",
    "ld": "input i loaded for one element",
    "bc": "input i loaded once for a segment or row (constant along it)",
    "v": "value of node n for one element",
    "u": "value of node n at the unit level (after a reduction): a scalar, or an array over columns",
    "uc": "value of node n at the unit level for one column, in the unit loop (columns)",
    "acc": "accumulators of reduction n (64 lanes, or one per column)",
    "red": "folded result of reduction n",
    "part": "partial results of reduction n, one per chunk (split)",
    "scr": "scratch row: the operand of reduction n, computed before its lanes take it",
    "keep": "scratch row: a costly value of node n kept for a later pass",
    "mt": "the current tensor's array of a buffer with one array per tensor (multi-tensor kernels)",
}

GLOBALS = {"np", "math"}
# a fixed name that looked like a keyed one could be spelled by it; no prefix holds "_"
assert not {f.split("_")[0] for f in FIXED} & set(KEYED) and not any("_" in k for k in KEYED)
assert not (set(FIXED) | set(KEYED)) & GLOBALS


class NameClash(AssertionError):
    """Two roles of one kernel were given one name, or the kernel uses a name nobody issued (a
    codegen bug: every build of the kernel fails, so every test reaching it fails)."""


class Names:
    def __init__(self, globals_: set[str] = frozenset()):
        self.issued: dict[str, tuple] = {}
        self.globals = set(GLOBALS) | set(globals_)

    def __call__(self, role: str, *key) -> str:
        if role not in KEYED or not key:
            raise NameClash(f"{role!r} with key {key!r}: kernels.names.KEYED has no such prefix")
        parts = [role] + [str(k) for k in key]
        if any("_" in p or not p for p in parts[1:]):
            raise NameClash(f"a key part of {role!r} holds '_' or is empty: {key!r}")
        name = "_".join(parts)
        if name in self.globals:
            raise NameClash(f"{name!r} ({role}) is the name of a global")
        previous = self.issued.setdefault(name, (role,) + tuple(key))
        if previous != (role,) + tuple(key):   # unreachable by the rules above; kept as the invariant
            raise NameClash(f"{name!r} names both {previous} and {(role,) + tuple(key)}")
        return name

    def check(self, source: str, function: str) -> None:
        """NameClash unless every name `function` in `source` uses was issued or is a global."""
        tree = ast.parse(source)
        allowed = set(self.issued) | set(FIXED) | self.globals | set(dir(builtins)) | {function}
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function):
            for node in ast.walk(fn):
                name = node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg) else None
                if name is not None and name not in allowed:
                    raise NameClash(f"kernel {function} uses {name!r}, which kernels.names did not issue")
