"""Reading the IR's text form back: `parse_graph(text) -> Graph`, the inverse of `print_graph`.

A hand-written lexer (tokens made a line at a time, each with its line and column) and a recursive-descent
parser. Whitespace and `#` comments are insignificant; the grammar:

    graph     := 'graph' [symbols] '(' [param {',' param}] ')' '{' {statement} 'return' [ref {',' ref}] '}'
    symbols   := 'symbols' '(' NAME '=' INT {',' NAME '=' INT} ')'    (named sizes, their hints)
    param     := VALUE ':' type [loc]
    statement := [VALUE {',' VALUE} '='] opname '(' [ref {',' ref}] ')' [attrs] ':' types [loc] [graph]
    types     := type | '(' [type {',' type}] ')'          type := DTYPE '[' [dim {',' dim}] ']'
    dim       := INT | SIZE          SIZE: a symbolic size over the graph's symbols (s0*128, (s0*s1//32))
    attrs     := '{' [key '=' attr {',' key '=' attr}] '}'
    attr      := INT | SIZE | FLOAT | STRING | true | false | none | DTYPE | '[' [attr {',' attr}] ']'
               | DTYPE '[' dims ']' '(' [element {',' element}] ')'      (a Literal, flat C order)
    loc       := 'loc' '(' STRING ')'

Statements are parsed in a loop (100,000 nodes are fine); only a composite's subgraph and nested attr
lists recurse, with a depth limit. Nodes are built with `Node(...)` exactly as written: types are not
re-inferred and op names need not be registered (that is `verify`'s job). Any malformed text raises
ParseError with the line and column of the offending token and what was expected there.
"""
from __future__ import annotations

import re
from typing import Iterator, NamedTuple

import numpy as np

from ir.dtypes import SHORT_NAMES, DType, from_short
from ir.errors import ParseError
from ir.graph import Graph, Literal, Node, TensorType, Value, input_node
from ir.symbolic import Dim, SymbolicError, parse_dim

MAX_DEPTH = 64  # nesting of composite subgraphs and attribute lists
MAX_ELEMENTS = 2**63 - 1  # of one tensor type: an int64 count

_TOKEN = re.compile(r"""[ \t\r]*(?:            # each match: blanks, then one token
    (?P<value>%[A-Za-z0-9_.]+)
  | (?P<hex>0[xX][0-9a-fA-F]+)
  | (?P<number>[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|inf|nan)(?![A-Za-z0-9_.]))
  | (?P<type>(?:f16|f32|f64|i32|i64|bool)\[(?:\d+(?:,\d+)*)?\])    # a type without blanks: the fast path
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[(){}\[\],=:])
  | (?P<op>//|[*+-]|%(?!\?))          # in a symbolic size: s0*128, (s0*s1//32)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<comment>\#.*)
  | (?P<error>"|%\?[^\s,)]*|[-+]?\.?\d[A-Za-z0-9_.]*|[^ \t\r])    # a malformed number whole
)""", re.VERBOSE | re.ASCII)
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_HEX8 = re.compile(r"[0-9a-fA-F]{8}")


class Token(NamedTuple):
    kind: str  # value, hex, number, type, ident, punct, string, comment, error, eof
    text: str  # as written (strings with their quotes and escapes)
    line: int
    col: int

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of input"
        shown = self.text if len(self.text) <= 40 else self.text[:40] + "..."
        if self.kind == "string":
            return "string " + shown
        return ("identifier " if self.kind == "ident" else "") + repr(shown)


def tokens(text: str) -> Iterator[Token]:
    """The tokens of the text, a line at a time (no token spans lines); strings stay quoted.

    This is the parser's hot loop: one comprehension per line, Tokens made without NamedTuple's
    Python-level __new__; comments are dropped, error tokens left for the parser to report.
    """
    new = tuple.__new__
    lineno, line = 0, ""
    for lineno, line in enumerate(text.split("\n"), 1):
        toks = [new(Token, (m.lastgroup, t, lineno, m.end() - len(t) + 1))
                for m in _TOKEN.finditer(line.rstrip(" \t\r")) for t in (m.group(m.lastgroup),)]
        if "#" in line:
            toks = [t for t in toks if t.kind != "comment"]
        yield from toks
    yield Token("eof", "", max(lineno, 1), len(line) + 1)


