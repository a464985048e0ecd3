"""Declared dynamic shapes as plain data, and seed 004's session options that declare them.

    InputSpec(name, shape, dtype, ranges)   one input: shape entries int (static) or None (dynamic),
                                            shape None for any rank; ranges (lo, hi) per dynamic dim
                                            (hi None: unbounded)
    Declaration(specs, gears, origin)       per call argument an InputSpec or None (as called), and
                                            for gears the accepted values of the dynamic dims, in order

Seed 004's options (`set_context` keys), in its syntax:

    gears    input_shape="data:1,1,40,-1;label:1,-1;mask:-1,-1"     name:dims; -1 a dynamic dim
             dynamic_dims="20,20,1,1;40,40,2,2;80,60,4,4"          one gear per `;`: a value for every
                                                                   -1 of input_shape, in order; at
                                                                   least two gears
             dynamic_node_type=0                                   0 dataset inputs, 1 placeholders
                                                                   (both: a Cell's call inputs here)
    ranges   dynamic_input=True, dynamic_graph_execute_mode="dynamic_execute",
             dynamic_inputs_shape_range="getnext:[128 ,3~5, 2~128, -1],[64 ,3~5, 2~128, -1];data:[128 ,3~5, 2~128, -1]"
                                                                   name:[dims] (several after one name
                                                                   are that name's inputs in order);
                                                                   a~b a range, -1 any size

A name is a parameter name of the called Cell's construct (a train cell's `construct(*inputs)`: its
network's); `getnext` (the dataset's) stands for the call's inputs in order. Options that name none of a
Cell's inputs leave it static (graphkernel/cell.py warns once); naming some and not others is an error. The three gear options go together, and so do the three range options: each
inconsistency (gears that do not match the -1 count, a single gear, a range without dynamic_input,
gears and ranges at once) is a DynamicShapeSettingError naming the option.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ir.dtypes import DType
from ir.errors import GraphKernelError

GEAR_KEYS = ("input_shape", "dynamic_dims", "dynamic_node_type")
RANGE_KEYS = ("dynamic_input", "dynamic_graph_execute_mode", "dynamic_inputs_shape_range")
DATASET_NAME = "getnext"


class DynamicShapeSettingError(GraphKernelError, ValueError):
    """A dynamic-shape declaration (session option, set_inputs, jit) that is malformed or inconsistent."""


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple | None                 # int (static) or None (dynamic) per dim; None: any rank
    dtype: DType | None = None          # None: any (seed 004's options give no dtype)
    ranges: tuple | None = None         # per dim: (lo, hi) for a dynamic dim (hi None: unbounded), None static
    gear_columns: tuple = ()            # gears: per dynamic dim, its column in each gear
    symbols: tuple = ()                 # per dim, the name of its size (ONNX dim_params: one name, one
                                        # size in every input), or None for a size of its own

    @property
    def dynamic_axes(self) -> tuple[int, ...]:
        return () if self.shape is None else tuple(a for a, d in enumerate(self.shape) if d is None)

    def range_of(self, axis: int) -> tuple[int, int | None]:
        if self.ranges is None or self.ranges[axis] is None:
            return (1, None)
        return self.ranges[axis]

    def text(self) -> str:
        """`float32[None, 128]` (ranges as lo~hi): the declaration in messages."""
        dtype = self.dtype.value if self.dtype is not None else ""
        if self.shape is None:
            return f"{dtype}[any rank]"
        dims = []
        for a, d in enumerate(self.shape):
            if d is not None:
                dims.append(str(d))
            elif self.gear_columns:
                dims.append("-1")   # a gear's dim: the gears list its values
            else:
                lo, hi = self.range_of(a)
                dims.append("None" if (lo, hi) == (1, None) else f"{lo}~{'inf' if hi is None else hi}")
        return f"{dtype}[{', '.join(dims)}]"


@dataclass(frozen=True)
class Declaration:
    specs: tuple                        # per call argument: InputSpec or None
    gears: tuple | None = None          # the accepted tuples of the dynamic dims' values, in order
    origin: str = "set_inputs"          # what declared it, for messages

    @property
    def dynamic(self) -> bool:
        return any(s is not None and (s.shape is None or None in s.shape) for s in self.specs)


# --- seed 004's syntax ------------------------------------------------------------------------------------
_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_./-]*)\s*:(.*)")


def _int(text: str, option: str, what: str) -> int:
    text = text.strip()
    if not re.fullmatch(r"-?\d+", text):
        raise DynamicShapeSettingError(f"{option}: {what} {text!r} is not an integer")
    return int(text)


def parse_input_shape(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """input_shape: [(name, dims)], -1 a dynamic dim."""
    out = []
    for part in _parts(text, "input_shape"):
        m = _NAME.fullmatch(part)
        if m is None:
            raise DynamicShapeSettingError(f"input_shape: {part!r} is not name:dims (like data:1,1,40,-1)")
        dims = tuple(_int(d, "input_shape", f"a dim of {m.group(1)}") for d in m.group(2).split(",")) \
            if m.group(2).strip() else ()
        if any(d < -1 for d in dims):
            raise DynamicShapeSettingError(f"input_shape: {m.group(1)} has a dim below -1 ({list(dims)}); a dim is a "
                                           "size or -1 (a gear)")
        out.append((m.group(1), dims))
    _no_repeats([n for n, _ in out], "input_shape")
    return out


def parse_dynamic_dims(text: str) -> list[tuple[int, ...]]:
    """dynamic_dims: the gears, each the values of the -1 dims in order."""
    gears = []
    for part in _parts(text, "dynamic_dims"):
        gear = tuple(_int(d, "dynamic_dims", "a size") for d in part.split(","))
        if any(d < 1 for d in gear):
            raise DynamicShapeSettingError(f"dynamic_dims: gear {part!r} has a size below 1")
        gears.append(gear)
    return gears


def parse_shape_range(text: str) -> list[tuple[str, list[tuple]]]:
    """dynamic_inputs_shape_range: [(name, [dims, ...])], a dim an int, (lo, hi) or (1, None) for -1."""
    out = []
    for part in _parts(text, "dynamic_inputs_shape_range"):
        m = _NAME.fullmatch(part)
        if m is None or not m.group(2).strip().startswith("["):
            raise DynamicShapeSettingError(f"dynamic_inputs_shape_range: {part!r} is not name:[dims] (like "
                                           "data:[128,3~5,2~128,-1])")
        shapes = re.findall(r"\[([^\[\]]*)\]", m.group(2))
        rest = re.sub(r"\[[^\[\]]*\]", "", m.group(2)).replace(",", "").strip()
        if rest or not shapes:
            raise DynamicShapeSettingError(f"dynamic_inputs_shape_range: {part!r}: the shapes of {m.group(1)} must be "
                                           "[dims] separated by commas")
        out.append((m.group(1), [tuple(_range_dim(d, m.group(1)) for d in s.split(",")) for s in shapes]))
    _no_repeats([n for n, _ in out], "dynamic_inputs_shape_range")
    return out


def _range_dim(text: str, name: str):
    text = text.strip()
    if "~" in text:
        lo, _, hi = text.partition("~")
        lo, hi = _int(lo, "dynamic_inputs_shape_range", f"a bound of {name}"), \
            _int(hi, "dynamic_inputs_shape_range", f"a bound of {name}")
        if not 1 <= lo <= hi:
            raise DynamicShapeSettingError(f"dynamic_inputs_shape_range: {name} has the range {text}; a range lo~hi "
                                           "needs 1 <= lo <= hi")
        return (lo, hi)
    value = _int(text, "dynamic_inputs_shape_range", f"a dim of {name}")
    if value == -1:
        return (1, None)
    if value < 0:
        raise DynamicShapeSettingError(f"dynamic_inputs_shape_range: {name} has the dim {value}; a dim is a size, "
                                       "lo~hi or -1")
    return value


def _parts(text: str, option: str) -> list[str]:
    if not isinstance(text, str):
        raise DynamicShapeSettingError(f"{option}: expected a string, got {type(text).__name__}")
    parts = [p.strip() for p in text.split(";")]
    if not text.strip() or any(not p for p in parts):
        raise DynamicShapeSettingError(f"{option}: {text!r} has an empty entry (entries are separated by ';')")
    return parts


def _no_repeats(names: list[str], option: str) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise DynamicShapeSettingError(f"{option}: input {n} is named twice")
        seen.add(n)


# --- the session's declaration ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionShapes:
    """The dynamic shapes seed 004's options declare, by input name (`getnext`: the call's inputs)."""
    shapes: tuple                       # ((name, (InputSpec, ...)), ...)
    gears: tuple | None                 # gears: the accepted values of the -1 dims, in input_shape's order
    origin: str
    _made: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def declaration(self, names: list[str]) -> Declaration | None:
        """The declaration for a call whose inputs are called `names` (the same object for the same
        names: a Cell remembers fits by it); None when the options name none of them, and a
        DynamicShapeSettingError when they name some and not others."""
        key = tuple(names)
        if key not in self._made:
            self._made[key] = self._declaration(names)
        return self._made[key]

    def _declaration(self, names: list[str]) -> Declaration | None:
        by_name = dict(self.shapes)
        specs: list = [None] * len(names)
        matched = []
        if DATASET_NAME in by_name:
            for k, spec in enumerate(by_name[DATASET_NAME][: len(names)]):
                specs[k] = spec
            matched.append(DATASET_NAME)
        for k, n in enumerate(names):
            if n in by_name and n != DATASET_NAME:
                if len(by_name[n]) != 1:
                    raise DynamicShapeSettingError(f"{self.origin}: {n} is one input, the option gives it "
                                                   f"{len(by_name[n])} shapes")
                specs[k] = by_name[n][0]
                matched.append(n)
        if not matched:
            return None
        missing = [n for n, _ in self.shapes if n not in matched]
        if missing:
            raise DynamicShapeSettingError(f"{self.origin}: no input is called {', '.join(missing)} (the inputs: "
                                           f"{', '.join(names) or 'none'}; `getnext` names them all in order)")
        return Declaration(tuple(specs), self.gears, self.origin)


def session_shapes(settings: dict) -> SessionShapes | None:
    """The declaration of seed 004's options in `settings` (the context's values), or None when none is
    set; every inconsistency a DynamicShapeSettingError naming the option."""
    gear_set = {k for k in GEAR_KEYS if settings.get(k) is not None}
    range_set = {k for k in RANGE_KEYS if settings.get(k) not in (None, False)}
    if gear_set and range_set:
        raise DynamicShapeSettingError(f"{', '.join(sorted(gear_set))} (gears) and {', '.join(sorted(range_set))} "
                                       "(ranges) are both set: a session declares gears or ranges, not both")
    if gear_set:
        return _gears(settings, gear_set)
    if range_set:
        return _ranges(settings, range_set)
    return None


def _gears(settings: dict, given: set) -> SessionShapes:
    for key in GEAR_KEYS:
        if key not in given:
            raise DynamicShapeSettingError(f"{key} is not set: input_shape, dynamic_dims and dynamic_node_type go "
                                           f"together (seed 004), {', '.join(sorted(given))} given")
    shapes = parse_input_shape(settings["input_shape"])
    gears = parse_dynamic_dims(settings["dynamic_dims"])
    count = sum(d == -1 for _, dims in shapes for d in dims)
    if count == 0:
        raise DynamicShapeSettingError("input_shape has no -1 dim: gears (dynamic_dims) choose the values of its "
                                       "-1 dims")
    if len(gears) < 2:
        raise DynamicShapeSettingError(f"dynamic_dims lists {len(gears)} gear; it must list at least 2 (seed 004: "
                                       "more than one group)")
    for k, gear in enumerate(gears):
        if len(gear) != count:
            raise DynamicShapeSettingError(f"dynamic_dims: gear {k} ({','.join(map(str, gear))}) has {len(gear)} "
                                           f"size(s), input_shape has {count} dim(s) of -1: every gear gives one "
                                           "size per -1, in order")
    if len(set(gears)) != len(gears):
        raise DynamicShapeSettingError("dynamic_dims lists a gear twice")
    specs = []
    cursor = 0
    for name, dims in shapes:
        dyn = [a for a, d in enumerate(dims) if d == -1]
        ranges = [None] * len(dims)
        for j, a in enumerate(dyn):
            values = [g[cursor + j] for g in gears]
            ranges[a] = (min(values), max(values))
        cursor += len(dyn)
        spec = InputSpec(name, tuple(None if d == -1 else d for d in dims), None, tuple(ranges),
                         tuple(range(cursor - len(dyn), cursor)))
        specs.append((name, (spec,)))
    return SessionShapes(tuple(specs), tuple(gears), "input_shape/dynamic_dims")


def _ranges(settings: dict, given: set) -> SessionShapes:
    if not settings.get("dynamic_input"):
        raise DynamicShapeSettingError(f"{', '.join(sorted(given))} set without dynamic_input=True: ranges apply "
                                       "only to dynamic inputs (seed 004)")
    if settings.get("dynamic_graph_execute_mode") != "dynamic_execute":
        raise DynamicShapeSettingError("dynamic_input=True needs dynamic_graph_execute_mode=\"dynamic_execute\" "
                                       "(the mode that compiles for dynamic_inputs_shape_range)")
    if settings.get("dynamic_inputs_shape_range") is None:
        raise DynamicShapeSettingError("dynamic_input=True needs dynamic_inputs_shape_range (the ranges to compile "
                                       "for)")
    specs = []
    for name, shapes in parse_shape_range(settings["dynamic_inputs_shape_range"]):
        out = []
        for k, dims in enumerate(shapes):
            label = name if len(shapes) == 1 else f"{name}[{k}]"
            out.append(InputSpec(label, tuple(d if isinstance(d, int) else None for d in dims), None,
                                 tuple(d if isinstance(d, tuple) else None for d in dims)))
        specs.append((name, tuple(out)))
    return SessionShapes(tuple(specs), None, "dynamic_inputs_shape_range")


def check_option(key: str):
    """The set_context check of one option (its own syntax; the options together are checked when a
    graph compiles, by session_shapes)."""
    def check(v):
        if v is None:
            return None
        if key == "input_shape":
            parse_input_shape(v)
        elif key == "dynamic_dims":
            parse_dynamic_dims(v)
        elif key == "dynamic_inputs_shape_range":
            parse_shape_range(v)
        elif key == "dynamic_node_type":
            if isinstance(v, bool) or v not in (0, 1):
                raise DynamicShapeSettingError(f"got {v!r}; accepted: 0 (dataset inputs) or 1 (placeholders)")
        elif key == "dynamic_graph_execute_mode":
            if v != "dynamic_execute":
                raise DynamicShapeSettingError(f"got {v!r}; accepted: 'dynamic_execute'")
        return v
    return check
