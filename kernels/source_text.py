"""The gate between model-controlled text and generated kernel source.

A model (ONNX or a hand-built IR graph) controls node names, op names, attribute values and doc
strings; none of it may become code. Codegen puts text that did not come from our own templates into
a kernel only through these functions:

    identifier(text)   a name in code (the kernel's function name and the op names in it): a plain
                       ASCII identifier, not a keyword, at most IDENTIFIER_LIMIT characters, else
                       UnsafeSourceError
    doc_text(text)     words in a docstring or comment (the kernel key): printable ASCII without
                       quotes or backslashes, every other character shown as `?`, cut at DOC_LIMIT
    numbers            come from kernels.emitters.const_literal (int() and float repr only)

and every rendered module passes `check_source` before it is compiled or written: parsed with `ast`,
it may hold only the shape of module codegen writes (docstrings, the fixed imports, functions of
loops and arithmetic calling an allowed list of functions) and no string but docstrings doc_text
would keep as they are. A rule broken anywhere in codegen is then an UnsafeSourceError (the kernel
falls back to the numpy reference with a KernelBuildWarning), never code of the model's choosing.
"""
from __future__ import annotations

import ast
import functools
import keyword
import re

from ir.errors import GraphKernelError
from kernels.emitters import HELPERS, kernel_functions

IDENTIFIER_LIMIT = 200
DOC_LIMIT = 20_000

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOC_UNSAFE = re.compile(r"[^\x20-\x7e]|[\"\\]")   # outside printable ASCII, or a quote or backslash
# what a kernel module may be made of (ast node types, the functions it may call, its imports)
_ALLOWED_NODES = (ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Import, ast.ImportFrom, ast.alias,
                  ast.Assign, ast.AugAssign, ast.For, ast.While, ast.If, ast.Expr, ast.Constant, ast.Name,
                  ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.Call, ast.BinOp, ast.UnaryOp,
                  ast.BoolOp, ast.Compare, ast.IfExp, ast.operator, ast.unaryop, ast.cmpop, ast.boolop,
                  ast.expr_context)
_CALLABLE = {"range", "min", "max", "abs", "len"}
_PROCEDURES = {"lanes_sum", "lanes_max", "lanes_min", "lanes_fill"}   # calls that may stand as statements
_IMPORTS = {("math", None), ("numpy", "np")}


class UnsafeSourceError(GraphKernelError, ValueError):
    """Text that may not go into generated source (an unsafe name or a stray literal)."""


def identifier(text: str) -> str:
    """`text` when it is a plain ASCII identifier that is no keyword; UnsafeSourceError otherwise."""
    if (not isinstance(text, str) or len(text) > IDENTIFIER_LIMIT or not _IDENTIFIER.fullmatch(text)
            or keyword.iskeyword(text) or keyword.issoftkeyword(text)):
        shown = repr(text)[:80]
        raise UnsafeSourceError(f"{shown} is not a plain identifier; it cannot name anything in a kernel")
    return text


def doc_text(text: str, limit: int = DOC_LIMIT) -> str:
    """`text` as safe docstring or comment words: one line of printable ASCII, no quote, no backslash
    (each other character shown as `?`), at most `limit` characters (then `...`)."""
    text = str(text)
    shown = text[:limit] + ("..." if len(text) > limit else "")
    return _DOC_UNSAFE.sub("?", shown)


def check_source(source: str) -> str:
    """`source` when it is a kernel module of the shape codegen writes, else UnsafeSourceError
    (checked once per distinct source: a kernel is rendered again at every lowering)."""
    _check_module(source)
    return source


@functools.lru_cache(maxsize=1024)
def _check_module(source: str) -> None:
    """UnsafeSourceError unless `source` is a kernel module of the shape codegen writes.

    The module is parsed (what Python will run, not a textual guess) and must hold: a docstring,
    the fixed imports, and function definitions; in them only assignments, loops and conditions
    over arithmetic, comparisons, subscripts and calls of the allowed functions (`range`,
    `min`, `max`, `abs`, `len`, the kernels.mathfn and kernels.lanes functions, `np.*` and `math.*`), and
    as statements only the lanes_* calls; no string but the docstrings, each line of which doc_text
    keeps as it is; no name with a double underscore."""
    if not source.isascii():
        raise UnsafeSourceError("generated kernel source holds non-ASCII text")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:
        raise UnsafeSourceError(f"generated kernel source does not parse: {e}") from None
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    docstrings = {id(body[0].value) for body in [tree.body] + [f.body for f in functions]
                  if body and _is_docstring(body[0])}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom)) and id(
                getattr(node, "value", None)) not in docstrings:
            _refuse(node, "a module-level statement")
    module_level = {id(f) for f in functions}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and id(node) not in module_level:
            _refuse(node, "a nested function")
        _check_node(node, docstrings)


def _is_docstring(stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
            and all(_DOC_UNSAFE.search(line) is None for line in stmt.value.value.split("\n")))


def _check_node(node, docstrings) -> None:
    if not isinstance(node, _ALLOWED_NODES):
        _refuse(node, f"a {type(node).__name__}")
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in docstrings:
        _refuse(node, "a string literal")
    if isinstance(node, ast.Expr) and id(node.value) not in docstrings and not _is_procedure_call(node.value):
        _refuse(node, "an expression statement")
    if isinstance(node, ast.Call) and _call_target(node.func) is None:
        _refuse(node, f"a call of {ast.unparse(node.func)[:80]}")
    if isinstance(node, ast.Attribute) and _call_target(node) is None:
        _refuse(node, f"the attribute {ast.unparse(node)[:80]}")
    if isinstance(node, ast.Import) and any((a.name, a.asname) not in _IMPORTS for a in node.names):
        _refuse(node, "an import")
    if isinstance(node, ast.ImportFrom) and not _allowed_from(node):
        _refuse(node, "an import")
    for name in (getattr(node, "id", None), getattr(node, "name", None), getattr(node, "arg", None)):
        if isinstance(name, str) and "__" in name:
            _refuse(node, f"the name {name[:80]}")


def _call_target(func) -> str | None:
    """The allowed function `func` names, or None."""
    if isinstance(func, ast.Name) and (func.id in _CALLABLE or func.id in _helper_names()):
        return func.id
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id in ("np", "math") and not func.attr.startswith("_")):
        return f"{func.value.id}.{func.attr}"
    return None


def _is_procedure_call(value) -> bool:
    """A call whose result is nothing, made for its effect: kernels.lanes accumulating a row."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _PROCEDURES


def _allowed_from(node) -> bool:
    names = {a.name for a in node.names}
    if any(a.asname for a in node.names) or node.level:
        return False
    return node.module in HELPERS and names <= set(HELPERS[node.module])


@functools.cache
def _helper_names() -> frozenset:
    return frozenset(kernel_functions())


def _refuse(node, what: str) -> None:
    raise UnsafeSourceError(f"generated kernel source holds {doc_text(what)} at line "
                            f"{getattr(node, 'lineno', '?')}; refusing to compile it")
