"""The .dot writer: valid for Graphviz, deterministic, clusters for composites, escaped labels."""
import os
import re
import shutil
import subprocess
import sys

import pytest
from hypothesis import given, settings

from ir import Graph, Node, make_node, parse_graph, print_graph, to_dot
from ir.dot import op_color
from requires import needs_dot
from ir_graphs import F32, HOSTILE_NAMES, net_basic_fuse, net_composite_fused, random_graphs, seed_graphs, tt

DOT = shutil.which("dot")


def render_svg(text: str) -> str:
    run = subprocess.run([DOT, "-Tsvg"], input=text.encode("utf-8"), capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    assert b"syntax error" not in run.stderr and b"Error" not in run.stderr, run.stderr
    return run.stdout.decode("utf-8")


@needs_dot
@pytest.mark.parametrize("key", sorted(seed_graphs()))
def test_graphviz_accepts_every_seed_graph(key):
    svg = render_svg(to_dot(seed_graphs()[key], title=f"6_validate {key}"))
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg


@needs_dot
def test_graphviz_accepts_hostile_names_as_separate_graphs():
    # one graph per name, so a name that broke the syntax would be pinned down
    for name in HOSTILE_NAMES:
        x, = Graph.with_inputs([tt(F32, 2)], [name])
        neg = make_node("Neg", [x], name=name)
        svg = render_svg(to_dot(Graph([x], [neg], [neg.out]), title=name))
        assert svg.count("<g id=\"node") == 3  # input, Neg, output: nothing leaked into extra nodes
        if name == "&amp; entity":  # shown as written, not as the entity it spells
            assert "&amp;amp; entity</text>" in svg


@needs_dot
def test_cluster_title_and_labels_reach_the_picture():
    svg = render_svg(to_dot(net_composite_fused()))
    assert "Fused_Mul_Add_Pow_0" in svg
    for text in ("Mul", "Add", "Pow", "f32[4,4]", "Default/Pow&#45;op2"):  # Graphviz writes - as &#45;
        assert f">{text}</text>" in svg


def test_composite_is_a_cluster_holding_its_primitives():
    text = to_dot(net_composite_fused(), title="hwopt_d_composite_opt_end_graph_0")
    cluster = re.search(r"subgraph cluster_0 \{\n(.*?)\n  \}", text, re.S).group(1)
    assert 'label="Fused_Mul_Add_Pow_0"' in cluster
    assert [op for op in re.findall(r'label="(\w+)\\n', cluster)] == ["Const", "Const", "Const", "Mul", "Add", "Pow"]
    edges = re.findall(r"^  (\w+) -> (\w+)", text, re.M)
    # the input goes straight into the Mul inside the cluster; the Pow inside feeds the output
    assert ("in0", "c0_n3") in edges and ("c0_n5", "out0") in edges
    assert len(edges) == 2 + 2 + 2 + 1  # Mul, Add, Pow read two values each; one graph output


def test_edges_between_composites_leave_from_the_producing_primitive():
    text = to_dot(seed_graphs()["two_composites"])
    edges = re.findall(r"^  (\w+) -> (\w+)(?: \[label=\"(\d)\"\])?;", text, re.M)
    # composite 0 (Add, Exp) returns (exp, add); composite 1 reads both; Neg reads the add
    assert ("c0_n1", "c1_n0", "") in edges and ("c0_n1", "c1_n1", "") in edges
    assert ("c0_n0", "c1_n2", "") in edges and ("c0_n0", "n2", "") in edges
    uses = sum(len(n.inputs) for top in seed_graphs()["two_composites"].nodes
               for n in (top.subgraph.nodes if top.subgraph else [top]))
    assert len(edges) == uses + 3


def test_one_edge_per_use_even_of_the_same_value():
    x, = Graph.with_inputs([tt(F32, 2)])
    sq = make_node("Mul", [x, x])
    text = to_dot(Graph([x], [sq], [sq.out, sq.out]))
    assert text.count("in0 -> n0;") == 2 and "n0 -> out0;" in text and "n0 -> out1;" in text


def test_labels_show_op_shape_dtype_and_scope_name():
    text = to_dot(net_basic_fuse())
    assert 'label="Mul\\nf32[4,4]\\nDefault/Mul-op0", tooltip="Default/Mul-op0"' in text
    assert 'label="Const\\nf32[]\\n2.0"' in text


def test_text_and_dot_byte_identical_across_calls_round_trips_and_processes():
    for graph in seed_graphs().values():
        text = to_dot(graph, title="t")
        assert to_dot(graph, title="t") == text
        assert to_dot(parse_graph(print_graph(graph)), title="t") == text
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys; sys.path[:0] = [{here!r}, {os.path.dirname(here)!r}]; from ir_graphs import seed_graphs; "
            "from ir import print_graph, to_dot; g = seed_graphs()['two_composites']; "
            "sys.stdout.write(print_graph(g) + to_dot(g))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("0", "12345")}
    graph = seed_graphs()["two_composites"]
    assert runs == {(print_graph(graph) + to_dot(graph)).encode("utf-8")}  # text and picture, whatever the seed


def test_colours_come_from_a_stable_hash_of_the_op_name():
    assert op_color("Mul") == op_color("Mul") != op_color("Add")
    assert re.fullmatch(r"#[0-9a-f]{6}", op_color("Mul"))
    assert op_color("Mul") == "#f7bfb2"  # pinned: the same in every run and on every machine


def test_names_are_escaped_and_kept_on_one_line():
    for name in HOSTILE_NAMES:
        x, = Graph.with_inputs([tt(F32, 2)], [name])
        neg = make_node("Neg", [x], name=name)
        text = to_dot(Graph([x], [neg], [neg.out]), title=name)
        lines = text.split("\n")
        assert len(lines) == 13 and all(line.isprintable() for line in lines)
        for line in lines:  # every quote inside a string is escaped: quotes outside strings pair up
            unescaped = re.sub(r'\\.', "", line)
            assert unescaped.count('"') % 2 == 0, line


def test_undefined_values_are_drawn_not_crashed_on():
    x, = Graph.with_inputs([tt(F32, 2)])
    other, = Graph.with_inputs([tt(F32, 2)])
    neg = make_node("Neg", [other])
    text = to_dot(Graph([x], [neg], [neg.out]))
    assert "undefined0" in text and "undefined0 -> n0;" in text


def test_empty_composite_still_drawn():
    x, = Graph.with_inputs([tt(F32, 2)])
    inner, = Graph.with_inputs([tt(F32, 2)])
    passthrough = Node("Composite", [x], (), [tt(F32, 2)], "Fused_Nothing_0", Graph([inner], [], [inner]))
    text = to_dot(Graph([x], [passthrough], passthrough.outputs))
    assert "subgraph cluster_0" in text and "in0 -> out0;" in text


@needs_dot
@settings(max_examples=15, deadline=None)
@given(random_graphs(max_nodes=6))
def test_graphviz_accepts_random_graphs(graph):
    render_svg(to_dot(graph, title="random"))


def test_edges_from_a_multi_result_node_say_which_result():
    from ir_graphs import layer_norm_graph
    text = to_dot(layer_norm_graph())
    assert 'n0 -> n1 [label="0"];' in text and 'n0 -> n1 [label="2"];' in text and 'n0 -> out1 [label="1"];' in text
