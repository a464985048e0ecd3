"""Mixed compute: PyFunc and host_scope ops on the host, device subgraphs between.

Results against numpy on both targets (CPU reference, Ascend numba) for host ops at the start, middle
and end, several host ops, a host op feeding two device subgraphs; the compile-time error without
mix_compile_mode; fusion stopping at host ops (kernel counts); copies in program.kernels and counted
by the profiler; PyFunc lies and exceptions; the text form of a PyFunc; the kernel_graph dot clusters.
"""
import numpy as np
import pytest

import graphkernel
from graphkernel import Profiler, Tensor, context
from graphkernel import dtype as mstype
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.passes.partition import MixedComputeError
from ir import ParseError, parse_graph, print_graph
from ir.errors import GraphKernelError, DTypeError
from ir.ops.host import HostFunctionError, device_regions
from tolerance import assert_close

SHAPE = (4, 8)
F32 = mstype.float32


def pyfunc(fn, n_in=1, n_out=1, shape=SHAPE, out_dtype=F32):
    return P.PyFunc(fn, [F32] * n_in, [shape] * n_in, [out_dtype] * n_out, [shape] * n_out)


def sort_rows(a):
    return np.sort(a, axis=-1)


def data(k=0, shape=SHAPE):
    return (np.random.default_rng(k).standard_normal(shape) * 0.5).astype(np.float32)


def mixed(target, fusion=True):
    context.set_context(device_target=target, enable_graph_kernel=fusion, mix_compile_mode=True)


TARGETS = pytest.mark.parametrize("target", ["CPU", "Ascend"])


class AtStart(Cell):
    def __init__(self):
        super().__init__()
        self.f = pyfunc(sort_rows)

    def construct(self, x):
        return P.ReduceSum()(P.Exp()(P.Mul()(self.f(x), 2.0)), axis=1)


class InMiddle(Cell):
    def __init__(self):
        super().__init__()
        self.f = pyfunc(sort_rows)

    def construct(self, x):
        y = self.f(P.Add()(P.Mul()(x, 3.0), 1.0))
        return P.Neg()(P.Exp()(y))


class AtEnd(Cell):
    def __init__(self):
        super().__init__()
        self.f = pyfunc(lambda a: np.cumsum(a, axis=0).astype(np.float32))

    def construct(self, x):
        return self.f(P.Tanh()(P.Sub()(x, 0.5)))


class Several(Cell):
    """device -> host -> device -> host (two outputs) -> device."""
    def __init__(self):
        super().__init__()
        self.f = pyfunc(sort_rows)
        self.g = pyfunc(lambda a, b: (a * b, a - b), n_in=2, n_out=2)

    def construct(self, x, y):
        a = self.f(P.Exp()(x))
        b = P.Mul()(a, y)
        c, d = self.g(b, x)
        return P.Add()(c, d), P.Sqrt()(P.Abs()(c))


class FeedsTwo(Cell):
    """One host op feeding two independent device subgraphs."""
    def __init__(self):
        super().__init__()
        self.f = pyfunc(sort_rows)

    def construct(self, x):
        h = self.f(P.Exp()(x))
        return P.Neg()(P.Mul()(h, 2.0)), P.ReduceMax()(P.Log()(h), axis=1)


def np_sort(a):
    return np.sort(a, axis=-1)


CASES = {
    "start": (AtStart, 1, lambda x: np.exp(np_sort(x) * np.float32(2)).sum(1)),
    "middle": (InMiddle, 1, lambda x: -np.exp(np_sort(x * np.float32(3) + np.float32(1)))),
    "end": (AtEnd, 1, lambda x: np.cumsum(np.tanh(x - np.float32(0.5)), axis=0).astype(np.float32)),
    "several": (Several, 2, lambda x, y: (lambda a: (lambda b: (b * x + (b - x), np.sqrt(np.abs(b * x)))
                                                    )(a * y))(np_sort(np.exp(x)))),
    "feeds_two": (FeedsTwo, 1, lambda x: (-(np_sort(np.exp(x)) * np.float32(2)),
                                          np.log(np_sort(np.exp(x))).max(1))),
}


@TARGETS
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("case", list(CASES))
def test_results_match_numpy(target, case, fusion):
    mixed(target, fusion)
    cls, n_in, reference = CASES[case]
    arrays = [data(k) for k in range(n_in)]
    got = cls()(*[Tensor(a) for a in arrays])
    want = reference(*arrays)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        assert_close(g.asnumpy(), np.asarray(w, np.float32))


