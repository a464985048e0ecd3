"""The IR text parser: print/parse round trips (every op, composites, literals, hostile names, random DAGs),
hand-written text, and malformed text giving ParseError at the right line and column."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ir import DType, Graph, ParseError, VerifyError, parse_graph, print_graph, verify
from ir_graphs import NO_TEXT_FORM, all_names, literal_graph, op_graph, random_graphs, registered_ops, seed_graphs

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_round_trip(graph: Graph) -> Graph:
    text = print_graph(graph)
    back = parse_graph(text)
    assert back == graph
    assert all_names(back) == all_names(graph)
    assert print_graph(back) == text
    return back


@pytest.mark.parametrize("op", registered_ops())
def test_round_trip_of_every_registered_op(op):
    graph = op_graph(op)
    assert graph is not None, f"no sample inputs for op {op}; add one to tests/ir_graphs.py SAMPLES"
    verify(graph)
    if op in NO_TEXT_FORM:
        with pytest.raises(ParseError, match="functions cannot be parsed"):
            parse_graph(print_graph(graph))
        return
    verify(assert_round_trip(graph))


@pytest.mark.parametrize("key", sorted(seed_graphs()))
def test_round_trip_of_seed_graphs(key):
    assert_round_trip(seed_graphs()[key])


def test_literals_round_trip_bit_exactly():
    back = assert_round_trip(literal_graph())
    for a, b in zip(literal_graph().nodes, back.nodes):
        x, y = a.attr("value").array, b.attr("value").array
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def test_every_float16_and_many_float32_bit_patterns_round_trip():
    from ir.printer import format_literal
    from ir.graph import Literal
    from ir.parser import Parser
    rng = np.random.default_rng(0)
    for arr in (np.arange(1 << 16, dtype=np.uint16).view(np.float16),
                rng.integers(0, 1 << 32, 5_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                rng.integers(0, 1 << 63, 2_000, dtype=np.uint64).view(np.float64)):
        text = format_literal(Literal(arr))
        back = Parser(text).attr()
        assert back.array.tobytes() == arr.tobytes()


@SETTINGS
@given(random_graphs())
def test_random_dags_round_trip_and_print_deterministically(graph):
    text = print_graph(graph)
    assert print_graph(graph) == text
    verify(graph)
    back = assert_round_trip(graph)
    verify(back)


def test_hand_written_text_with_comments_spacing_and_own_value_names():
    text = """
    # a comment line
    graph( %x : f32[ 2 , 3 ] loc("x"), %b: f32[3] ) {   # trailing comment
      %s = Add(%x, %b) : f32[2,3]
      %y , %mean,%var = LayerNorm( %s , %b, %b ) { epsilon = 1e-5, begin_norm_axis = 1,
                                                   begin_params_axis = -1 } : ( f32[2,3], f32[2,1], f32[2,1] )
      %c = Const() {value = f32 [2] (1, -2.5e0)} : f32[2]
      %n = "Neg"(%c) : f32[2] loc("\\ud83d\\ude00 \\u00e9\\/")
      return %y,%n
    }
    """
    graph = parse_graph(text)
    assert [n.op for n in graph.nodes] == ["Add", "LayerNorm", "Const", "Neg"]
    assert graph.nodes[1].attr("begin_params_axis") == -1  # as written: the parser does not canonicalize
    assert graph.nodes[2].attr("value").array.tolist() == [1.0, -2.5]
    assert graph.nodes[3].name == "😀 é/"
    assert graph.inputs[0].node.name == "x" and graph.outputs[0] is graph.nodes[1].outputs[0]


def test_graphs_that_verify_rejects_still_parse():
    text = ("graph(%0: f32[4]) {\n  %1 = Neg(%0) : i32[7]\n  %2, %3 = NoSuchOp(%1, %0) {k=[1, [2]]} : (f32[], bool[])\n"
            "  return %3\n}\n")
    graph = parse_graph(text)
    assert print_graph(graph) == text
    with pytest.raises(VerifyError):
        verify(graph)


def test_attribute_values_read_back_typed():
    graph = parse_graph('graph() { %0 = X() {a=1, b=1.0, c=true, d=none, e=f16, f="s", g=[], h=[1, [2.5]], '
                        'i=-inf, j=nan, k=bool[](false)} : f32[]\n return %0 }')
    attrs = graph.nodes[0].attr_dict
    assert type(attrs["a"]) is int and type(attrs["b"]) is float and attrs["c"] is True and attrs["d"] is None
    assert attrs["e"] is DType.float16 and attrs["f"] == "s" and attrs["g"] == () and attrs["h"] == (1, (2.5,))
    assert attrs["i"] == float("-inf") and np.isnan(attrs["j"]) and attrs["k"].array.dtype == np.bool_


def test_a_graph_of_100000_nodes_parses_without_recursion():
    n = 100_000
    text = "\n".join(["graph(%0: f32[2,3]) {"] + [f"  %{i + 1} = Neg(%{i}) : f32[2,3]" for i in range(n)]
                     + [f"  return %{n}", "}"])
    graph = parse_graph(text)
    assert len(graph.nodes) == n and graph.outputs[0] is graph.nodes[-1].out
    assert graph.nodes[-1].inputs[0] is graph.nodes[-2].out


GRAPH_4 = "graph(%0: f32[4]) {\n"
ERRORS = [
    ("", 1, 1, "expected 'graph', found end of input"),
    ("graph(%0 f32[4]) {}", 1, 10, "expected ':', found 'f32[4]'"),
    ("graph(%0: f33[4]) {}", 1, 11, "expected a type like f32[4,4]"),
    ("graph(%0: f32[4, -1]) {}", 1, 18, "non-negative integer dimension"),
    ("graph(%0: f32[4]) {\n}", 2, 1, "or 'return', found '}'"),
    (GRAPH_4 + "  return %1\n}", 2, 10, "undefined value %1"),
    (GRAPH_4 + "  %1 = Neg(%2) : f32[4]\n  %2 = Neg(%0) : f32[4]\n  return %2\n}", 2, 12, "undefined value %2"),
    (GRAPH_4 + "  %1 = Neg(%0) : f32[4]\n  %1 = Neg(%0) : f32[4]\n  return %1\n}", 3, 3, "%1 is defined twice"),
    (GRAPH_4 + "  %1, %2 = Neg(%0) : f32[4]\n  return %1\n}", 2, 12, "names 2 result(s) but gives 1 type(s)"),
    (GRAPH_4 + '  %1 = Neg(%0) : f32[4] loc("abc\n  return %1\n}', 2, 29, "unterminated string"),
    (GRAPH_4 + '  %1 = Neg(%0) : f32[4] loc("ab\\qc")\n  return %1\n}', 2, 32, "bad escape '\\\\q'"),
    (GRAPH_4 + "  %1 = Neg(%0) : f32[4] loc(name)\n  return %1\n}", 2, 29,
     "expected a quoted string, found identifier 'name'"),
    (GRAPH_4 + "  %1 = Neg(%0 : f32[4]\n  return %1\n}", 2, 15, "expected ')', found ':'"),
    (GRAPH_4 + "  %1 = (%0) : f32[4]\n  return %1\n}", 2, 8, "expected an op name, found '('"),
    (GRAPH_4 + "  %1 = C() {v=f32[2](1.0)} : f32[2]\n  return %1\n}", 2, 25, "f32[2] needs 2 element(s), got 1"),
    (GRAPH_4 + "  %1 = C() {v=f32[1](1.0, 2.0)} : f32[1]\n  return %1\n}", 2, 27, "f32[1] has 1 element(s)"),
    (GRAPH_4 + "  %1 = C() {v=i32[1](3000000000)} : f32[1]\n  return %1\n}", 2, 22, "out of range for i32"),
    (GRAPH_4 + "  %1 = C() {v=bool[1](1)} : f32[1]\n  return %1\n}", 2, 23, "expected true or false"),
    (GRAPH_4 + "  %1 = C() {v=f16[1](nan(0x7fc00000))} : f32[1]\n  return %1\n}", 2, 26,
     "0x7fc00000 does not fit in f16"),
    (GRAPH_4 + "  %1 = C() {v=1, v=2} : f32[]\n  return %1\n}", 2, 18, "attribute v given twice"),
    (GRAPH_4 + "  %1 = C() {v=} : f32[]\n  return %1\n}", 2, 15,
     "expected an attribute value (number, string, true, false, none, dtype, [list] or literal), found '}'"),
    (GRAPH_4 + "  %1 = C() {v=[1, 2} : f32[]\n  return %1\n}", 2, 20, "expected ']', found '}'"),
    (GRAPH_4 + "  %1 = Neg(%0) : f32[4]\n  return %1\n} extra", 4, 3, "expected end of input"),
    (GRAPH_4 + "  %1 = Neg(%0) @ f32[4]\n  return %1\n}", 2, 16, "unexpected character '@'"),
    (GRAPH_4 + "  %1 = Neg(%?Mul#0) : f32[4]\n  return %1\n}", 2, 12, "%?Mul#0 is a value from outside the graph"),
    (GRAPH_4 + "  %1 = Neg(%0) : f32[4]\n    graph(%0: f32[4]) {\n      return %9\n    }\n  return %1\n}",
     4, 14, "undefined value %9"),
    (GRAPH_4 + "  %1 = Neg(%0) : f32[4]\n    graph(%0: f32[4]) {\n      return %0\n    }\n  return %1\n",
     7, 1, "expected '}', found end of input"),
]


@pytest.mark.parametrize("text, line, col, message", ERRORS, ids=[e[3][:30] for e in ERRORS])
def test_malformed_text_reports_line_and_column(text, line, col, message):
    with pytest.raises(ParseError) as info:
        parse_graph(text)
    assert message in str(info.value)
    assert (info.value.line, info.value.col) == (line, col), str(info.value)
    assert str(info.value).startswith(f"line {line}, column {col}: ")


@pytest.mark.parametrize("text, message", [
    ("graph() { %0 = C() {v=" + "[" * 10_000, "nesting deeper than"),
    ("graph() { %0 = C() {v=" + "1" * 5000 + "} : f32[]\n return %0 }", "too long"),
    ("graph(%0: f32[" + "9" * 5000 + "]) { return %0 }", "too long"),
    ("graph() { %0 = X() : f32[] " + "graph() { %1 = X() : f32[] " * 100, "nesting deeper than"),
    (b"graph() {\xff return }", "not UTF-8"),
])
def test_pathological_text_is_a_parse_error(text, message):
    with pytest.raises(ParseError, match=message):
        parse_graph(text)


@SETTINGS
@given(st.sampled_from(sorted(seed_graphs())), st.data())
def test_mutated_text_parses_or_raises_parse_error(key, data):
    text = print_graph(seed_graphs()[key])
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 8)))
        text = text[:i] + data.draw(st.sampled_from(["", "%", '"', "\\", "(", "]", "{", ",", "\n", "7", "-", "x"]))\
            + text[j:]
    try:
        parse_graph(text)
    except ParseError as e:
        assert e.line >= 1 and e.col >= 1
