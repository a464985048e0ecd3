"""The IR's text form: `print_graph(graph) -> str`, read back by `ir.parser.parse_graph`.

    graph(%0: f32[4,4] loc("x")) {
      %1 = Const() {value=f32[](2.0)} : f32[]
      %2 = Mul(%0, %1) : f32[4,4] loc("Default/Mul-op0")
      %3, %4, %5 = LayerNorm(%2, %6, %7) {begin_norm_axis=1, epsilon=1e-07} : (f32[4,4], f32[4,1], f32[4,1])
      %6 = Composite(%2, %1) : f32[4,4] loc("Fused_Mul_Add_0")
        graph(%0: f32[4,4], %1: f32[]) {
          ...
        }
      return %2, %6
    }

A graph with symbolic sizes (ir/symbolic.py) names them with their representative values first,
`graph symbols(s0=8) (%0: f32[s0,4]) {`, and prints each size as its expression (`f32[s0*4]`,
`{shape=[s0, 4]}`). An If's branches (ir/ops/control.py) print below it, each after its label (`else:`, `then:`); the
branch attributes themselves print as opaque `<branch: ...>` tokens, which the parser refuses.

Values are numbered when printed (graph inputs first, then node results in order; a composite's
subgraph numbers its own). Node names are metadata, printed as `loc("...")` with JSON-style escapes
and every non-printable character escaped, so an untrusted name can never break the line structure.
Attribute values print so that they read back exactly: floats by `repr`, Literal arrays element by
element in C order with the shortest decimal that rounds back to the same bits (NaNs other than the
canonical one as `nan(0x<bits>)`). A value from outside the graph prints as `%?<op>#<index>`,
which the parser rejects.
"""
from __future__ import annotations

import re

import numpy as np

from ir.dtypes import DType, SHORT_NAMES, as_dtype
from ir.errors import IRError
from ir.graph import Branch, Graph, Literal, Node, TensorType, Value
from ir.symbolic import Dim
from ir.specialize import symbols_of

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Words the parser reads as keywords or constants; op names and attr keys spelled so are quoted.
RESERVED = frozenset({"graph", "return", "loc", "true", "false", "none", "nan", "inf"}) | set(SHORT_NAMES)
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def quote(text: str) -> str:
    """A double-quoted, escaped, single-line, printable form of `text` (read back exactly by the parser).

    JSON escapes, plus `\\uXXXX` for every other non-printable BMP character and `\\UXXXXXXXX` for
    surrogates and non-printable astral characters.
    """
    text = str(text)
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    parts = []
    for ch in text:
        if ch in _ESCAPES:
            parts.append(_ESCAPES[ch])
        elif ch.isprintable():
            parts.append(ch)
        else:
            code = ord(ch)
            parts.append(f"\\U{code:08x}" if code > 0xFFFF or 0xD800 <= code <= 0xDFFF else f"\\u{code:04x}")
    return '"' + "".join(parts) + '"'


def printable(text, limit: int | None = None) -> str:
    """`text` as one printable line for a terminal, a table or a label: every non-printable character
    (newline, ESC, ...) shown as its escape, so a hostile name cannot redraw a terminal or forge a row;
    cut at `limit` characters with `...`."""
    text = str(text)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else quote(ch)[1:-1] for ch in text)
    return text if limit is None or len(text) <= limit else text[:limit] + "..."


def word(text: str) -> str:
    """An op name or attribute key: bare when it is a plain identifier, quoted otherwise."""
    return text if IDENT.match(text) and text not in RESERVED else quote(text)


def describe(node: Node, limit: int = 200) -> str:
    """`Op (name)` for error messages, the name escaped and shortened."""
    if not node.name:
        return str(node.op)
    return f"{printable(node.op)} ({printable(node.name, limit)})"


def format_type(t: TensorType) -> str:
    if not isinstance(t, TensorType) or not isinstance(t.dtype, DType):
        raise IRError(f"cannot print {t!r}: not a TensorType")
    return f"{t.dtype.short}[{','.join(str(d) if isinstance(d, Dim) else str(int(d)) for d in t.shape)}]"


def format_attr(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)   # a symbolic size (ir.symbolic.Dim) prints its expression
    if isinstance(value, float):
        return repr(value)  # 'nan', 'inf', '-inf' included
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, DType):
        return value.short
    if isinstance(value, tuple):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    if isinstance(value, Literal):
        return format_literal(value)
    if hasattr(type(value), "ir_text"):  # an opaque value (a PyFunc's function): printed, never parsed
        return value.ir_text()
    raise IRError(f"cannot print attribute value {value!r} of type {type(value).__name__}")


