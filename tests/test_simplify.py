"""Simplify passes: each rule on an IR-text graph, compared structurally with the expected graph, with its
negative cases (where it must not fire); values unchanged on the reference interpreter; random graphs keep
their values and verify."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ir import GraphBuilder
from ir.dtypes import DType
from ir.errors import ShapeError
from ir.graph import Graph
from ir.ops import OPS, OpDef, Pattern
from ir.parser import parse_graph
from ir.printer import print_graph
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.arith_simplify import arith_simplify
from graphkernel.passes.constant_fold import MAX_FOLDED_ELEMENTS, constant_fold
from graphkernel.passes.cse import cse
from graphkernel.passes.dce import dce
from pass_helpers import F32, F64, interpret, ops, random_inputs, tt, verify
from tolerance import assert_close

OPTS = CompileOptions()


def simplify(graph):
    """The simplify stage in the pipeline's order, each pass's output verified."""
    for fn in (constant_fold, arith_simplify, cse, dce):
        graph = verify(fn(graph, OPTS))
    return graph


def check(pass_fn, before: str, after: str | None, *, bitwise: bool = True):
    """Run `pass_fn` on `before`; it must give `after` (None: unchanged) and the same values."""
    graph = verify(parse_graph(before))
    result = verify(pass_fn(graph, OPTS))
    expected = graph if after is None else verify(parse_graph(after))
    assert result == expected, f"got\n{print_graph(result)}\nexpected\n{print_graph(expected)}"
    arrays = random_inputs(graph, positive=True)
    for got, want in zip(interpret(result, arrays), interpret(graph, arrays)):
        assert_close(got, want, bitwise=bitwise)
    return result


def unary_graph(body: str, dtype="f32", shape="4", out="%y") -> str:
    return f"graph(%x: {dtype}[{shape}]) {{\n{body}\n  return {out}\n}}"


IDENTITY = "graph(%x: f32[4]) {\n  return %x\n}"

# --- arith_simplify: identities --------------------------------------------------------------------

@pytest.mark.parametrize("expr", ["Mul(%x, %c)", "Mul(%c, %x)", "Add(%x, %z)", "Add(%z, %x)",
                                  "Sub(%x, %z)", "RealDiv(%x, %c)"])
def test_identities_drop_the_op(expr):
    before = unary_graph("  %c = Const() {value=f32[](1.0)} : f32[]\n"
                         "  %z = Const() {value=f32[](0.0)} : f32[]\n"
                         f"  %y = {expr} : f32[4]")
    check(arith_simplify, before, IDENTITY)


def test_identity_with_an_array_of_ones():
    check(arith_simplify, unary_graph("  %c = Const() {value=f32[4](1.0, 1.0, 1.0, 1.0)} : f32[4]\n"
                                      "  %y = Mul(%x, %c) : f32[4]"), IDENTITY)


@pytest.mark.parametrize("body", [
    # a broadcasting neutral constant changes the shape: the op stays
    "  %c = Const() {value=f32[2,4](1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)} : f32[2,4]\n"
    "  %y = Mul(%x, %c) : f32[2,4]",
    # 0 - x is not x; x * 2 and x + 1 are not neutral; 1 / x is not x
    "  %z = Const() {value=f32[](0.0)} : f32[]\n  %y = Sub(%z, %x) : f32[4]",
    "  %c = Const() {value=f32[](2.0)} : f32[]\n  %y = Mul(%x, %c) : f32[4]",
    "  %c = Const() {value=f32[](1.0)} : f32[]\n  %y = Add(%x, %c) : f32[4]",
    "  %c = Const() {value=f32[](1.0)} : f32[]\n  %y = RealDiv(%c, %x) : f32[4]",
    "  %c = Const() {value=f32[4](1.0, 1.0, 2.0, 1.0)} : f32[4]\n  %y = Mul(%x, %c) : f32[4]",
])
def test_identities_do_not_fire(body):
    check(arith_simplify, unary_graph(body, out="%y"), None)


def test_identity_keeps_a_broadcast_of_a_scalar_operand():
    before = ("graph(%x: f32[]) {\n  %c = Const() {value=f32[3](1.0, 1.0, 1.0)} : f32[3]\n"
              "  %y = Mul(%x, %c) : f32[3]\n  return %y\n}")
    check(arith_simplify, before, None)


# --- arith_simplify: division by a power of two -----------------------------------------------------

@pytest.mark.parametrize("dtype,c,r", [("f32", "4.0", "0.25"), ("f32", "-0.5", "-2.0"), ("f16", "8.0", "0.125"),
                                       ("f64", "1024.0", "0.0009765625")])
def test_divide_by_a_power_of_two_becomes_a_multiply(dtype, c, r):
    before = unary_graph(f"  %c = Const() {{value={dtype}[]({c})}} : {dtype}[]\n"
                         f"  %y = RealDiv(%x, %c) : {dtype}[4]", dtype)
    after = unary_graph(f"  %r = Const() {{value={dtype}[]({r})}} : {dtype}[]\n"
                        f"  %y = Mul(%x, %r) : {dtype}[4]", dtype)
    check(arith_simplify, before, after)


@pytest.mark.parametrize("dtype,c", [("f32", "3.0"), ("f32", "0.0"), ("f32", "inf"), ("f32", "7.1e-43"),
                                     ("f16", "6e-08"), ("f32", "nan")])
def test_divide_stays_where_the_reciprocal_is_not_exact(dtype, c):
    # 3: 1/3 rounds; 0 and inf: no finite reciprocal; tiny powers of two: the reciprocal overflows
    before = unary_graph(f"  %c = Const() {{value={dtype}[]({c})}} : {dtype}[]\n"
                         f"  %y = RealDiv(%x, %c) : {dtype}[4]", dtype)
    check(arith_simplify, before, None)


def test_divide_by_an_array_of_powers_of_two():
    before = unary_graph("  %c = Const() {value=f32[4](2.0, 4.0, 0.5, -1.0)} : f32[4]\n"
                         "  %y = RealDiv(%x, %c) : f32[4]")
    after = unary_graph("  %r = Const() {value=f32[4](0.5, 0.25, 2.0, -1.0)} : f32[4]\n"
                        "  %y = Mul(%x, %r) : f32[4]")
    check(arith_simplify, before, after)


# --- arith_simplify: pow, neg, cast -----------------------------------------------------------------

def _pow(p: str) -> str:
    return unary_graph(f"  %p = Const() {{value=f32[]({p})}} : f32[]\n  %y = Pow(%x, %p) : f32[4]")


def test_pow_by_one_two_and_a_half():
    check(arith_simplify, _pow("1.0"), IDENTITY)
    check(arith_simplify, _pow("2.0"), unary_graph("  %y = Mul(%x, %x) : f32[4]"), bitwise=False)
    check(arith_simplify, _pow("0.5"), unary_graph("  %y = Sqrt(%x) : f32[4]"), bitwise=False)


def test_pow_stays_for_other_exponents_and_broadcasts():
    check(arith_simplify, _pow("3.0"), None)
    check(arith_simplify, unary_graph("  %p = Const() {value=f32[4](2.0, 2.0, 1.0, 2.0)} : f32[4]\n"
                                      "  %y = Pow(%x, %p) : f32[4]"), None)
    check(arith_simplify, "graph(%x: f32[]) {\n  %p = Const() {value=f32[2](2.0, 2.0)} : f32[2]\n"
                          "  %y = Pow(%x, %p) : f32[2]\n  return %y\n}", None)


def test_neg_neg():
    check(arith_simplify, unary_graph("  %a = Neg(%x) : f32[4]\n  %y = Neg(%a) : f32[4]"), IDENTITY)
    check(arith_simplify, unary_graph("  %a = Neg(%x) : f32[4]\n  %y = Abs(%a) : f32[4]"), None)


def test_cast_to_the_same_dtype():
    check(arith_simplify, unary_graph("  %y = Cast(%x) {dtype=f32} : f32[4]"), IDENTITY)
    check(arith_simplify, unary_graph("  %y = Cast(%x) {dtype=f64} : f64[4]"), None)


@pytest.mark.parametrize("src,mid,dst", [("f16", "f32", "f64"), ("f16", "f64", "f32"), ("i32", "f64", "f32"),
                                         ("i32", "i64", "f16"), ("bool", "i32", "f32")])
def test_cast_chains_through_a_lossless_dtype(src, mid, dst):
    before = unary_graph(f"  %a = Cast(%x) {{dtype={mid}}} : {mid}[4]\n  %y = Cast(%a) {{dtype={dst}}} : {dst}[4]",
                         src)
    check(arith_simplify, before, unary_graph(f"  %y = Cast(%x) {{dtype={dst}}} : {dst}[4]", src))


@pytest.mark.parametrize("src,mid,dst", [("i4", "f32", "i8"), ("u2", "i4", "f32"), ("bool", "u2", "f16"),
                                         ("u4", "i8", "i2"), ("i2", "bf16", "u4"), ("f4e2m1", "f16", "i4"),
                                         ("u2", "f4e2m1", "f32")])
def test_cast_chains_through_a_lossless_dtype_from_a_subbyte_one(src, mid, dst):
    before = unary_graph(f"  %a = Cast(%x) {{dtype={mid}}} : {mid}[4]\n  %y = Cast(%a) {{dtype={dst}}} : {dst}[4]",
                         src)
    check(arith_simplify, before, unary_graph(f"  %y = Cast(%x) {{dtype={dst}}} : {dst}[4]", src))


@pytest.mark.parametrize("src", [DType.int4, DType.uint4, DType.int2, DType.uint2, DType.float4_e2m1fn, DType.bool],
                         ids=str)
def test_the_lossless_table_of_the_storage_dtypes_holds_every_value(src):
    """Through each dtype LOSSLESS names for a sub-byte or float4 source (or bool), every value of it casts
    to every dtype as it does directly: the cast_chain rule changes no value."""
    from graphkernel.passes.arith_simplify import LOSSLESS
    mids = sorted(LOSSLESS[src], key=str)
    assert DType.float32 in mids and (DType.float4_e2m1fn in mids) == (src in (DType.bool, DType.int2, DType.uint2))
    if src == DType.float4_e2m1fn:
        x = np.arange(16, dtype=np.uint8).view(src.np)
    else:
        low, high = src.bounds if src.is_int else (0, 1)
        x = np.arange(low, high + 1).astype(src.np)
    for mid in mids:
        for dst in DType:
            b = GraphBuilder(tt(src, *x.shape))
            graph = b.graph(b.op("Cast", b.op("Cast", b.inputs[0], dtype=mid), dtype=dst),
                            b.op("Cast", b.inputs[0], dtype=dst))
            through, direct = interpret(graph, [x])
            assert_close(through, direct, bitwise=True, err_msg=f"{src} -> {mid} -> {dst}")


def test_cast_round_trip_through_a_wider_dtype_is_the_identity():
    before = unary_graph("  %a = Cast(%x) {dtype=f64} : f64[4]\n  %y = Cast(%a) {dtype=f32} : f32[4]")
    check(arith_simplify, before, IDENTITY)


@pytest.mark.parametrize("src,mid,dst", [("f32", "f16", "f32"), ("f32", "i32", "f32"), ("i64", "f64", "i64"),
                                         ("i32", "f32", "i32"), ("f64", "f32", "f64")])
def test_cast_chains_stay_through_a_lossy_dtype(src, mid, dst):
    before = unary_graph(f"  %a = Cast(%x) {{dtype={mid}}} : {mid}[4]\n  %y = Cast(%a) {{dtype={dst}}} : {dst}[4]",
                         src)
    graph = parse_graph(before)
    arrays = [np.array([0.1, 1e6, -2.7, 70000.5]).astype(graph.inputs[0].dtype.np)]
    result = check(arith_simplify, before, None)
    assert_close(interpret(result, arrays)[0], interpret(graph, arrays)[0], bitwise=True)


# --- arith_simplify: reshapes and keepdims reductions -------------------------------------------------

def test_reshape_noop_and_chain():
    check(arith_simplify, unary_graph("  %y = Reshape(%x) {shape=[4]} : f32[4]"), IDENTITY)
    check(arith_simplify, unary_graph("  %a = Reshape(%x) {shape=[2,2]} : f32[2,2]\n"
                                      "  %y = Reshape(%a) {shape=[1,4]} : f32[1,4]"),
          unary_graph("  %y = Reshape(%x) {shape=[1,4]} : f32[1,4]"))
    check(arith_simplify, unary_graph("  %a = Reshape(%x) {shape=[2,2]} : f32[2,2]\n"
                                      "  %y = Reshape(%a) {shape=[4]} : f32[4]"), IDENTITY)


REDUCE_BEFORE = """graph(%x: f32[4,8]) {
  %r = ReduceSum(%x) {axis=[1], keep_dims=false} : f32[4]
  %y = Exp(%r) : f32[4]
  return %y
}"""


def test_reductions_keep_dims_then_reshape_sinks_below_elementwise_ops():
    after = """graph(%x: f32[4,8]) {
      %r = ReduceSum(%x) {axis=[1], keep_dims=true} : f32[4,1]
      %e = Exp(%r) : f32[4,1]
      %y = Reshape(%e) {shape=[4]} : f32[4]
      return %y
    }"""
    check(arith_simplify, REDUCE_BEFORE, after)


def test_a_lone_reduction_becomes_keepdims_plus_a_reshape():
    before = "graph(%x: f32[4,8]) {\n  %r = ReduceMax(%x) {axis=[0, 1], keep_dims=false} : f32[]\n  return %r\n}"
    after = ("graph(%x: f32[4,8]) {\n  %r = ReduceMax(%x) {axis=[0, 1], keep_dims=true} : f32[1,1]\n"
             "  %y = Reshape(%r) {shape=[]} : f32[]\n  return %y\n}")
    check(arith_simplify, before, after)
    check(arith_simplify, after, None)


def test_reduce_times_a_scalar_moves_next_to_the_reduction():
    before = """graph(%x: f32[4,8]) {
      %r = ReduceSum(%x) {axis=[1], keep_dims=false} : f32[4]
      %c = Const() {value=f32[](0.3)} : f32[]
      %m = Mul(%r, %c) : f32[4]
      %y = Mul(%m, %m) : f32[4]
      return %y
    }"""
    after = """graph(%x: f32[4,8]) {
      %r = ReduceSum(%x) {axis=[1], keep_dims=true} : f32[4,1]
      %c = Const() {value=f32[](0.3)} : f32[]
      %m = Mul(%r, %c) : f32[4,1]
      %s = Mul(%m, %m) : f32[4,1]
      %y = Reshape(%s) {shape=[4]} : f32[4]
      return %y
    }"""
    check(arith_simplify, before, after)


def test_two_reductions_meet_before_the_reshape():
    before = """graph(%x: f32[4,8]) {
      %a = ReduceSum(%x) {axis=[1], keep_dims=false} : f32[4]
      %b = ReduceMax(%x) {axis=[1], keep_dims=false} : f32[4]
      %y = Add(%a, %b) : f32[4]
      return %y
    }"""
    after = """graph(%x: f32[4,8]) {
      %a = ReduceSum(%x) {axis=[1], keep_dims=true} : f32[4,1]
      %b = ReduceMax(%x) {axis=[1], keep_dims=true} : f32[4,1]
      %s = Add(%a, %b) : f32[4,1]
      %y = Reshape(%s) {shape=[4]} : f32[4]
      return %y
    }"""
    check(arith_simplify, before, after)


def test_reshapes_from_different_shapes_do_not_sink():
    before = """graph(%x: f32[4,1], %z: f32[1,4]) {
      %a = Reshape(%x) {shape=[4]} : f32[4]
      %b = Reshape(%z) {shape=[4]} : f32[4]
      %y = Add(%a, %b) : f32[4]
      return %y
    }"""
    check(arith_simplify, before, None)


@pytest.mark.parametrize("body", [
    # the reshape moves non-unit dims
    "  %a = Reshape(%x) {shape=[2,2]} : f32[2,2]\n  %y = Exp(%a) : f32[2,2]",
    # the other operand is not a single element
    "  %a = Reshape(%x) {shape=[4,1]} : f32[4,1]\n  %b = Reshape(%x) {shape=[1,4]} : f32[1,4]\n"
    "  %y = Add(%a, %b) : f32[4,4]",
    # the op broadcasts the reshaped operand to a larger shape
    "  %a = Reshape(%x) {shape=[4,1]} : f32[4,1]\n  %c = Const() {value=f32[1,3](1.0, 2.0, 3.0)} : f32[1,3]\n"
    "  %y = Mul(%a, %c) : f32[4,3]",
])
def test_reshape_does_not_sink(body):
    check(arith_simplify, unary_graph(body), None)


def test_a_scalar_of_higher_rank_does_not_sink_the_reshape():
    before = unary_graph("  %a = Reshape(%x) {shape=[4,1]} : f32[4,1]\n"
                         "  %c = Const() {value=f32[1,1,1](2.0)} : f32[1,1,1]\n"
                         "  %y = Mul(%a, %c) : f32[1,4,1]")
    check(arith_simplify, before, None)


def test_rules_chain_to_a_fixpoint():
    before = """graph(%x: f32[4]) {
      %c = Const() {value=f32[](2.0)} : f32[]
      %a = Neg(%x) : f32[4]
      %b = Neg(%a) : f32[4]
      %w = Cast(%b) {dtype=f64} : f64[4]
      %v = Cast(%w) {dtype=f32} : f32[4]
      %p = Pow(%v, %c) : f32[4]
      %o = Const() {value=f32[](1.0)} : f32[]
      %y = RealDiv(%p, %o) : f32[4]
      return %y
    }"""
    check(arith_simplify, before, unary_graph("  %y = Mul(%x, %x) : f32[4]"))


# --- constant_fold -----------------------------------------------------------------------------------

def test_constant_chains_fold():
    before = """graph(%x: f32[3]) {
      %a = Const() {value=f32[3](1.0, 2.0, 3.0)} : f32[3]
      %b = Const() {value=f32[](2.0)} : f32[]
      %m = Mul(%a, %b) : f32[3]
      %s = ReduceSum(%m) {axis=[0], keep_dims=true} : f32[1]
      %y = Add(%x, %s) : f32[3]
      return %y
    }"""
    after = """graph(%x: f32[3]) {
      %s = Const() {value=f32[1](12.0)} : f32[1]
      %y = Add(%x, %s) : f32[3]
      return %y
    }"""
    check(lambda g, o: dce(constant_fold(g, o), o), before, after)


def test_folding_a_multi_result_op():
    g = GraphBuilder(tt(F32, 2, 4))
    (x,) = g.inputs
    y, mean, var = g.ops("LayerNorm", g.const(np.arange(8.0).reshape(2, 4)), g.const(np.ones(4)),
                        g.const(np.zeros(4)))
    graph = g.graph(g.op("Add", x, y), mean, var)
    folded = verify(dce(constant_fold(graph, OPTS), OPTS))
    assert ops(folded) == ["Const", "Const", "Const", "Add"]
    arrays = random_inputs(graph)
    for got, want in zip(interpret(folded, arrays), interpret(graph, arrays)):
        assert_close(got, want, bitwise=True)


def test_no_fold_that_materializes_a_large_result():
    broadcast = """graph(%x: f32[64,64]) {
      %c = Const() {value=f32[](2.0)} : f32[]
      %b = BroadcastTo(%c) {shape=[64,64]} : f32[64,64]
      %y = Mul(%x, %b) : f32[64,64]
      return %y
    }"""
    check(constant_fold, broadcast, None)
    n = MAX_FOLDED_ELEMENTS + 1
    big = GraphBuilder(tt(F32, n))
    (x,) = big.inputs
    c = big.const(np.ones(n))
    graph = big.graph(big.op("Add", x, big.op("Exp", c)))
    assert constant_fold(graph, OPTS) == graph
    small = GraphBuilder(tt(F32, 1))
    s = small.op("ReduceSum", small.const(np.ones(n)), axis=0, keep_dims=True)
    assert ops(dce(constant_fold(small.graph(small.op("Add", small.inputs[0], s)), OPTS), OPTS)) == [
        "Const", "Add"]


def test_nodes_reading_a_non_constant_do_not_fold():
    check(constant_fold, unary_graph("  %c = Const() {value=f32[](2.0)} : f32[]\n  %y = Mul(%x, %c) : f32[4]"),
          None)


# --- cse -----------------------------------------------------------------------------------------------

def test_cse_merges_equal_nodes_and_equal_constants():
    before = """graph(%x: f32[4]) {
      %a = Exp(%x) : f32[4]
      %b = Exp(%x) : f32[4]
      %c = Const() {value=f32[](2.0)} : f32[]
      %d = Const() {value=f32[](2.0)} : f32[]
      %p = Mul(%a, %c) : f32[4]
      %q = Mul(%b, %d) : f32[4]
      %y = Add(%p, %q) : f32[4]
      return %y
    }"""
    after = """graph(%x: f32[4]) {
      %a = Exp(%x) : f32[4]
      %c = Const() {value=f32[](2.0)} : f32[]
      %p = Mul(%a, %c) : f32[4]
      %y = Add(%p, %p) : f32[4]
      return %y
    }"""
    check(cse, before, after)


@pytest.mark.parametrize("body", [
    "  %a = Exp(%x) : f32[4]\n  %b = Log(%x) : f32[4]",
    "  %a = Const() {value=f32[](0.0)} : f32[]\n  %b = Const() {value=f32[](-0.0)} : f32[]",
    "  %a = Const() {value=f32[](1.0)} : f32[]\n  %b = Const() {value=f64[](1.0)} : f64[]",
    "  %a = Cast(%x) {dtype=f16} : f16[4]\n  %b = Cast(%x) {dtype=f64} : f64[4]",
    "  %a = Sub(%x, %x) : f32[4]\n  %n = Neg(%x) : f32[4]\n  %b = Sub(%x, %n) : f32[4]",
])
def test_cse_keeps_different_nodes_apart(body):
    check(cse, unary_graph(body, out="%a, %b"), None)


def _composite(op: str) -> str:
    return (f'  %{op} = Composite(%x) : f32[4] loc("Fused_{op}_0")\n'
            f"    graph(%i: f32[4]) {{\n      %o = {op}(%i) : f32[4]\n      return %o\n    }}\n")


def test_cse_merges_composites_only_with_equal_subgraphs():
    same = unary_graph(_composite("Exp") + _composite("Exp").replace("%Exp =", "%Exp2 ="), out="%Exp, %Exp2")
    check(cse, same, unary_graph(_composite("Exp"), out="%Exp, %Exp"))
    check(cse, unary_graph(_composite("Exp") + _composite("Log"), out="%Exp, %Log"), None)


def test_cse_never_merges_host_ops(monkeypatch):
    monkeypatch.setitem(OPS, "HostEcho", OpDef("HostEcho", Pattern.HOST, 1, lambda t, a: (t[0],),
                                               lambda a, attrs: a[0].copy()))
    check(cse, unary_graph("  %a = HostEcho(%x) : f32[4]\n  %b = HostEcho(%x) : f32[4]", out="%a, %b"), None)


# --- dce -----------------------------------------------------------------------------------------------

def test_dce_drops_what_no_output_needs():
    before = unary_graph("  %a = Exp(%x) : f32[4]\n  %b = Log(%a) : f32[4]\n  %y = Neg(%x) : f32[4]")
    check(dce, before, unary_graph("  %y = Neg(%x) : f32[4]"))
    check(dce, unary_graph("  %y = Neg(%x) : f32[4]"), None)


def test_dce_cleans_composite_subgraphs():
    before = unary_graph('  %y = Composite(%x) : f32[4] loc("Fused_Exp_0")\n'
                         "    graph(%i: f32[4]) {\n      %d = Log(%i) : f32[4]\n      %o = Exp(%i) : f32[4]\n"
                         "      return %o\n    }")
    check(dce, before, unary_graph(_composite("Exp"), out="%Exp"))


# --- the whole stage on random graphs --------------------------------------------------------------------

CONSTANTS = (0.0, 1.0, 2.0, 0.5, 4.0, -1.0, 3.0, 0.25)
STEPS = ("binary", "with_const", "const_with", "pow", "neg", "cast_chain", "reduce", "unit_reshape",
         "const_const", "twice")


def build_random_graph(steps) -> Graph:
    g = GraphBuilder(tt(F32, 3, 4), tt(F32, 4))
    pool = list(g.inputs)
    for kind, i, j, c, flag in steps:
        v, w = pool[i % len(pool)], pool[j % len(pool)]
        binop = ("Add", "Sub", "Mul", "RealDiv", "Maximum")[j % 5]
        const = g.const(c)
        try:
            if kind == "binary":
                out = g.op(binop, v, w)
            elif kind == "with_const":
                out = g.op(binop, v, const)
            elif kind == "const_with":
                out = g.op(binop, const, v)
            elif kind == "pow":
                out = g.op("Pow", g.op("Abs", v), g.const((1.0, 2.0, 0.5, 3.0)[j % 4]))
            elif kind == "neg":
                out = g.op("Neg", g.op("Neg", v) if flag else v)
            elif kind == "cast_chain":
                out = g.op("Cast", g.op("Cast", v, dtype=F64 if flag else "float16"), dtype=F32)
            elif kind == "reduce" and v.type.rank:
                out = g.op("ReduceSum" if flag else "ReduceMax", v, axis=-1, keep_dims=bool(j % 2))
            elif kind == "unit_reshape":
                out = g.op("Reshape", v, shape=v.shape + (1,) if flag else (1,) + v.shape)
            elif kind == "const_const":
                out = g.op(binop, const, g.const(CONSTANTS[j % len(CONSTANTS)]))
            else:
                out = g.op("Add", g.op("Exp", v), g.op("Exp", v))
        except ShapeError:
            continue
        pool.append(out)
    return g.graph(pool[-1], pool[len(pool) // 2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(STEPS), st.integers(0, 50), st.integers(0, 50),
                          st.sampled_from(CONSTANTS), st.booleans()), min_size=1, max_size=10))
def test_simplify_keeps_values_and_verifies(steps):
    graph = verify(build_random_graph(steps))
    simplified = simplify(graph)
    arrays = random_inputs(graph, seed=len(steps))
    with np.errstate(all="ignore"):
        for got, want in zip(interpret(simplified, arrays), interpret(graph, arrays)):
            assert_close(got, want, rtol_scale=4)
    assert simplify(simplified) == simplified