class SeedScope(Cell):
    """TF Adapter's mixed compute example: pred = add(mul(X, 1.), 0.) without device compile;
    cost = reduce_sum(abs(pred - Y))."""
    def construct(self, x, y):
        with graphkernel.host_scope():
            pred = P.Add()(P.Mul()(x, 1.0), 0.0)
        return P.ReduceSum()(P.Abs()(P.Sub()(pred, y)))


@TARGETS
def test_host_scope_seed_example(target):
    mixed(target)
    x, y = data(1, (2,)), data(2, (2,))
    net = SeedScope()
    assert_close(net(Tensor(x), Tensor(y)).asnumpy(), np.abs(x * 1 + 0 - y).sum())
    compiled = net.compile(Tensor(x), Tensor(y))
    host = [n for n in compiled.graph.nodes if n.op == "HostCall"]
    # kept on the host as written: arith_simplify does not touch them (x*1, x+0 stay)
    assert [n.attr("host_op") for n in host] == ["Mul", "Add"]
    targets = [k.target for k in compiled.kernels]
    assert targets.count("host") == 2 and targets.count("copy") == 1
    device = [k for k in compiled.kernels if k.target == "device"]
    assert len(device) == 1 and set(device[0].op_types) == {"Sub", "Abs", "ReduceSum"}


def test_host_scope_outside_a_trace_changes_nothing():
    with graphkernel.host_scope():
        out = P.Add()(Tensor(np.ones(3, np.float32)), 1.0)
    assert_close(out.asnumpy(), np.full(3, 2, np.float32))


@pytest.mark.parametrize("net, names", [
    (InMiddle, [r"PyFunc \(Default/PyFunc-op2\)"]),
    (SeedScope, [r"Mul \(Default/Mul-op0\) in host_scope", r"1 more host op"]),
])
def test_without_mix_compile_mode_compiling_fails_naming_the_op(net, names):
    context.set_context(device_target="CPU")
    args = [Tensor(data(k)) for k in range(2 if net is SeedScope else 1)]
    with pytest.raises(MixedComputeError, match="mix_compile_mode=True") as info:
        net()(*args)
    for name in names:
        assert __import__("re").search(name, str(info.value)), str(info.value)
    assert isinstance(info.value, GraphKernelError)


def test_a_host_only_graph_needs_no_mix_compile_mode():
    f = pyfunc(sort_rows)
    x = data(3)
    assert_close(f(Tensor(x)).asnumpy(), np.sort(x, -1))


# --- fusion stops at host ops -------------------------------------------------------------------------

class Chain(Cell):
    def __init__(self, host: bool):
        super().__init__()
        self.host = host
        self.f = pyfunc(lambda a: a + np.float32(1))

    def construct(self, x):
        y = P.Add()(P.Mul()(x, 3.0), 1.0)
        y = self.f(y) if self.host else P.Add()(y, 1.0)
        return P.Neg()(P.Exp()(y))


@TARGETS
def test_fusion_stops_at_a_host_op(target):
    mixed(target)
    x = Tensor(data(4))
    assert [k.target for k in Chain(False).compile(x).kernels] == ["device"]
    kernels = Chain(True).compile(x).kernels
    assert [k.target for k in kernels] == ["device", "copy", "host", "copy", "device"]
    assert [set(k.op_types) for k in kernels if k.target == "device"] == [{"Mul", "Add"}, {"Exp", "Neg"}]
    assert_close(Chain(True)(x).asnumpy(), -np.exp(x.asnumpy() * 3 + 2))


class AroundHost(Cell):
    """exp feeds the host op and, directly, the mul after it: fusing exp and mul would need the host
    op in the middle of one kernel."""
    def __init__(self):
        super().__init__()
        self.f = pyfunc(sort_rows)

    def construct(self, x):
        a = P.Exp()(x)
        return P.Mul()(a, self.f(a))


@TARGETS
def test_no_composite_spans_a_host_op(target):
    mixed(target)
    x = Tensor(data(5))
    compiled = AroundHost().compile(x)
    for k in compiled.kernels:
        assert not {"Exp", "Mul"} <= set(k.op_types)
    regions = device_regions(compiled.graph)
    assert sorted(set(regions.values())) == [0, 1]
    a = np.exp(x.asnumpy())
    assert_close(AroundHost()(x).asnumpy(), a * np.sort(a, -1))