def _bad_character(text: str) -> str:
    if text == '"':
        return "unterminated string (a string must close with \" on the same line)"
    if text.startswith("%?"):
        return f"{text} is a value from outside the graph; such a graph prints but cannot be parsed"
    if text[0] in "+-.0123456789" and len(text) > 1:
        return f"malformed number {text if len(text) <= 40 else text[:40] + '...'!r}"
    if text == "<":
        return ("'<' opens an opaque value, a PyFunc's fn (<function ...>) or an If's branch (<branch ...>); "
                "functions cannot be parsed, nor branches")
    return f"unexpected character {text!r}"


def _unescape(body: str, line: int, col: int) -> str:
    """The contents of a quoted string; `col` is the column of its first character."""
    if "\\" not in body:
        return body
    out, i = [], 0
    while i < len(body):
        j = body.find("\\", i)
        if j < 0:
            out.append(body[i:])
            break
        out.append(body[i:j])
        kind = body[j + 1]
        if kind in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[kind])
            i = j + 2
        elif kind == "u" and _HEX4.match(body, j + 2):
            code = int(body[j + 2:j + 6], 16)
            i = j + 6
            low = body[i + 2:i + 6] if body.startswith("\\u", i) and _HEX4.match(body, i + 2) else ""
            if 0xD800 <= code < 0xDC00 and low and 0xDC00 <= int(low, 16) < 0xE000:  # a JSON surrogate pair
                code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
                i += 6
            out.append(chr(code))
        elif kind == "U" and _HEX8.match(body, j + 2) and int(body[j + 2:j + 10], 16) <= 0x10FFFF:
            out.append(chr(int(body[j + 2:j + 10], 16)))
            i = j + 10
        else:
            raise ParseError(f"bad escape {body[j:j + 2]!r} in string (expected one of \\\" \\\\ \\/ \\b "
                             "\\f \\n \\r \\t \\uXXXX \\UXXXXXXXX)", line, col + j)
    return "".join(out)


def _tensor_type(shape: tuple[int, ...], dtype: DType, tok: Token) -> TensorType:
    """The type, unless a dim or its element count does not fit in int64 (sizes are int64 everywhere)."""
    count = 1
    for d in shape:
        if d > MAX_ELEMENTS:
            raise ParseError(f"dimension {d} is more than int64 holds ({MAX_ELEMENTS})", tok.line, tok.col)
        count *= d
    if count > MAX_ELEMENTS:
        raise ParseError(f"type {dtype.short}[{','.join(map(str, shape))}] has {count} elements, more than "
                         f"int64 counts ({MAX_ELEMENTS})", tok.line, tok.col)
    return TensorType(shape, dtype)