def format_literal(lit: Literal) -> str:
    arr = lit.array
    try:
        dtype = as_dtype(arr.dtype)
    except IRError:
        raise IRError(f"cannot print a Literal of numpy dtype {arr.dtype}") from None
    if arr.dtype != dtype.np:  # e.g. big-endian: same dtype, other bytes
        raise IRError(f"cannot print a Literal of non-native numpy dtype {arr.dtype.str}")
    flat = np.ravel(arr, order="C")
    if dtype is DType.bool:
        items = ["true" if v else "false" for v in flat.tolist()]
    elif dtype.is_int:
        items = [str(v) for v in flat.tolist()]
    else:
        items = _float_items(flat, dtype)
    return f"{dtype.short}[{','.join(map(str, arr.shape))}](" + ", ".join(items) + ")"


def _float_items(flat: np.ndarray, dtype: DType) -> list[str]:
    """Shortest decimals that read back (float64 parse, then one cast) to the same bits."""
    if dtype is DType.float64:
        items = [repr(v) for v in flat.tolist()]
    else:   # numpy's shortest repr for the element's own precision, read as a float (float4's "-0" is not)
        items = [s if any(c in s for c in ".en") else s + ".0" for s in map(str, flat)]
    uint = _UINT[flat.dtype.itemsize]
    bits = flat.view(uint)
    with np.errstate(all="ignore"):
        back = np.array([float(s) for s in items], dtype=np.float64).astype(flat.dtype).view(uint)
    canonical_nan = np.array(np.nan, dtype=flat.dtype).view(uint)
    for i in np.flatnonzero(back != bits).tolist():
        if np.isnan(flat[i]):
            if bits[i] != canonical_nan:
                items[i] = f"nan(0x{int(bits[i]):0{2 * flat.dtype.itemsize}x})"
        else:
            items[i] = repr(float(flat[i]))  # exact in float64, so exact after the cast
    return items


def _numbering(graph: Graph) -> dict[Value, str]:
    names: dict[Value, str] = {}
    for v in graph.inputs:
        names.setdefault(v, f"%{len(names)}")
    for node in graph.nodes:
        for v in node.outputs:
            names.setdefault(v, f"%{len(names)}")
    return names


def _ref(names: dict[Value, str], v) -> str:
    if not isinstance(v, Value):
        raise IRError(f"cannot print {v!r}: not an IR Value")
    return names.get(v) or f"%?{v.node.op}#{v.index}"


def _loc(name) -> str:
    return f" loc({quote(name)})" if name else ""


def _print(graph: Graph, lines: list[str], indent: str, symbols: dict | None = None) -> None:
    names = _numbering(graph)
    params = ", ".join(f"{names[v]}: {format_type(v.type)}{_loc(v.node.name)}" for v in graph.inputs)
    sizes = f" symbols({', '.join(f'{k}={v}' for k, v in sorted(symbols.items()))}) " if symbols else ""
    lines.append(f"{indent}graph{sizes}({params}) {{")
    body = indent + "  "
    for node in graph.nodes:
        results = ", ".join(names[v] for v in node.outputs)
        lhs = f"{results} = " if results else ""
        args = ", ".join(_ref(names, v) for v in node.inputs)
        attrs = ", ".join(f"{word(k)}={format_attr(v)}" for k, v in node.attrs)
        attrs = f" {{{attrs}}}" if attrs else ""
        types = [format_type(t) for t in node.types]
        type_text = types[0] if len(types) == 1 else "(" + ", ".join(types) + ")"
        lines.append(f"{body}{lhs}{word(str(node.op))}({args}){attrs} : {type_text}{_loc(node.name)}")
        if node.subgraph is not None:
            _print(node.subgraph, lines, body + "  ")
        for key, value in node.attrs:   # an If's branches: each graph below its node, labelled
            if isinstance(value, Branch):
                lines.append(f"{body}  {word(key)}:")
                _print(value.graph, lines, body + "  ")
    outputs = ", ".join(_ref(names, v) for v in graph.outputs)
    lines.append(f"{body}return{' ' + outputs if outputs else ''}")
    lines.append(f"{indent}}}")


def print_graph(graph: Graph) -> str:
    """The graph as deterministic text, one line per node, ending with a newline."""
    if not isinstance(graph, Graph):
        raise IRError(f"print_graph needs a Graph, got {type(graph).__name__}")
    lines: list[str] = []
    _print(graph, lines, "", symbols_of(graph))
    return "\n".join(lines) + "\n"