def test_device_subgraphs_of_a_host_op_feeding_two():
    mixed("CPU")
    compiled = FeedsTwo().compile(Tensor(data(0)))
    regions = device_regions(compiled.graph)
    assert len(set(regions.values())) == 3   # exp before; the Mul/Neg and the Log/ReduceMax after
    copies = [n for n in compiled.graph.nodes if n.op in ("CopyToHost", "CopyToDevice")]
    assert [n.op for n in copies] == ["CopyToHost", "CopyToDevice"]   # one copy per value crossing


# --- copies ------------------------------------------------------------------------------------------

def test_copies_are_launches_counted_by_the_profiler(tmp_path):
    mixed("Ascend")
    x = Tensor(data(6))
    net = Several()
    compiled = net.compile(x, x)
    prof = Profiler(output_path=str(tmp_path))
    for _ in range(3):
        net(x, x)
    rows = prof.analyse()
    calls = {}
    for row in rows:
        calls[row["op_type"]] = calls.get(row["op_type"], 0) + row["calls"]
    assert calls["PyFunc"] == 2 * 3
    assert calls["CopyToHost"] + calls["CopyToDevice"] == 5 * 3   # exp->f, f->mul, mul->g, g's two outputs
    assert sorted((r["name"], r["kernel"]) for r in rows) == sorted((k.name, k.kernel) for k in compiled.kernels)


def test_kernel_graph_dot_draws_device_subgraphs_and_host_ops_apart(tmp_path):
    mixed("Ascend")
    context.set_context(save_graphs=True, save_graphs_path=str(tmp_path))
    FeedsTwo()(Tensor(data(0)))
    dot = (tmp_path / "kernel_graph_0.dot").read_text()
    clusters = [line for line in dot.splitlines() if "subgraph cluster_device_" in line]
    assert [f"device subgraph {r}" in c for r, c in enumerate(clusters)] == [True] * 3
    host_line = next(line for line in dot.splitlines() if "PyFunc" in line and "[label=" in line)
    host_id = host_line.split()[0]
    assert not any(f" {host_id};" in c or f"; {host_id};" in c for c in clusters)
    assert "palegreen" in dot and "lightgoldenrod1" in dot


# --- PyFunc's declaration and errors -----------------------------------------------------------------

class Wrapped(Cell):
    def __init__(self, fn, **kw):
        super().__init__()
        self.f = pyfunc(fn, **kw)

    def construct(self, x):
        return P.Exp()(self.f(P.Neg()(x)))


LIES = {
    "count": (lambda a: (a, a), "returned 2 result\\(s\\), out_types declares 1"),
    "shape": (lambda a: a[:2], "has shape \\[2, 8\\], out_shapes declares \\[4, 8\\]"),
    "dtype": (lambda a: a.astype(np.float64), "has dtype float64, out_types declares float32"),
    "a string": (lambda a: "abc", "result 0 of the function .* is 'abc', not an array or number"),
    "None": (lambda a: None, "result 0 of the function .* is None, not an array or number"),
    "ragged": (lambda a: ([[1.0], [1.0, 2.0]],), r"result 0 of the function .* \(\[\[1.0\], \[1.0, 2.0\]\]\) is no "
                                               "float32 array"),
}


@TARGETS
@pytest.mark.parametrize("lie", list(LIES))
def test_a_pyfunc_that_lies_fails_naming_its_scope(target, lie):
    mixed(target)
    fn, message = LIES[lie]
    with pytest.raises(GraphKernelError, match=message) as info:
        Wrapped(fn)(Tensor(data(0)))
    assert "Default/PyFunc-op1" in str(info.value)


@TARGETS
def test_an_exception_inside_the_function_is_chained(target):
    mixed(target)

    def broken(a):
        raise KeyError("no such table")

    with pytest.raises(GraphKernelError, match="KeyError") as info:
        Wrapped(broken)(Tensor(data(0)))
    assert "Default/PyFunc-op1" in str(info.value)
    causes, e = [], info.value
    while e is not None:
        causes.append(e)
        e = e.__cause__
    assert any(isinstance(c, HostFunctionError) for c in causes)
    assert isinstance(causes[-1], KeyError)