class Parser:
    def __init__(self, text: str):
        self.tokens = tokens(text)
        self.pending: list[Token] = []   # the token after the current one, once peeked
        self.tok = Token("start", "", 1, 1)
        self.advance()
        self.depth = 0
        self.types_seen: dict[str, TensorType] = {}
        self.symbols: dict[str, int] = {}   # the graph's named sizes and their hints: symbols(s0=8)

    # -- tokens ------------------------------------------------------------------------------------
    def advance(self) -> Token:
        tok, self.tok = self.tok, (self.pending.pop() if self.pending else next(self.tokens))
        if self.tok.kind == "error":
            raise ParseError(_bad_character(self.tok.text), self.tok.line, self.tok.col)
        return tok

    def error(self, expected: str, tok: Token | None = None) -> ParseError:
        tok = tok or self.tok
        return ParseError(f"expected {expected}, found {tok.describe()}", tok.line, tok.col)

    def at_word(self, text: str) -> bool:
        return self.tok.kind == "ident" and self.tok.text == text

    def expect(self, kind: str, what: str) -> Token:
        if self.tok.kind != kind:
            raise self.error(what)
        return self.advance()

    def punct(self, char: str) -> Token:
        if self.tok.text != char:  # no other token's text is a lone punctuation character
            raise self.error(repr(char))
        return self.advance()

    def accept(self, char: str) -> bool:
        if self.tok.text == char:
            self.advance()
            return True
        return False

    def string(self) -> str:
        """The decoded contents of the current token, a string."""
        tok = self.expect("string", "a quoted string")
        return _unescape(tok.text[1:-1], tok.line, tok.col + 1)

    def nest(self, tok: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError(f"nesting deeper than {MAX_DEPTH} levels", tok.line, tok.col)

    # -- graphs ------------------------------------------------------------------------------------
    def graph(self) -> Graph:
        if not self.at_word("graph"):
            raise self.error("'graph'")
        self.nest(self.advance())
        scope: dict[str, Value] = {}
        inputs = []
        if self.at_word("symbols"):
            self.sizes()
        self.punct("(")
        if self.tok.text != ")":
            while True:
                tok = self.expect("value", "an input value like %0")
                self.punct(":")
                type_ = self.type_()
                v = input_node(len(inputs), type_, self.loc()).out
                self.define(scope, tok, v)
                inputs.append(v)
                if not self.accept(","):
                    break
        self.punct(")")
        self.punct("{")
        nodes = []
        while not self.at_word("return"):
            nodes.append(self.statement(scope))
        self.advance()
        outputs = self.refs(scope) if self.tok.text != "}" else []
        self.punct("}")
        self.depth -= 1
        return Graph(inputs, nodes, outputs)

    def sizes(self) -> None:
        """symbols(s0=8, s1=16): the named sizes of the graph and their representative values."""
        self.advance()
        self.punct("(")
        while True:
            tok = self.expect("ident", "a size's name")
            self.punct("=")
            hint = self.number()
            if not isinstance(hint, int) or hint < 0:
                raise ParseError(f"size {tok.text} needs a non-negative integer value", tok.line, tok.col)
            self.symbols[tok.text] = hint
            if not self.accept(","):
                break
        self.punct(")")

    def dim(self, what: str):
        """One dimension: an integer, or a symbolic size written as the printer writes it (s0*128)."""
        tok = self.tok
        if tok.kind == "number" and self.peek_text() in (",", "]", ")"):
            value = self.number()
            if not isinstance(value, int) or value < 0:
                raise self.error(what, tok)
            return value
        parts, depth = [], 0
        while self.tok.kind in ("number", "ident", "op") or self.tok.text in ("(", ")"):
            if self.tok.text == "(":
                depth += 1
            elif self.tok.text == ")":
                if depth == 0:
                    break
                depth -= 1
            parts.append(self.advance().text)
        if not parts:
            raise self.error(what, tok)
        try:
            value = parse_dim("".join(parts), self.symbols)
        except SymbolicError as e:
            raise ParseError(str(e), tok.line, tok.col) from None
        if not isinstance(value, Dim) and (not isinstance(value, int) or value < 0):
            raise self.error(what, tok)
        return value

    def peek_text(self) -> str:
        """The text of the token after the current one."""
        if not self.pending:
            self.pending.append(next(self.tokens))
        return self.pending[0].text

    def statement(self, scope: dict[str, Value]) -> Node:
        results = []
        if self.tok.kind == "value":
            results.append(self.advance())
            while self.accept(","):
                results.append(self.expect("value", "a result value like %3"))
            self.punct("=")
        op_tok = self.tok
        if op_tok.kind not in ("ident", "string"):
            raise self.error("an op name" if results else "a statement like '%1 = Op(%0) : f32[]' or 'return'")
        op = self.advance().text if op_tok.kind == "ident" else self.string()
        self.punct("(")
        args = self.refs(scope) if self.tok.text != ")" else []
        self.punct(")")
        attrs = self.attrs() if self.tok.text == "{" else {}
        self.punct(":")
        types = self.types()
        if len(types) != len(results):
            raise ParseError(f"{op} names {len(results)} result(s) but gives {len(types)} type(s)",
                             op_tok.line, op_tok.col)
        name = self.loc()
        subgraph = self.graph() if self.at_word("graph") else None
        node = Node(op, args, attrs, types, name, subgraph)
        for tok, v in zip(results, node.outputs):
            self.define(scope, tok, v)
        return node

    @staticmethod
    def define(scope: dict[str, Value], tok: Token, v: Value) -> None:
        if tok.text in scope:
            raise ParseError(f"value {tok.text} is defined twice", tok.line, tok.col)
        scope[tok.text] = v

    def refs(self, scope: dict[str, Value]) -> list[Value]:
        out = []
        while True:
            tok = self.expect("value", "a value like %0")
            v = scope.get(tok.text)
            if v is None:
                raise ParseError(f"undefined value {tok.text} (values must be defined before they are used)",
                                 tok.line, tok.col)
            out.append(v)
            if not self.accept(","):
                return out

    def loc(self) -> str:
        if not self.at_word("loc"):
            return ""
        self.advance()
        self.punct("(")
        name = self.string()
        self.punct(")")
        return name

    # -- types -------------------------------------------------------------------------------------
    def types(self) -> list[TensorType]:
        if not self.accept("("):
            return [self.type_()]
        out = []
        if self.tok.text != ")":
            out.append(self.type_())
            while self.accept(","):
                out.append(self.type_())
        self.punct(")")
        return out

    def type_(self) -> TensorType:
        if self.tok.kind == "type":  # the printer's spelling, one token
            tok = self.advance()
            if tok.text not in self.types_seen:
                head, dims = tok.text[:-1].split("[")
                try:
                    shape = tuple(int(d) for d in dims.split(",") if d)
                except ValueError:  # more digits than Python converts
                    raise ParseError("dimension too long", tok.line, tok.col) from None
                self.types_seen[tok.text] = _tensor_type(shape, from_short(head), tok)
            return self.types_seen[tok.text]
        tok = self.tok
        dtype = self.dtype()
        return _tensor_type(self.dims(), dtype, tok)

    def dtype(self) -> DType:
        if not (self.tok.kind == "ident" and self.tok.text in SHORT_NAMES):
            raise self.error(f"a type like f32[4,4] (dtypes: {', '.join(SHORT_NAMES)})")
        return from_short(self.advance().text)

    def dims(self) -> tuple[int, ...]:
        self.punct("[")
        dims = []
        if self.tok.text != "]":
            while True:
                dims.append(self.dim("a non-negative integer dimension or a symbolic size"))
                if not self.accept(","):
                    break
        self.punct("]")
        return tuple(dims)

    # -- attributes --------------------------------------------------------------------------------
    def attrs(self) -> dict:
        self.punct("{")
        out: dict = {}
        if self.tok.text != "}":
            while True:
                tok = self.tok
                if tok.kind not in ("ident", "string"):
                    raise self.error("an attribute name")
                key = self.advance().text if tok.kind == "ident" else self.string()
                if key in out:
                    raise ParseError(f"attribute {key} given twice", tok.line, tok.col)
                self.punct("=")
                out[key] = self.attr()
                if not self.accept(","):
                    break
        self.punct("}")
        return out

    def number(self) -> int | float:
        tok = self.expect("number", "a number")
        text = tok.text
        if any(c in text for c in ".eEna"):  # a float: has a point, an exponent, inf or nan
            return float(text)
        try:
            return int(text)
        except ValueError:  # more digits than Python converts
            raise ParseError(f"integer {text[:20]}... is too long", tok.line, tok.col) from None

    def attr(self):
        tok = self.tok
        kind = tok.kind
        if kind == "number" and self.peek_text() not in ("//", "*", "%", "+", "-"):
            return self.number()
        if kind == "number" or (kind == "ident" and tok.text in self.symbols) or tok.text == "(":
            return self.dim("a symbolic size")
        if kind == "string":
            return self.string()
        if kind == "ident" and tok.text in ("true", "false", "none"):
            self.advance()
            return {"true": True, "false": False, "none": None}[tok.text]
        if kind == "ident" and tok.text in SHORT_NAMES:
            self.advance()
            if self.tok.text != "[":
                return from_short(tok.text)
            return self.literal(TensorType(self.dims(), from_short(tok.text)))
        if kind == "type":
            return self.literal(self.type_())
        if tok.text == "[":
            self.nest(self.advance())
            items = []
            if self.tok.text != "]":
                items.append(self.attr())
                while self.accept(","):
                    items.append(self.attr())
            self.punct("]")
            self.depth -= 1
            return tuple(items)
        raise self.error("an attribute value (number, string, true, false, none, dtype, [list] or literal)")

    def literal(self, type_: TensorType) -> Literal:
        dtype, shape, what = type_.dtype, type_.shape, str(type_)
        size = 1
        for d in shape:
            size *= d
        self.punct("(")
        items, nan_bits = [], {}
        if self.tok.text != ")":
            while True:
                if len(items) == size:
                    raise self.error(f"')': {what} has {size} element(s)")
                if dtype is DType.bool:
                    items.append(self.bool_element())
                elif dtype.is_int:
                    items.append(self.int_element(dtype))
                else:
                    items.append(self.float_element(dtype, nan_bits, len(items)))
                if not self.accept(","):
                    break
        if len(items) != size and self.tok.text == ")":
            raise ParseError(f"{what} needs {size} element(s), got {len(items)}", self.tok.line, self.tok.col)
        self.punct(")")
        with np.errstate(all="ignore"):
            arr = np.array(items, dtype=np.float64 if dtype.is_float else dtype.np).astype(dtype.np)
        if nan_bits:
            bits = arr.view(np.dtype(f"u{dtype.itemsize}"))
            for i, b in nan_bits.items():
                bits[i] = b
        return Literal(arr.reshape(shape))

    def bool_element(self) -> bool:
        if not (self.at_word("true") or self.at_word("false")):
            raise self.error("true or false")
        return self.advance().text == "true"

    def int_element(self, dtype: DType) -> int:
        tok = self.tok
        value = self.number() if tok.kind == "number" else None
        if not isinstance(value, int):
            raise self.error(f"an integer element of {dtype.short}", tok)
        low, high = dtype.bounds
        if not low <= value <= high:
            raise ParseError(f"{value} is out of range for {dtype.short} ({low}..{high})", tok.line, tok.col)
        return value

    def float_element(self, dtype: DType, nan_bits: dict, index: int) -> float:
        tok = self.tok
        if tok.kind != "number":
            raise self.error(f"a number element of {dtype.short}")
        value = float(self.number())
        if tok.text == "nan" and self.accept("("):
            bits_tok = self.expect("hex", "the NaN's bits in hex, like 0x7fc00001")
            bits = int(bits_tok.text, 16)
            if bits >> (8 * dtype.itemsize):
                raise ParseError(f"{bits_tok.text} does not fit in {dtype.short}", bits_tok.line, bits_tok.col)
            nan_bits[index] = bits
            self.punct(")")
        return value


def parse_graph(text: str) -> Graph:
    """The Graph the text describes (names kept).

    Raises ParseError, with line and column, for any text that is not a graph of this grammar: bad
    characters, tokens or escapes, text that is not UTF-8 (bytes), undefined or twice-defined values,
    result and type counts that differ, dims or element counts beyond int64, nesting deeper than
    MAX_DEPTH; TypeError if `text` is neither str nor bytes. A graph that parses is not yet checked:
    unknown ops, wrong types and bad attributes are `ir.verify`'s to find (VerifyError); run it on any
    graph read from text you did not write (tests/test_fuzz_ir.py holds mutated texts to both).
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ParseError(f"text is not UTF-8 ({e.reason})", 1, 1) from None
    if not isinstance(text, str):
        raise TypeError(f"parse_graph needs a str, got {type(text).__name__}")
    parser = Parser(text)
    graph = parser.graph()
    if parser.tok.kind != "eof":
        raise parser.error("end of input after the graph's closing '}'")
    return graph
