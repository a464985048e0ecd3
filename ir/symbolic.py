"""Symbolic sizes: a dimension known by name when a graph compiles and by value at each call.

    Dim(expr, hint)     an int whose value is the representative size (the hint) and which carries an
                        expression over named sizes (s0, batch, ...): `f32[s0,128]` in a TensorType
    s0 * 128, d // 2    arithmetic on Dims stays symbolic (polynomials, with floor divisions and
                        remainders that do not divide exactly kept as atoms: `(s0*s1//32)`)
    d == e              structural: equal expressions; a Dim never equals a plain int (a dynamic size
                        is not 1 when broadcasting, whatever its hint); ordering (<, >=) and int()
                        use the hint, which is how passes decide once for the range
    same_size(a, b)     where two sizes must agree (broadcasting, a contraction) and both are known
                        equal only at the hints, the agreement is assumed and recorded in the active
                        `Assumptions`; every new shape of a call checks the records
    evaluate(d, sizes)  the value at a call's sizes ({name: int}); ir/specialize.py binds a call's shapes
                        to the sizes and evaluates a whole graph at them

A Dim hashes by its expression, so every structural key (Graph.key, the kernel cache) is the same for
every value of the sizes: one compile serves them all.
"""
from __future__ import annotations

import contextvars
import math
import re
from dataclasses import dataclass, field

from ir.errors import IRError, ShapeError


class SymbolicError(IRError, ValueError):
    """A symbolic size that cannot be evaluated, parsed or bound."""


# --- expressions -----------------------------------------------------------------------------------
# An expression is a polynomial with int coefficients: a sorted tuple of (monomial, coefficient), a
# monomial a sorted tuple of atoms (repeated for powers), an atom a symbol name or (op, a, b), op "//"
# or "%", for a division that is not exact.

def _atom_key(atom) -> tuple:
    return (0, atom) if isinstance(atom, str) else (1, atom[0], atom[1].key, atom[2].key)