def test_inputs_are_checked_against_in_types_and_in_shapes():
    mixed("CPU")

    class Net(Cell):
        def __init__(self, f):
            super().__init__()
            self.f = f

        def construct(self, x):
            return self.f(x)

    wrong_type = P.PyFunc(sort_rows, [mstype.float64], [SHAPE], [F32], [SHAPE])
    with pytest.raises(DTypeError, match="PyFunc.*input 0 is f32\\[4,8\\], in_types declares float64"):
        Net(wrong_type)(Tensor(data(0)))
    wrong_shape = P.PyFunc(sort_rows, [F32], [(4, 4)], [F32], [SHAPE])
    with pytest.raises(GraphKernelError, match="in_shapes declares \\[4, 4\\]"):
        Net(wrong_shape)(Tensor(data(0)))


def test_functions_compare_by_identity_and_print_as_opaque_tokens():
    mixed("CPU")
    compiled = Wrapped(sort_rows).compile(Tensor(data(0)))
    text = print_graph(compiled.graph)
    assert "fn=<function sort_rows@0x" in text
    with pytest.raises(ParseError, match="functions cannot be parsed"):
        parse_graph(text)
    same = Wrapped(sort_rows).compile(Tensor(data(0))).graph
    other = Wrapped(lambda a: np.sort(a, axis=-1)).compile(Tensor(data(0))).graph
    assert same == compiled.graph and other != compiled.graph


@pytest.mark.parametrize("mode", ["force_fp16", "allow_mix_precision"])
def test_host_ops_keep_their_dtypes_under_every_precision_mode(mode):
    mixed("CPU")
    context.set_context(precision_mode=mode)
    x = data(7)
    got = InMiddle()(Tensor(x))
    assert got.dtype == F32
    compiled = InMiddle().compile(Tensor(x))
    host = next(n for n in compiled.graph.nodes if n.op == "PyFunc")
    assert [v.dtype for v in host.inputs + host.outputs] == [F32, F32]
    scope = SeedScope().compile(Tensor(x[0]), Tensor(x[1]))
    assert {t.dtype for n in scope.graph.nodes if n.op == "HostCall" for t in n.types} == {F32}


def test_device_regions_never_hold_both_sides_of_a_host_op():
    """a -> b <- c -> d with a -> host -> d0 -> d: c joins a's region through b, so d (after the
    host op) may not join c's, though c -> d is a device edge."""
    from ir.graph import Graph, TensorType
    from ir.ops import make_node
    x, = Graph.with_inputs([TensorType(SHAPE, F32)])
    a = make_node("Exp", [x])
    h = make_node("PyFunc", [a.out], dict(fn=sort_rows, in_types=[F32], in_shapes=[SHAPE], out_types=[F32],
                                          out_shapes=[SHAPE]))
    d0 = make_node("Neg", [h.out])
    c = make_node("Log", [x])
    b = make_node("Add", [a.out, c.out])
    d = make_node("Mul", [c.out, d0.out])
    regions = device_regions(Graph([x], [a, h, d0, c, b, d], [b.out, d.out]))
    assert regions == {a: 0, c: 0, b: 0, d0: 1, d: 1}


@TARGETS
def test_a_stateful_function_runs_on_every_call(target):
    """The point of mixed compute: host state (a table, a counter) lives with the host op across calls."""
    mixed(target)
    calls = []

    def count(a):
        calls.append(1)
        return a + np.float32(len(calls))

    net = Wrapped(count)
    x = data(8)
    first, second = net(Tensor(x)).asnumpy(), net(Tensor(x)).asnumpy()
    assert len(calls) == 2
    assert_close(first, np.exp(-x + 1))
    assert_close(second, np.exp(-x + 2))


@TARGETS
def test_a_read_only_input_runs_the_host_function_once(target):
    """A read-only array is copied before the first launch, never retried after a failed one."""
    mixed(target)
    calls = []

    def count(a):
        calls.append(1)
        return a + np.float32(len(calls))

    class HostFirst(Cell):  # the device kernel reading x runs after the host function
        def __init__(self):
            super().__init__()
            self.f = pyfunc(count)

        def construct(self, x):
            return P.Add()(self.f(x), x)

    x = data(8)
    x.setflags(write=False)
    out = HostFirst()(Tensor(x)).asnumpy()
    assert len(calls) == 1
    assert_close(out, x + 1 + x)
