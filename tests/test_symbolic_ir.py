"""Symbolic sizes in the IR (ir/symbolic.py): arithmetic, equality, text, binding, specialization, the
size relations a compile assumes, and every op row's inference over a symbolic dim."""
import re

import numpy as np

import pytest

from ir import DType, GraphBuilder, TensorType, parse_graph, print_graph, verify
from ir.errors import IRError, ParseError, ShapeError
from ir.graph import Graph
from ir.ops import OPS, make_node
from ir.symbolic import (Assumptions, Dim, SymbolicError, clamp, evaluate, evaluate_shape, parse_dim,
                         range_length, same_size)
from ir.specialize import bind, specialize, symbols_of
from tests.ir_graphs import op_graph

F32 = DType.float32


def dims():
    return Dim.symbol("s0", 4), Dim.symbol("s1", 32)


def test_arithmetic_stays_symbolic_and_simplifies():
    s0, s1 = dims()
    a = s0 * s1 * 128
    assert str(a) == "128*s0*s1" and int(a) == 4 * 32 * 128
    assert a // 128 == s0 * s1 and (a // 128) // s1 == s0
    assert str((s0 * s1) // 32) == "(s0*s1//32)"
    assert str((s0 * s1 * 4) // (s1 * 8)) == "(s0//2)"            # common factors cancel
    assert (s0 * 6) % 3 == 0 and (s0 * 6 + 1) % 3 == 1
    assert s0 - s0 == 0 and type(s0 - s0) is int                   # a constant is a plain int
    assert str(3 - s0) == "-s0+3" and 0 + s0 == s0 and sum([s0, s1]) == s0 + s1
    assert evaluate((32 * ((s0 * s1) // 32)) // s1 + s0 * 3, {"s0": 5, "s1": 16}) == \
        (32 * ((5 * 16) // 32)) // 16 + 15


def test_equality_is_structural_never_a_number():
    s0, _ = dims()
    assert s0 == Dim.symbol("s0", 9) and hash(s0) == hash(Dim.symbol("s0", 9))   # the hint takes no part
    assert s0 != 4 and not s0 == 1 and s0 != 1      # a dynamic size is not 1 when broadcasting
    assert s0 > 3 and s0 < 5 and int(s0) == 4      # ordering and int(): the hint (the passes decide on it)
    assert np.empty((s0, 3)).shape == (4, 3)


def test_text_round_trips_with_the_hints_first():
    s0, s1 = dims()
    b = GraphBuilder(TensorType((s0, s1, 8), F32), names=["x"])
    (x,) = b.inputs
    r = b.op("Reshape", x, shape=(-1, 8))
    m = b.mean(x, (1,))
    rng = b.op("SizeRange", start=0, limit=s0 * 2, delta=3, dtype=DType.int32)
    g = b.graph(r, m, rng)
    text = print_graph(g)
    assert text.startswith("graph symbols(s0=4, s1=32) (%0: f32[s0,s1,8]")
    assert "shape=[s0*s1, 8]" in text and "SizeValue() {dtype=f32, size=s1}" in text
    back = parse_graph(text)
    assert back == g and print_graph(back) == text
    verify(back)
    assert symbols_of(back) == {"s0": 4, "s1": 32}


def test_an_undeclared_size_in_text_is_a_parse_error():
    with pytest.raises(ParseError, match="s0.*symbols"):
        parse_graph("graph(%0: f32[s0,4]) {\n  return %0\n}\n")
    with pytest.raises(SymbolicError):
        parse_dim("s0 +", {"s0": 1})


@pytest.mark.parametrize("text", ["(", "(s0", "(s0 + 2", "((s0)", "-", "s0 * (", "s0 // -"])
def test_a_size_cut_short_is_a_symbolic_error(text):
    """A size whose text ends early (the mutated-text fuzz found an open parenthesis at the end: an
    IndexError) is a SymbolicError naming it."""
    with pytest.raises(SymbolicError, match=re.escape(repr(text))):
        parse_dim(text, {"s0": 4})


def test_bind_names_the_input_its_declared_and_given_shape():
    s0, s1 = dims()
    types = [TensorType((s0, 8), F32), TensorType((s0, s1), F32)]
    assert bind(types, [(3, 8), (3, 5)]) == {"s0": 3, "s1": 5}
    for shapes, message in [([(3, 7), (3, 5)], r"input 0 \(x\).*\[3, 7\].*\[s0, 8\].*dim 1 is 7, declared static 8"),
                            ([(3,), (3, 5)], "rank 1"),
                            ([(3, 8), (4, 5)], "size s0 is 3 in an earlier input"),
                            ([(0, 8), (0, 5)], "at least 1")]:
        with pytest.raises(ShapeError, match=message):
            bind(types, shapes, ["x", "y"])


def test_specialize_gives_the_graph_built_at_those_sizes():
    def build(n):
        b = GraphBuilder(TensorType((n, 6), F32))
        (x,) = b.inputs
        return b.graph(b.op("Reshape", b.mean(b.op("Exp", x), (0,)), shape=(2, 3)),
                       b.op("Reshape", x, shape=(n * 2, 3)))
    s0 = Dim.symbol("s0", 4)
    assert specialize(build(s0), {"s0": 7}) == build(7)
    assert specialize(build(s0), {"s0": 7}) != build(4)


def test_assumed_relations_are_recorded_and_checked():
    s0, s2 = Dim.symbol("s0", 4), Dim.symbol("s2", 4)
    assert not same_size(s0, s2)                    # outside a compile nothing can be assumed
    with Assumptions() as assumed:
        assert same_size(s0, s2, "broadcasting")
        assert not same_size(s0, Dim.symbol("s3", 5))
        assert clamp(s0, 0, 32, "a slice") == s0     # s0 <= 32, assumed
        assert clamp(40, 0, s0) == s0                # 40 >= s0: the bound
        assert range_length(2, s0 + 2, 1) == s0
    assumed.check({"s0": 6, "s2": 6})
    with pytest.raises(ShapeError, match=r"s0 == s2 \(broadcasting\), here 6 vs 7"):
        assumed.check({"s0": 6, "s2": 7})
    with pytest.raises(ShapeError, match="s0 <= 32"):
        assumed.check({"s0": 33, "s2": 33})


def test_broadcasting_and_reshape_counts_use_the_symbols():
    s0, s1 = dims()
    b = GraphBuilder(TensorType((s0, 1), F32), TensorType((1, s1), F32), TensorType((s0, s1), F32))
    x, y, z = b.inputs
    assert b.op("Add", x, y).shape == (s0, s1)
    assert b.op("Reshape", z, shape=(s1, -1)).shape == (s1, s0)
    with pytest.raises(ShapeError):
        b.op("Add", x, b.input((5, 1)))                   # s0 is not 5
    with pytest.raises(ShapeError):
        b.op("Reshape", z, shape=(s0, 3, -1))             # s0*s1 is not a multiple of 3 for every s1


def _symbolic_case(op):
    """The op's sample node and its input types with dim 0 symbolic (s0, hinted at its extent) in every
    input whose dim 0 is the extent of the first input's with one above 1; None when none has."""
    g = op_graph(op)
    if g is None or g.nodes[-1].op != op:
        return None
    node = g.nodes[-1]
    n = next((v.shape[0] for v in node.inputs if v.type.rank and v.shape[0] > 1), None)
    if n is None:
        return None
    s = Dim.symbol("s0", n)
    return node, [TensorType((s,) + w.shape[1:], w.dtype) if w.type.rank and w.shape[0] == n else w.type
                  for w in node.inputs]


SYMBOLIC_OPS = sorted(n for n, d in OPS.items() if d.arity != 0 and not d.name.startswith("If"))
NO_SYMBOLIC_SAMPLE = ("AllReduceWait", "Barrier", "Pad")   # samples without an input dim above 1


def test_the_ops_left_out_have_no_dim_to_make_symbolic():
    assert sorted(op for op in SYMBOLIC_OPS if _symbolic_case(op) is None) == sorted(NO_SYMBOLIC_SAMPLE)


@pytest.mark.parametrize("op", [op for op in SYMBOLIC_OPS if op not in NO_SYMBOLIC_SAMPLE])
def test_every_op_infers_over_a_symbolic_dim_or_refuses_clearly(op):
    """Inference with a symbolic dim either keeps the graph correct at other sizes (specialized at
    double the hint, every type re-inferred matches) or is an IRError naming the op: never a crash."""
    node, types = _symbolic_case(op)
    inputs = Graph.with_inputs(types)
    try:
        with Assumptions():
            made = make_node(op, inputs, node.attr_dict)
    except IRError:
        return
    g = Graph(inputs, [made], made.outputs)
    hint = next(int(t.shape[0]) for t in types if t.rank and isinstance(t.shape[0], Dim))
    try:
        verify(specialize(g, {"s0": 2 * hint}))
    except IRError as e:
        # a size the op's rule fixed: it must then be one whose result does not depend on the size
        pytest.fail(f"{op} fixed a symbolic size: {e}")
    assert evaluate_shape(made.types[0].shape, {"s0": hint}) == node.types[0].shape