class Expr:
    __slots__ = ("terms", "key", "_hash", "_fn")

    def __init__(self, terms: dict):
        self._fn = None     # evaluate(): the expression compiled to a Python function, made on first use
        items = sorted(((m, c) for m, c in terms.items() if c), key=lambda t: tuple(map(_atom_key, t[0])))
        self.terms = tuple(items)
        self.key = tuple((tuple(map(_atom_key, m)), c) for m, c in items)
        self._hash = hash(self.key)

    @staticmethod
    def symbol(name: str) -> Expr:
        return Expr({(name,): 1})

    @staticmethod
    def const(value: int) -> Expr:
        return Expr({(): int(value)})

    @staticmethod
    def of(x) -> Expr:
        return x.expr if isinstance(x, Dim) else Expr.const(x)

    def __eq__(self, other):
        return isinstance(other, Expr) and self.key == other.key

    def __hash__(self):
        return self._hash

    @property
    def is_const(self) -> bool:
        return all(not m for m, _ in self.terms)

    @property
    def constant(self) -> int:
        return sum(c for m, c in self.terms if not m)

    def add(self, other: Expr, sign: int = 1) -> Expr:
        out = dict(self.terms)
        for m, c in other.terms:
            out[m] = out.get(m, 0) + sign * c
        return Expr(out)

    def mul(self, other: Expr) -> Expr:
        out: dict = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2, key=_atom_key))
                out[m] = out.get(m, 0) + c1 * c2
        return Expr(out)

    def exact_div(self, other: Expr) -> Expr | None:
        """self / other when other is one monomial that divides every term exactly, else None."""
        if len(other.terms) != 1:
            return self.const(1) if self == other and self.terms else None
        (dm, dc), = other.terms
        if dc == 0:
            return None
        out = {}
        for m, c in self.terms:
            rest = list(m)
            for atom in dm:
                if atom not in rest:
                    return None
                rest.remove(atom)
            if c % dc:
                return None
            out[tuple(rest)] = c // dc
        return Expr(out)

    def floordiv(self, other: Expr) -> Expr:
        exact = self.exact_div(other)
        if exact is not None:
            return exact
        if other.is_const and self.is_const:
            return Expr.const(self.constant // other.constant)
        a, b = _cancel(self, other)
        return Expr({(("//", a, b),): 1})

    def mod(self, other: Expr) -> Expr:
        if self.exact_div(other) is not None:
            return Expr.const(0)
        if other.is_const and self.is_const:
            return Expr.const(self.constant % other.constant)
        if other.is_const and other.constant > 0:   # terms whose coefficient the modulus divides drop out
            rest = Expr({m: c for m, c in self.terms if c % other.constant})
            if rest != self:
                return rest.mod(other)
        return Expr({(("%", self, other),): 1})

    def symbols(self) -> set[str]:
        out = set()
        for m, _ in self.terms:
            for atom in m:
                if isinstance(atom, str):
                    out.add(atom)
                else:
                    out |= atom[1].symbols() | atom[2].symbols()
        return out

    def evaluate(self, sizes: dict) -> int:
        fn = self._fn
        if fn is None:
            fn = self._fn = _compiled(self)
        try:
            return fn(sizes)
        except KeyError as e:
            raise SymbolicError(f"size {e.args[0]} has no value (known: {', '.join(sorted(sizes)) or 'none'})") from None
        except ZeroDivisionError:
            raise SymbolicError(f"size {self} divides by zero at {_sizes_text(sizes)}") from None

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for m, c in sorted(self.terms, key=lambda t: (not t[0], tuple(map(_atom_key, t[0])))):
            atoms = [_atom_text(a) for a in m]
            if not atoms:
                text = str(abs(c))
            elif abs(c) == 1:
                text = "*".join(atoms)
            else:
                text = "*".join([str(abs(c))] + atoms)
            sign = "-" if c < 0 else "+"
            parts.append((sign, text))
        first_sign, first = parts[0]
        out = ("-" if first_sign == "-" else "") + first
        for sign, text in parts[1:]:
            out += sign + text
        return out

    __repr__ = __str__

    def __reduce__(self):
        return (_expr_from_terms, (self.terms,))


def _cancel(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """a and b divided by their common factor (the gcd of the coefficients and the atoms every term of
    both holds): sizes are positive, so (g*a)//(g*b) == a//b."""
    coeffs = [abs(c) for _, c in a.terms + b.terms]
    g = math.gcd(*coeffs) if coeffs else 1
    common = None
    for m, _ in a.terms + b.terms:
        if common is None:
            common = list(m)
        else:
            rest = list(m)
            common = [x for x in common if x in rest and not rest.remove(x)]
    factor = Expr({tuple(sorted(common or (), key=_atom_key)): g or 1})
    if factor == Expr.const(1):
        return a, b
    return a.exact_div(factor) or a, b.exact_div(factor) or b


def _expr_from_terms(terms) -> Expr:
    return Expr(dict(terms))


def _compiled(e: Expr):
    """`lambda z: <e>` with each symbol read from z: an evaluation is one Python call (plans evaluate
    many sizes at each new shape)."""
    source = _NAME.sub(lambda m: f"z[{m.group(0)!r}]", str(e))
    return eval(f"lambda z: {source}", {})  # noqa: S307 - the text of an Expr: ints, names, + - * // %


def _atom_value(atom, sizes: dict) -> int:
    if isinstance(atom, str):
        try:
            return sizes[atom]
        except KeyError:
            raise SymbolicError(f"size {atom} has no value (known: {', '.join(sorted(sizes)) or 'none'})") from None
    a, b = atom[1].evaluate(sizes), atom[2].evaluate(sizes)
    if b == 0:
        raise SymbolicError(f"size {_atom_text(atom)} divides by zero at {_sizes_text(sizes)}")
    return a // b if atom[0] == "//" else a % b


def _atom_text(atom) -> str:
    if isinstance(atom, str):
        return atom
    b = atom[2]
    single = len(b.terms) == 1 and (not b.terms[0][0] or (len(b.terms[0][0]) == 1 and b.terms[0][1] == 1))
    return f"({_paren(atom[1])}{atom[0]}{str(b) if single else '(' + str(b) + ')'})"


def _paren(e: Expr) -> str:
    text = str(e)
    return text if len(e.terms) <= 1 else f"({text})"


def _sizes_text(sizes: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sizes.items()))


# --- Dim: an int carrying an expression ----------------------------------------------------------------
class Dim(int):
    """A symbolic size. Its int value is the hint (the representative size); `expr` is what it is."""

    def __new__(cls, expr: Expr, hint: int, hints: dict | None = None):
        if expr.is_const:
            return int(expr.constant)
        self = int.__new__(cls, hint)
        self.expr = expr
        self.hints = hints if hints is not None else {}   # {symbol: its hint} of the symbols in expr
        return self

    @staticmethod
    def symbol(name: str, hint: int) -> Dim:
        if not _NAME.fullmatch(name):
            raise SymbolicError(f"a size's name must be an identifier, got {name!r}")
        return Dim(Expr.symbol(name), hint, {name: int(hint)})

    def _op(self, other, symbolic, plain, reverse=False):
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        a, b = (other, self) if reverse else (self, other)
        hints = self.hints if not isinstance(other, Dim) or other.hints is self.hints else {**self.hints, **other.hints}
        return Dim(symbolic(Expr.of(a), Expr.of(b)), plain(int(a), int(b)), hints)

    def __add__(self, o): return self._op(o, Expr.add, int.__add__)
    def __radd__(self, o): return self._op(o, Expr.add, int.__add__, True)
    def __sub__(self, o): return self._op(o, lambda a, b: a.add(b, -1), int.__sub__)
    def __rsub__(self, o): return self._op(o, lambda a, b: a.add(b, -1), int.__sub__, True)
    def __mul__(self, o): return self._op(o, Expr.mul, int.__mul__)
    def __rmul__(self, o): return self._op(o, Expr.mul, int.__mul__, True)
    def __floordiv__(self, o): return self._op(o, Expr.floordiv, _safe_floordiv)
    def __rfloordiv__(self, o): return self._op(o, Expr.floordiv, _safe_floordiv, True)
    def __mod__(self, o): return self._op(o, Expr.mod, _safe_mod)
    def __rmod__(self, o): return self._op(o, Expr.mod, _safe_mod, True)

    def __neg__(self):
        return Dim(Expr.const(0).add(self.expr, -1), -int(self), self.hints)

    def __pos__(self):
        return self

    def __eq__(self, other):
        if isinstance(other, Dim):
            return self.expr == other.expr
        if isinstance(other, int):
            return False       # a dynamic size is never a given number (not 1 when broadcasting)
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(self.expr)

    def __str__(self):
        return str(self.expr)

    def __repr__(self):
        return f"Dim({self.expr}={int(self)})"

    def __format__(self, spec):
        return str(self) if not spec else format(int(self), spec)

    def __reduce__(self):
        return (Dim, (self.expr, int(self), self.hints))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _safe_floordiv(a: int, b: int) -> int:
    return a // b if b else 0


def _safe_mod(a: int, b: int) -> int:
    return a % b if b else 0


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_symbolic(x) -> bool:
    return isinstance(x, Dim)


def evaluate(d, sizes: dict) -> int:
    """The value of a size (a Dim or an int) at `sizes`."""
    return d.expr.evaluate(sizes) if isinstance(d, Dim) else int(d)


def evaluate_shape(shape, sizes: dict) -> tuple[int, ...]:
    return tuple(d.expr.evaluate(sizes) if isinstance(d, Dim) else d for d in shape)


_SHAPE_FUNCTIONS: dict = {}


def shape_function(shape):
    """A function sizes -> the shape's extents (a tuple), compiled once per shape: what a plan evaluates
    many times (kernels/plan.py). A static shape gives a function returning it."""
    fn = _SHAPE_FUNCTIONS.get(shape)
    if fn is None:
        if not any(isinstance(d, Dim) for d in shape):
            static = tuple(shape)
            fn = lambda z: static  # noqa: E731
        else:
            items = "".join(f"{_NAME.sub(lambda m: f'z[{m.group(0)!r}]', str(d)) if isinstance(d, Dim) else int(d)}, "
                            for d in shape)
            fn = eval(f"lambda z: ({items})", {})  # noqa: S307 - Expr texts: ints, names, + - * // %
        if len(_SHAPE_FUNCTIONS) > 1 << 16:
            _SHAPE_FUNCTIONS.clear()
        _SHAPE_FUNCTIONS[shape] = fn
    return fn


def shape_text(shape) -> str:
    """`[s0, 128]`: a shape for messages, symbolic sizes by name."""
    return "[" + ", ".join(str(d) for d in shape) + "]"


# --- assumptions -------------------------------------------------------------------------------------
@dataclass
class Assumptions:
    """The size relations a compile relied on (same_size, clamp): checked at every new shape of a call."""
    equal: list = field(default_factory=list)       # (a, b, where): a == b
    order: list = field(default_factory=list)       # (a, b, where): a <= b
    _token: object = None

    def __enter__(self) -> Assumptions:
        if _active.get() is None:
            self._token = _active.set(self)
        return _active.get()

    def __exit__(self, *exc):
        if self._token is not None:
            _active.reset(self._token)
            self._token = None

    def check(self, sizes: dict) -> None:
        for relation, pairs in (("==", self.equal), ("<=", self.order)):
            for a, b, where in pairs:
                va, vb = evaluate(a, sizes), evaluate(b, sizes)
                if (va != vb) if relation == "==" else (va > vb):
                    raise ShapeError(f"the shapes of this call break a size relation the graph was compiled on: "
                                     f"{a} {relation} {b} ({where}), here {va} vs {vb} at {_sizes_text(sizes)}")


_active: contextvars.ContextVar = contextvars.ContextVar("graphkernel_assumptions", default=None)


def active_assumptions() -> Assumptions | None:
    return _active.get()


def same_size(a, b, where: str = "") -> bool:
    """Whether sizes `a` and `b` agree where they must (a broadcast, a contraction): equal expressions,
    or (both symbolic, inside a compile) equal hints, the equality then recorded as an assumption."""
    if a == b:
        return True
    if isinstance(a, Dim) and isinstance(b, Dim) and int(a) == int(b):
        record = _active.get()
        if record is not None:
            if not any(x.expr == a.expr and y.expr == b.expr for x, y, _ in record.equal):
                record.equal.append((a, b, where))
            return True
    return False


def assume_le(a, b, where: str = "") -> None:
    """Record that size `a` is at most `b` (a slice bound within its axis), for the call-time check."""
    if not (isinstance(a, Dim) or isinstance(b, Dim)):
        return
    if isinstance(a, int) and not isinstance(a, Dim) and a <= 1:   # every size is at least 1
        return
    record = _active.get()
    if record is not None and not any(Expr.of(x) == Expr.of(a) and Expr.of(y) == Expr.of(b)
                                      for x, y, _ in record.order):
        record.order.append((a, b, where))


def clamp(v, low, high, where: str = ""):
    """min(max(v, low), high) where any of them may be a symbolic size: decided at the hints (a tie keeps
    `v`, what the slice asked for), the decision recorded (assume_le) for the call-time check."""
    if not any(isinstance(x, Dim) for x in (v, low, high)):
        return min(max(v, low), high)
    if v == low or v == high:
        return v
    if int(v) < int(low):
        assume_le(v, low, where)
        return low
    if int(v) > int(high):
        assume_le(high, v, where)
        return high
    assume_le(low, v, where)
    assume_le(v, high, where)
    return v


def range_length(b, e, s: int):
    """len(range(b, e, s)) where b and e may be symbolic sizes (the hint decides that it is not
    negative, recorded for the call-time check)."""
    if not (isinstance(b, Dim) or isinstance(e, Dim)):
        return len(range(b, e, s))
    if s > 0:
        assume_le(b, e)
        return e - b if s == 1 else (e - b + s - 1) // s
    assume_le(e, b)
    return b - e if s == -1 else (b - e - s - 1) // (-s)


# --- text ------------------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>//|[-+*%()]))")


def parse_dim(text: str, hints: dict[str, int]):
    """A size written as printed (`s0*128`, `(s0*s1//32)`): an int, or a Dim over symbols whose hints
    `hints` gives."""
    toks = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise SymbolicError(f"cannot read the size {text!r} at {text[pos:]!r}")
        toks.append((m.lastgroup, m.group(m.lastgroup)))
        pos = m.end()
    k = [0]

    def peek():
        return toks[k[0]] if k[0] < len(toks) else (None, None)

    def take():   # (None, None) past the end: the callers' checks name the text
        tok = peek()
        k[0] += 1
        return tok

    def atom():
        kind, tok = take()
        if kind == "int":
            return int(tok)
        if kind == "name":
            if tok not in hints:
                raise SymbolicError(f"size {tok} in {text!r} has no representative value (declare it: "
                                    f"symbols({tok}=N))")
            return Dim.symbol(tok, hints[tok])
        if tok == "(":
            v = expr()
            if take()[1] != ")":
                raise SymbolicError(f"unbalanced parentheses in {text!r}")
            return v
        if tok == "-":
            return -atom()
        raise SymbolicError(f"cannot read the size {text!r}")

    def term():
        v = atom()
        while peek()[1] in ("*", "//", "%"):
            op = take()[1]
            rhs = atom()
            v = v * rhs if op == "*" else v // rhs if op == "//" else v % rhs
        return v

    def expr():
        v = term()
        while peek()[1] in ("+", "-"):
            op = take()[1]
            rhs = term()
            v = v + rhs if op == "+" else v - rhs
        return v

    value = expr()
    if k[0] != len(toks):
        raise SymbolicError(f"cannot read the size {text!r}")
    return value


SIZE_VALUE = "SizeValue"   # the op whose value is a size (ir/ops/shape.py)
SIZE_RANGE = "SizeRange"   # the op whose value is a range with a symbolic bound (ir/ops/shape.py)


def dims_in(value):
    """Every Dim inside an attribute value or a shape (nested tuples)."""
    if isinstance(value, Dim):
        yield value
    elif isinstance(value, tuple):
        for v in value:
            yield from dims_in(v)


def has_dims(value) -> bool:
    return next(dims_in(value), None) is not None
