"""Fuzzing the IR text form: mutated printed graphs either fail to parse with ParseError, or parse into a
graph that prints and parses back equal; such a graph either fails `verify` with VerifyError, or runs
in the reference interpreter on random inputs (failing only with a deliberate GraphKernelError, such as a
Gather index out of range): whatever the parser accepts and the verifier passes is a graph we can run.

    printed seed graphs --mutate--> characters (flip, insert, delete, truncate), lines (drop, repeat,
                                    swap), tokens (numbers, value names, op names, dtypes, attrs),
                                    long runs of a token or character (the lexer stays linear)
    parse_graph -> print_graph round trip -> verify -> interpret

A short bounded run by default (CI); GRAPHKERNEL_FUZZ_EXAMPLES=20000 runs that many examples per test.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ir import parse_graph, print_graph, verify
from ir.errors import ExecutionError, GraphKernelError, ParseError, VerifyError
from ir.graph import Graph
from ir.interpret import interpret
from ir.ops.collective import set_communicator
from ir_graphs import NO_TEXT_FORM, NOT_RUN_ALONE, op_graph, random_graphs, registered_ops, seed_graphs
from fuzz_helpers import EXAMPLE_SECONDS, bounded, deliberate, fuzz_settings

RUN_ELEMENTS = 1 << 16   # graphs with a larger value are parsed and verified, not run


def _seed_texts() -> dict[str, str]:
    graphs = dict(seed_graphs())
    for op in registered_ops():
        graph = op_graph(op)
        if graph is not None and op not in NO_TEXT_FORM:
            graphs[f"op {op}"] = graph
    return {key: print_graph(g) for key, g in graphs.items()}


SEEDS = _seed_texts()
TOKEN = re.compile(r'%[A-Za-z0-9_.]+|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[A-Za-z_]\w*|"(?:[^"\\\n]|\\.)*"|\S')
CHARS = list('%(){}[],=:"#\\.-+0123456789 \nabcdefxyzEe_<>') + ["é", "\x00", "\t", "\u2028", "😀"]
NUMBERS = ["0", "1", "-1", "2", "3", "7", "-0.0", "1e400", "nan", "inf", "-inf", "0x10", "1.5",
           "99999999999999999999999", "2147483648", "65536"]
WORDS = registered_ops() + ["Composite", "Input", "PyFunc", "Unknown", "f16", "f32", "f64", "i32", "i64",
                            "bool", "true", "false", "none", "graph", "return", "loc", "axis", "keep_dims",
                            "shape", "perm", "value", "dtype", "begin", "end", "strides", "sizes"]


def mutate_chars(draw, text: str) -> str:
    at = draw(st.integers(0, max(len(text) - 1, 0)))
    action = draw(st.sampled_from(["replace", "insert", "delete", "truncate"]))
    if action == "replace":
        return text[:at] + draw(st.sampled_from(CHARS)) + text[at + 1:]
    if action == "insert":
        return text[:at] + draw(st.text(st.sampled_from(CHARS), min_size=1, max_size=4)) + text[at:]
    if action == "delete":
        return text[:at] + text[at + draw(st.integers(1, 8)):]
    return text[:at]


def mutate_lines(draw, text: str) -> str:
    lines = text.split("\n")
    i, j = (draw(st.integers(0, len(lines) - 1)) for _ in range(2))
    action = draw(st.sampled_from(["drop", "repeat", "swap", "move"]))
    if action == "drop":
        del lines[i]
    elif action == "repeat":
        lines.insert(i, lines[i])
    elif action == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines.insert(j, lines.pop(i))
    return "\n".join(lines)


DTYPES = ["f16", "f32", "f64", "i32", "i64", "bool"]
SMALL = ["0", "1", "2", "3", "4", "-1", "-2"]


def mutate_tokens(draw, text: str) -> str:
    """One token replaced by a plausible other: a number by a number, a value by another value of the
    text, an op by another op, a dtype by another dtype, anything by another token of the text."""
    found = [(m.span(), m.group()) for m in TOKEN.finditer(text)]
    if not found:
        return text
    kinds = {"value": [f for f in found if f[1].startswith("%")],
             "number": [f for f in found if f[1][0].isdigit() or f[1][0] in "-+"],
             "word": [f for f in found if f[1][0].isalpha() or f[1][0] == "_"],
             "any": found}
    kind = draw(st.sampled_from([k for k in ("value", "number", "number", "word", "any") if kinds[k]]))
    (start, end), token = draw(st.sampled_from(kinds[kind]))
    if kind == "value":
        new = draw(st.sampled_from(sorted({t for _, t in kinds["value"]}) + ["%99"]))
    elif kind == "number":
        new = draw(st.sampled_from(SMALL * 3 + NUMBERS))
    elif token in DTYPES:
        new = draw(st.sampled_from(DTYPES))
    elif kind == "word" and token in WORDS:
        new = draw(st.sampled_from(WORDS))
    else:
        new = draw(st.sampled_from([t for _, t in found] + NUMBERS + WORDS))
    return text[:start] + new + text[end:]


def mutate_repeat(draw, text: str) -> str:
    """A token or character repeated up to thousands of times: long lines must still lex in linear time."""
    spans = [m.span() for m in TOKEN.finditer(text)]
    if not spans:
        return text
    start, end = draw(st.sampled_from(spans))
    unit = text[start:end] if draw(st.booleans()) else text[start]
    return text[:start] + unit * draw(st.integers(2, 3000)) + text[start:]


MUTATIONS = [mutate_chars, mutate_lines, mutate_repeat] + [mutate_tokens] * 6


@st.composite
def mutated_texts(draw):
    """A printed seed graph (a fixed one or a random DAG) with 1-3 mutations."""
    if draw(st.integers(0, 3)) == 0:
        key, text = "random DAG", print_graph(draw(random_graphs(max_nodes=6)))
    else:
        key = draw(st.sampled_from(sorted(SEEDS)))
        text = SEEDS[key]
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        text = draw(st.sampled_from(MUTATIONS))(draw, text)
    return key, text


def _random_inputs(graph: Graph) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for v in graph.inputs:
        if v.dtype.is_float:
            out.append(rng.standard_normal(v.shape).astype(v.dtype.np))
        elif v.dtype.is_int:
            out.append(rng.integers(0, 3, v.shape).astype(v.dtype.np))
        else:
            out.append(rng.random(v.shape) < 0.5)
    return out


def _small(graph: Graph) -> bool:
    types = [v.type for v in graph.inputs] + [t for n in graph.nodes for t in n.types]
    types += [t for n in graph.nodes if n.subgraph is not None for m in n.subgraph.nodes for t in m.types]
    return all(t.size <= RUN_ELEMENTS for t in types)


def parse_verify_run(text: str) -> None:
    """Parse, round trip, verify, run: each step may fail only as the module docstring says."""
    try:
        graph = parse_graph(text)
    except ParseError:
        return
    printed = print_graph(graph)  # an accepted graph prints, and reads back equal
    assert parse_graph(printed) == graph, f"the text round trips to a different graph:\n{printed}"
    try:
        verify(graph)
    except VerifyError:
        return
    if _small(graph):
        try:
            interpret(graph, _random_inputs(graph))
        except GraphKernelError as e:
            if not deliberate(e):
                raise


def check(key: str, text: str) -> None:
    with bounded(EXAMPLE_SECONDS, f"mutated {key} text"):
        parse_verify_run(text)


@fuzz_settings(400)
@given(mutated_texts())
def test_mutated_ir_text_parses_verifies_and_runs_or_raises_our_errors(case):
    check(*case)


@pytest.mark.parametrize("key", sorted(SEEDS))
def test_seed_texts_parse_verify_and_run(key):
    graph = parse_graph(SEEDS[key])
    verify(graph)
    if key.removeprefix("op ") in NOT_RUN_ALONE:   # a token no AllReduceStart gave: our error, naming it
        set_communicator(None)                      # a fresh group of one: no start of another test in flight
        with pytest.raises(ExecutionError, match="names no AllReduceStart still in flight"):
            interpret(graph, _random_inputs(graph))
    else:
        interpret(graph, _random_inputs(graph))


def _text(*body: str, inputs: str = "%0: f32[2,3]") -> str:
    return f"graph({inputs}) {{\n" + "\n".join("  " + line for line in body) + "\n  return %1\n}\n"


# Text the parser accepts (it checks syntax and scoping only) and verify must refuse, naming node and op.
MALFORMED = {
    "result shape": (_text("%1 = Neg(%0) : f32[3,2]"), "node 0 Neg: result types"),
    "result dtype": (_text("%1 = Neg(%0) : f16[2,3]"), "node 0 Neg: result types"),
    "result count": (_text("%1, %2 = Neg(%0) : (f32[2,3], f32[2,3])"), "node 0 Neg: result types"),
    "unknown op": (_text("%1 = Nope(%0) : f32[2,3]"), "node 0 Nope: unknown op"),
    "alias": (_text("%1 = TensorAdd(%0, %0) : f32[2,3]"), "the IR spells it Add"),
    "axis out of range": (_text("%1 = ReduceSum(%0) {axis=[5]} : f32[2]"), "axis 5 out of range"),
    "unknown attribute": (_text("%1 = Neg(%0) {bogus=1} : f32[2,3]"), "unknown attribute(s) bogus"),
    "arity": (_text("%1 = Add(%0) : f32[2,3]"), "takes 2 tensor input(s)"),
    "Input among nodes": (_text("%1 = Input() {index=0} : f32[2,3]"), "Input nodes belong in graph.inputs"),
    "literal unlike its type": (_text("%1 = Const() {value=f32[2](1.0, 2.0)} : f32[3]", inputs=""),
                                "node 0 Const: result types"),
    "max over nothing": (_text("%1 = ReduceMax(%0) {axis=[1]} : f32[2]", inputs="%0: f32[2,0]"),
                         "it is empty"),
    "composite input types": (_text("%1 = Composite(%0) : f32[2,3]", "  graph(%0: f32[3]) {",
                                    "    %1 = Neg(%0) : f32[3]", "    return %1", "  }"),
                              "differ from its subgraph's input types"),
    "composite without subgraph": (_text("%1 = Composite(%0) : f32[2,3]"), "needs a subgraph"),
    "subgraph on a primitive": (_text("%1 = Neg(%0) : f32[2,3]", "  graph(%0: f32[2]) {", "    return %0",
                                      "  }"), "only a Composite node may hold a subgraph"),
    "nested composite": (_text("%1 = Composite(%0) : f32[2,3]", "  graph(%0: f32[2,3]) {",
                               "    %1 = Composite(%0) : f32[2,3]", "      graph(%0: f32[2,3]) {",
                               "        return %0", "      }", "    return %1", "  }"),
                         "may not be nested"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_verify_refuses_what_the_parser_accepts(case):
    text, message = MALFORMED[case]
    graph = parse_graph(text)
    with pytest.raises(VerifyError, match=re.escape(message)):
        verify(graph)


# Lines that made the lexer's regex backtrack: digits before a letter took cubic time (2,000 digits:
# 90 s), trailing blanks quadratic. Now linear: 200,000 characters each lex in milliseconds.
ADVERSARIAL_LINES = {
    "digits then a letter": "1" * 200_000 + "x",
    "digits, a point, digits, a letter": "1" * 100_000 + "." + "1" * 100_000 + "x",
    "an exponent's digits then a letter": "1e" + "1" * 200_000 + "x",
    "trailing blanks": "graph" + " \t" * 100_000,
    "signed digits": "-1" * 100_000,
}


@pytest.mark.parametrize("case", sorted(ADVERSARIAL_LINES))
def test_long_adversarial_lines_fail_fast(case):
    with bounded(10, case):
        with pytest.raises(ParseError):
            parse_graph(ADVERSARIAL_LINES[case])


@pytest.mark.parametrize("perm", ["[2, -0.0, 1]", "[2, false, 1]", "[2.0, 0, 1]"])
def test_verify_tells_an_attr_from_an_equal_one_of_another_type(perm):
    """Found by fuzzing: verify remembers signatures found well-formed, and (2, -0.0, 1) == (2, 0, 1) in
    Python; once the int perm had passed, the float one passed too and the interpreter failed on it."""
    text = "graph(%0: f32[2,3,4]) {{\n  %1 = Transpose(%0) {{perm={}}} : f32[4,2,3]\n  return %1\n}}\n"
    verify(parse_graph(text.format("[2, 0, 1]")))
    with pytest.raises(VerifyError, match=r"node 0 Transpose: .*expected an int"):
        verify(parse_graph(text.format(perm)))
