"""The IR text printer: exact format, attribute spelling, determinism, hostile names, composites."""
import math

import numpy as np
import pytest

from ir import DType, Graph, IRError, Literal, Node, make_node, print_graph
from ir.printer import format_attr, quote
from ir_graphs import F32, HOSTILE_NAMES, composite, hostile_graph, net_basic_fuse, tt


def test_exact_text_of_a_small_graph():
    x, g, b = Graph.with_inputs([tt(F32, 4, 4), tt(F32, 4), tt(F32, 4)], ["x"])
    two = make_node("Const", [], {"value": np.float32(2.0)})
    mul = make_node("Mul", [x, two.out], name="Default/Mul-op0")
    ln = make_node("LayerNorm", [mul.out, g, b], {"begin_norm_axis": 1, "begin_params_axis": 1})
    fused = composite("Fused_Neg_0", [mul.out], lambda f: [f.op("Neg", f.inputs[0])])
    graph = Graph([x, g, b], [two, mul, ln, fused], [mul.out, ln.outputs[2], fused.out])
    assert print_graph(graph) == (
        'graph(%0: f32[4,4] loc("x"), %1: f32[4], %2: f32[4]) {\n'
        "  %3 = Const() {value=f32[](2.0)} : f32[]\n"
        '  %4 = Mul(%0, %3) : f32[4,4] loc("Default/Mul-op0")\n'
        "  %5, %6, %7 = LayerNorm(%4, %1, %2) {begin_norm_axis=1, begin_params_axis=1, epsilon=1e-07}"
        " : (f32[4,4], f32[4,1], f32[4,1])\n"
        '  %8 = Composite(%4) : f32[4,4] loc("Fused_Neg_0")\n'
        "    graph(%0: f32[4,4]) {\n"
        "      %1 = Neg(%0) : f32[4,4]\n"
        "      return %1\n"
        "    }\n"
        "  return %4, %7, %8\n"
        "}\n")


@pytest.mark.parametrize("value, text", [
    (0, "0"), (-7, "-7"), (10**30, str(10**30)), (1.5, "1.5"), (1e-7, "1e-07"), (2.0, "2.0"),
    (float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf"), (-0.0, "-0.0"),
    (True, "true"), (False, "false"), (None, "none"), ("NCHW", '"NCHW"'), ('a"b\\c\n', '"a\\"b\\\\c\\n"'),
    (DType.float16, "f16"), (DType.bool, "bool"), ((), "[]"), ((1, -2), "[1, -2]"),
    (((1, 2), (True, "x")), '[[1, 2], [true, "x"]]'),
    (Literal(np.array([[1, 2], [3, 4]], np.float32)), "f32[2,2](1.0, 2.0, 3.0, 4.0)"),
    (Literal(np.array([True, False])), "bool[2](true, false)"),
    (Literal(np.array(-5, np.int64)), "i64[](-5)"),
    (Literal(np.zeros((0, 2), np.float64)), "f64[0,2]()"),
    (Literal(np.array([0.1, np.nan, -np.inf], np.float16)), "f16[3](0.1, nan, -inf)"),
])
def test_attribute_spelling(value, text):
    assert format_attr(value) == text


def test_float_attrs_read_back_by_python():
    for v in (0.1, 1 / 3, 5e-324, 1.7976931348623157e308, -2.5e-10):
        assert float(format_attr(v)) == v


def test_non_canonical_nan_keeps_its_bits():
    bits = np.array([0xFFC00000, 0x7FC00001], np.uint32)  # x86's 0/0, and a payload
    assert format_attr(Literal(bits.view(np.float32))) == "f32[2](nan(0xffc00000), nan(0x7fc00001))"


def test_shortest_decimals_that_round_trip():
    assert format_attr(Literal(np.array([0.1, 16777216], np.float32))) == "f32[2](0.1, 1.6777216e+07)"
    assert format_attr(Literal(np.array([65504], np.float16))) == "f16[1](6.55e+04)"


def test_unprintable_attribute_is_an_ir_error():
    node = Node("Foo", (), {"thing": object()}, (tt(F32),))
    with pytest.raises(IRError, match="cannot print attribute value"):
        print_graph(Graph([], [node], node.outputs))
    with pytest.raises(IRError, match="dtype"):
        format_attr(Literal(np.array([1], np.complex64)))


def test_deterministic_and_independent_of_identity():
    text = print_graph(net_basic_fuse())
    assert text == print_graph(net_basic_fuse()) == print_graph(net_basic_fuse())
    # independence of PYTHONHASHSEED: tests/test_ir_dot.py runs the printer and the .dot writer in subprocesses


def test_attrs_sorted_whatever_the_construction_order():
    a = Node("Foo", (), {"b": 1, "a": 2}, (tt(F32),))
    b = Node("Foo", (), [("a", 2), ("b", 1)], (tt(F32),))
    assert print_graph(Graph([], [a], a.outputs)) == print_graph(Graph([], [b], b.outputs))


def test_hostile_names_never_break_the_line_structure():
    graph = hostile_graph()
    text = print_graph(graph)
    lines = text.split("\n")
    # header, one line per node, the composite's 4 lines, return, closing brace, final newline
    assert len(lines) == 1 + len(HOSTILE_NAMES) + 1 + 4 + 2 + 1
    assert text.splitlines() == lines[:-1]  # no other line break (\u2028, \x85, \r) survives
    assert all(line.isprintable() for line in lines)
    n = len(HOSTILE_NAMES)
    assert lines[-2] == "}" and lines[-3] == f"  return %{n + 2}, %{n + 1}"
    text.encode("utf-8")  # lone surrogates are escaped


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_quote_is_one_printable_line(name):
    q = quote(name)
    assert q.startswith('"') and q.endswith('"') and q.isprintable()
    assert '"' not in q[1:-1].replace('\\\\', "").replace('\\"', "")


def test_names_print_as_loc_and_empty_names_not_at_all():
    text = print_graph(net_basic_fuse())
    assert 'loc("Default/Mul-op0")' in text
    assert "%1 = Const() {value=f32[](2.0)} : f32[]\n" in text


def test_op_names_and_keys_that_are_not_identifiers_are_quoted():
    node = Node("return", (), {"weird key": 1, "nan": 2.5, "ok_key": math.pi}, (tt(F32), tt(F32)))
    text = print_graph(Graph([], [node], node.outputs[:1]))
    assert '%0, %1 = "return"() {"nan"=2.5, ok_key=3.141592653589793, "weird key"=1} : (f32[], f32[])' in text


def test_zero_result_node_and_foreign_value():
    x, = Graph.with_inputs([tt(F32, 2)])
    other, = Graph.with_inputs([tt(F32, 2)])
    sink = Node("Sink", [x], (), ())
    neg = make_node("Neg", [other])
    text = print_graph(Graph([x], [sink, neg], [neg.out]))
    assert "  Sink(%0) : ()\n" in text
    assert "%1 = Neg(%?Input#0) : f32[2]" in text
