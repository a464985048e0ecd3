"""Tensor control flow in GRAPH_MODE (graphkernel/tracing/branching.py, the If op of ir/ops/control.py): `if`/`elif`/
`else`, `and`/`or`/`not`, nested ifs and early returns on tensor conditions, in construct, sub-cells, helper
methods and jit functions. Both outcomes of each agree across the numpy reference, the device unfused and
fused, and PYNATIVE_MODE (where Python runs the branch itself); the branch not taken launches nothing and a
host function in it is never called; gradients go through the branch taken; Parameter updates in a branch
happen only when it runs; a loss-scale cell written MindSpore's way trains as ours does."""
import os

import numpy as np
import pytest

import graphkernel as gk
from graphkernel import GraphKernelError, Parameter, Tensor, context, nn, ops
from graphkernel.tools import debug
from graphkernel.tracing.branching import BranchError
from graphkernel.cell import Cell
from graphkernel.ops import operations as P
from ir.printer import print_graph
from ir.verify import verify

REFERENCE = dict(mode=context.GRAPH_MODE, device_target="CPU", enable_graph_kernel=False)
CONFIGS = {
    "device": dict(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=False),
    "device-fused": dict(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True),
    "pynative": dict(mode=context.PYNATIVE_MODE, device_target="CPU", enable_graph_kernel=False),
}
X = np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5


def _results(out):
    return [np.array(t.asnumpy()) for t in (out if isinstance(out, tuple) else (out,))]


def _run(cfg, make, inputs):
    context.reset_context()
    context.set_context(**cfg)
    cell = make()
    outs = [_results(cell(*[Tensor(a) for a in args])) for args in inputs]
    params = {p.name: p.asnumpy().copy() for p in cell.get_parameters()}
    return outs, params


def _check(make, inputs):
    """Every config agrees with the reference; fused and unfused device runs bit for bit."""
    expect = _run(REFERENCE, make, inputs)
    got = {name: _run(cfg, make, inputs) for name, cfg in CONFIGS.items()}
    for name, (outs, params) in got.items():
        for c, (a, b) in enumerate(zip(outs, expect[0])):
            for k, (x, y) in enumerate(zip(a, b)):
                assert x.dtype == y.dtype and x.shape == y.shape, f"{name}: call {c} result {k}"
                np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6, err_msg=f"{name}: call {c} result {k}")
        for p in expect[1]:
            np.testing.assert_allclose(params[p], expect[1][p], rtol=1e-6, atol=1e-6, err_msg=f"{name}: {p}")
    for (a, b) in zip(got["device"][0], got["device-fused"][0]):
        for x, y in zip(a, b):
            assert x.tobytes() == y.tobytes(), "fused and unfused device runs differ"
    return expect


class IfElse(Cell):
    def construct(self, x):
        y = x * 2.0
        if P.ReduceSum()(y) > 0:
            z = y + 1.0
            z = z * z
        else:
            z = y - 1.0
        return z * 3.0


def test_if_else_both_outcomes_agree():
    (outs, _) = _check(IfElse, [(X,), (X - 1,)])
    np.testing.assert_allclose(outs[0][0], ((X * 2 + 1) ** 2) * 3, rtol=1e-6)
    np.testing.assert_allclose(outs[1][0], ((X - 1) * 2 - 1) * 3, rtol=1e-6)


@pytest.mark.parametrize("target", ["CPU", "Ascend"])
def test_branch_not_taken_launches_nothing(tmp_path, target):
    context.set_context(mode=context.GRAPH_MODE, device_target=target, enable_graph_kernel=True)
    net = IfElse()
    net(Tensor(X))
    prof = gk.Profiler(output_path=str(tmp_path))
    net(Tensor(X))
    net(Tensor(X - 1))
    net(Tensor(X - 1))
    prof.stop()
    calls = {}
    for row in prof.analyse():
        for op in ("Add", "Sub"):   # the then branch adds, the else branch subtracts
            if op in row["op_type"] or op in row["name"]:
                calls[op] = calls.get(op, 0) + row["calls"]
    assert calls == {"Add": 1, "Sub": 2}


def test_fusion_inside_each_branch_never_across():
    context.set_context(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    graph = IfElse().compile(Tensor(X)).graph
    verify(graph)
    (node,) = [n for n in graph.nodes if n.op == "If"]
    names = [n.name for g in (graph, node.attr("then").graph, node.attr("else").graph) for n in g.nodes
             if n.op == "Composite"]
    assert names == ["Fused_Mul_ReduceSum_Greater_0", "Fused_Add_Mul_Mul_1", "Fused_Sub_Mul_2"]   # one name each
    for branch in (node.attr("then").graph, node.attr("else").graph):
        (composite,) = [n for n in branch.nodes if n.op == "Composite"]   # the branch's chain is one kernel
        ops_inside = {n.op for n in composite.subgraph.nodes}
        assert "ReduceSum" not in ops_inside and "Greater" not in ops_inside   # nothing from before the if
        assert len(branch.inputs) == 1


@pytest.mark.parametrize("target", ["CPU", "Ascend"])
def test_both_branches_in_the_stage_dumps(tmp_path, target):
    context.set_context(mode=context.GRAPH_MODE, device_target=target, enable_graph_kernel=True, save_graphs=True,
                        save_graphs_path=str(tmp_path), graph_kernel_flags="--dump_as_text")
    IfElse()(Tensor(X))
    files = os.listdir(tmp_path)
    for suffix in (".ir", ".dot"):
        (dump,) = [f for f in files if f.startswith("hwopt_d_composite") and f.endswith(suffix)]
        text = open(os.path.join(tmp_path, dump)).read()
        assert "If" in text and "then:" in text and "else:" in text, dump
        assert "Add" in text and "Sub" in text, dump   # one branch adds, the other subtracts
    if target == "Ascend":   # the kernel graph lists the kernels of both branches
        (dump,) = [f for f in files if f.startswith("kernel_graph_") and f.endswith(".dot")]
        text = open(os.path.join(tmp_path, dump)).read()
        assert "Fused_Add_Mul_Mul_" in text and "Fused_Sub_Mul_" in text


class Chained(Cell):
    """elif, and/or/not on tensors, a nested if and an early return."""

    def construct(self, x, y):
        s, t = P.ReduceSum()(x), P.ReduceSum()(y)
        if s > 0 and t > 0:
            if s > t:
                return x + y
            out = x - y
        elif not (s > -1) or t > 5:
            out = x * y
        else:
            out = x * 0.5
        return out * 2.0


@pytest.mark.parametrize("xs, ys, expect", [
    (1.0, 0.5, lambda x, y: x + y),            # both positive, s > t: the early return
    (0.5, 1.0, lambda x, y: (x - y) * 2),      # both positive, s <= t
    (-1.0, 0.5, lambda x, y: x * y * 2),       # `not (s > -1)`
    (0.1, -1.0, lambda x, y: x * 0.5 * 2),     # else
])
def test_elif_and_or_not_nested_early_return(xs, ys, expect):
    x, y = np.full((2, 3), xs, np.float32), np.full((2, 3), ys, np.float32)
    (outs, _) = _check(Chained, [(x, y)])
    np.testing.assert_allclose(outs[0][0], expect(x, y), rtol=1e-6)


def test_condition_in_sub_cell_helper_method_and_jit():
    class Inner(Cell):
        def construct(self, x):
            return self.pick(x) + 1.0

        def pick(self, x):
            if P.ReduceMax()(x) > 1.0:
                return x * 2.0
            return -x

    class Outer(Cell):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def construct(self, x):
            return self.inner(x) * 3.0

    (outs, _) = _check(Outer, [(X,), (X + 2,)])
    np.testing.assert_allclose(outs[0][0], (-X + 1) * 3, rtol=1e-6)
    np.testing.assert_allclose(outs[1][0], ((X + 2) * 2 + 1) * 3, rtol=1e-6)

    @gk.jit
    def f(x):
        if P.ReduceMin()(x) < 0:
            return x * x
        return x
    np.testing.assert_allclose(f(Tensor(X)).asnumpy(), X * X)
    np.testing.assert_allclose(f(Tensor(X + 1)).asnumpy(), X + 1)
    assert any(n.op == "If" for n in f.compile(Tensor(X)).stages["validate"].nodes)


def test_python_conditions_stay_trace_time():
    class Flag(Cell):
        def __init__(self, flag):
            super().__init__()
            self.flag = flag

        def construct(self, x, sens=None):
            if sens is None and self.flag:
                return x * 2.0
            return x

    context.set_context(mode=context.GRAPH_MODE, device_target="CPU")
    net = Flag(True)
    np.testing.assert_allclose(net(Tensor(X)).asnumpy(), X * 2)
    assert not any(n.op == "If" for n in net.compile(Tensor(X)).graph.nodes)


def test_host_function_in_branch_not_taken_never_runs():
    calls = []

    def on_host(a):
        calls.append(1)
        return a + 1

    class Host(Cell):
        def __init__(self):
            super().__init__()
            self.fn = P.PyFunc(on_host, [gk.float32], [(2, 3)], [gk.float32], [(2, 3)])

        def construct(self, x):
            if P.ReduceSum()(x) > 100:
                return self.fn(x) * 2.0
            return x * 3.0

    for target in ("CPU", "Ascend"):
        context.reset_context()
        context.set_context(mode=context.GRAPH_MODE, device_target=target, mix_compile_mode=True,
                            enable_graph_kernel=True)
        net = Host()
        np.testing.assert_allclose(net(Tensor(X)).asnumpy(), X * 3)
        assert calls == []
        np.testing.assert_allclose(net(Tensor(X + 100)).asnumpy(), (X + 101) * 2)
        assert len(calls) == 1
        calls.clear()


class Counter(Cell):
    """Assigns in a branch, reads before and after it, an unused assign, and one in a sub-cell."""

    class Bump(Cell):
        def __init__(self):
            super().__init__()
            self.count = Parameter(np.zeros((), np.float32), name="count")

        def construct(self, x):
            ops.assign_add(self.count, 1.0)
            return x

    def __init__(self):
        super().__init__()
        self.w = Parameter(np.ones((2, 3), np.float32), name="w")
        self.last = Parameter(np.zeros((2, 3), np.float32), name="last")
        self.bump = Counter.Bump()

    def construct(self, x):
        before = self.w * 1.0
        if P.ReduceSum()(x) > 0:
            self.w = self.w + x                  # `self.p = expr`
            ops.assign(self.last, x)             # its result unused: it still happens
            x = self.bump(x)
        after = self.w * 1.0
        return before, after


def test_assign_inside_branch_happens_only_when_taken():
    (outs, params) = _check(Counter, [(X,), (X - 1,), (X,)])
    w = np.ones((2, 3), np.float32)
    for call, x in enumerate([X, X - 1, X]):
        before, after = outs[call]
        np.testing.assert_allclose(before, w)
        if x.sum() > 0:
            w = w + x
        np.testing.assert_allclose(after, w, rtol=1e-6)
    np.testing.assert_allclose(params["w"], w, rtol=1e-6)
    np.testing.assert_allclose(params["last"], X)
    assert params["bump.count"] == 2.0   # the two calls that took the branch


def test_an_update_not_taken_leaves_the_parameter_bit_for_bit():
    context.set_context(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    net = Counter()
    net.w.set_data(np.full((2, 3), np.float32(1 / 3)))
    old = net.w.asnumpy().tobytes()
    net(Tensor(X - 1))
    assert net.w.asnumpy().tobytes() == old and net.bump.count.asnumpy() == 0


class Piecewise(Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(np.full((2, 3), 0.5, np.float32), name="w")

    def construct(self, x):
        h = x * self.w
        if P.ReduceSum()(h) > 0:
            out = h * h
        else:
            out = h * 3.0
        return P.ReduceSum()(out)


@pytest.mark.parametrize("shift", [0.5, -1.0])
def test_gradient_goes_through_the_branch_taken(shift):
    x = X + shift
    h = x * 0.5
    dw_expect = (2 * h * x) if h.sum() > 0 else (3 * x)
    dx_expect = (2 * h * 0.5) if h.sum() > 0 else np.full_like(x, 1.5)
    results = {}
    for name, cfg in [("reference", REFERENCE), *CONFIGS.items()]:
        context.reset_context()
        context.set_context(**cfg)
        net = Piecewise()
        grad_fn = gk.value_and_grad(net, 0, net.trainable_params())
        loss, (dx, (dw,)) = grad_fn(Tensor(x))
        results[name] = [loss.asnumpy(), dx.asnumpy(), dw.asnumpy()]
        np.testing.assert_allclose(dx.asnumpy(), dx_expect, rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(dw.asnumpy(), dw_expect, rtol=1e-6, err_msg=name)
    for a, b in zip(results["device"], results["device-fused"]):
        assert a.tobytes() == b.tobytes()


def test_gradient_through_branch_matches_finite_differences():
    context.set_context(mode=context.GRAPH_MODE, device_target="CPU")

    class F64(Cell):
        def construct(self, x):
            if P.ReduceSum()(x) > 0:
                return P.ReduceSum()(P.Sin()(x) * x)
            return P.ReduceSum()(P.Exp()(x))

    for x in (X.astype(np.float64) + 0.5, X.astype(np.float64) - 1):
        g = gk.grad(F64())(Tensor(x)).asnumpy()
        eps, num = 1e-6, np.zeros_like(x)
        f = (lambda a: np.sum(np.sin(a) * a)) if x.sum() > 0 else (lambda a: np.sum(np.exp(a)))
        for i in np.ndindex(x.shape):
            d = np.zeros_like(x)
            d[i] = eps
            num[i] = (f(x + d) - f(x - d)) / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


# --- MindSpore's loss-scale cell, with `if not overflow:` -------------------------------------------
class LossScaleMindSporeWay(nn.TrainOneStepWithLossScaleCell):
    """The construct of MindSpore's TrainOneStepWithLossScaleCell: the optimizer runs under a tensor `if`."""

    def construct(self, *inputs):
        loss = self.network(*inputs)
        scaling_sens = self.scale_sense   # returned after the update cell ran: the updated scale, as MindSpore's
        filled = self._fill(loss, 1.0) * P.Cast()(scaling_sens, loss.dtype)   # C.ones_like(loss) * ...
        grads = self.grad(self.network, self.weights)(*inputs, filled)
        grads = tuple(g * P.Cast()(P.Reciprocal()(scaling_sens), g.dtype) for g in grads)
        grads = self.grad_reducer(grads)
        bad = [P.ReduceSum()(P.Cast()(P.LogicalOr()(P.IsNan()(g), P.IsInf()(g)), gk.float32), ()) for g in grads]
        cond = P.Greater()(sum(bad[1:], bad[0]), 0.0)
        overflow = self.process_loss_scale(cond)
        if not overflow:
            loss = ops.depend(loss, self.optimizer(grads))
        return loss, cond, scaling_sens


class Net(Cell):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(3, 2)
        self.loss = nn.MSELoss()

    def construct(self, x, y):
        return self.loss(self.dense(x), y)


def _train(cell_class, target, steps, precision_mode=None):
    context.reset_context()
    context.set_context(mode=context.GRAPH_MODE, device_target=target, enable_graph_kernel=True)
    if precision_mode:
        context.set_context(precision_mode=precision_mode)
    gk.set_seed(1)
    net = Net()
    manager = nn.DynamicLossScaleUpdateCell(loss_scale_value=2.0 ** 10, scale_factor=2, scale_window=2)
    cell = cell_class(net, nn.Momentum(net.trainable_params(), 0.1, 0.9), manager)
    rows = []
    for x, y in steps:
        before = {p.name: p.asnumpy().tobytes() for p in net.trainable_params()}
        loss, cond, scale = cell(Tensor(x), Tensor(y))
        after = {p.name: p.asnumpy().tobytes() for p in net.trainable_params()}
        rows.append((loss.asnumpy(), bool(cond.asnumpy()), float(scale.asnumpy()), before == after,
                     cell.scale_sense.asnumpy().item(), [p.asnumpy().copy() for p in net.trainable_params()]))
    return rows, cell.compile(Tensor(x), Tensor(y)).graph


@pytest.mark.parametrize("target, precision_mode", [("CPU", None), ("Ascend", None), ("CPU", "force_fp16")])
def test_loss_scale_cell_written_mindsporeway_trains_as_ours(target, precision_mode):
    """force_fp16: the optimizer inside the branch reads the gradients as captures, and still stays float32."""
    x, y = X, np.ones((2, 2), np.float32)
    bad = X.copy()
    bad[0, 0] = np.inf
    steps = [(x, y), (bad, y), (x, y), (x, y), (x, y)]
    ours, _ = _train(nn.TrainOneStepWithLossScaleCell, target, steps, precision_mode)
    theirs, graph = _train(LossScaleMindSporeWay, target, steps, precision_mode)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a[0], b[0], rtol=1e-6, equal_nan=True, err_msg=f"step {step}")
        assert a[1:5] == b[1:5], f"step {step}"
        for p, q in zip(a[5], b[5]):
            np.testing.assert_allclose(p, q, rtol=1e-6, atol=1e-7, err_msg=f"step {step}")
    assert theirs[1][1] and theirs[1][3]          # the inf step: overflow, every Parameter bit for bit unchanged
    assert theirs[1][4] < theirs[0][4]            # and the scale lowered
    assert not theirs[0][3] and not theirs[2][3]  # finite steps update
    assert [n.op for n in graph.nodes].count("If") == 1   # the optimizer runs in a branch of the graph


# --- errors ---------------------------------------------------------------------------------------------
def _compile(make, *inputs):
    context.set_context(mode=context.GRAPH_MODE, device_target="CPU")
    return make()(*[Tensor(a) for a in inputs])


def test_a_condition_not_of_shape_scalar_or_one_is_an_error():
    class Many(Cell):
        def construct(self, x):
            if x > 0:
                return x
            return -x
    with pytest.raises(BranchError, match=r"shape \(\) or \(1,\).*test_control_flow.py:\d+ is bool\[2,3\]"):
        _compile(Many, X)

    class OneByOne(Cell):   # one element, but MindSpore refuses a (1, 1) condition too
        def construct(self, x):
            if P.ReduceSum(keep_dims=True)(x, (0, 1)):
                return x
            return -x
    with pytest.raises(BranchError, match=r"is f32\[1,1\]"):
        _compile(OneByOne, X)


def test_a_condition_of_shape_one_any_dtype_and_a_parameter():
    class Conditions(Cell):
        def __init__(self):
            super().__init__()
            self.flag = Parameter(np.array([True]), name="flag", requires_grad=False)

        def construct(self, x):
            n = P.Reshape()(P.ReduceSum()(x), (1,))   # f32[1]
            if n:                        # non-zero: true
                x = x + 1.0
            if self.flag:                # a Parameter's value at this point of the call
                x = x * 2.0
            self.flag = P.LogicalNot()(self.flag)
            return x

    (outs, params) = _check(Conditions, [(X,), (X,), (np.zeros_like(X),)])
    np.testing.assert_allclose(outs[0][0], (X + 1) * 2, rtol=1e-6)     # flag True, then flipped
    np.testing.assert_allclose(outs[1][0], X + 1, rtol=1e-6)           # flag False
    np.testing.assert_allclose(outs[2][0], np.zeros_like(X) * 2)       # sum 0: no +1; flag True again
    assert params["flag"].tolist() == [False]


def test_branches_giving_a_result_different_types_is_an_error():
    class Shapes(Cell):
        def construct(self, x):
            if P.ReduceSum()(x) > 0:
                out = x
            else:
                out = P.ReduceSum()(x, 1)
            return out
    with pytest.raises(BranchError, match=r"result 0 of construct is f32\[2,3\] when .* holds and f32\[2\]"):
        _compile(Shapes, X)

    class Dtypes(Cell):
        def construct(self, x):
            if P.ReduceSum()(x) > 0:
                return x
            return P.Cast()(x, gk.float16)
    with pytest.raises(BranchError, match=r"f32\[2,3\] when .* f16\[2,3\]"):
        _compile(Dtypes, X)


def test_returns_nested_differently_by_branch_is_an_error():
    class Nesting(Cell):
        def construct(self, x):
            if P.ReduceSum()(x) > 0:
                return x, x
            return x
    with pytest.raises(BranchError, match="differently nested"):
        _compile(Nesting, X)


def test_while_on_a_tensor_condition_is_an_error_naming_it():
    class Loop(Cell):
        def construct(self, x):
            while P.ReduceSum()(x) < 10:
                x = x + 1.0
            return x
    with pytest.raises(BranchError, match=r"`while` on a tensor condition \(construct at test_control_flow.py:\d+"):
        _compile(Loop, X)


def test_too_many_paths_is_an_error():
    class Loop(Cell):
        def construct(self, x):
            for _ in range(8):
                if P.ReduceSum()(x) > 0:
                    x = x - 1.0
            return x
    with pytest.raises(BranchError, match="more than 64 paths"):
        _compile(Loop, X)


def test_errors_are_graphkernel_errors():
    assert issubclass(BranchError, GraphKernelError)


class Heavier(Cell):
    """MatMul, reductions and an update around an if: what opt_level 3 and mixed precision rewrite."""

    def __init__(self):
        super().__init__()
        self.w = Parameter(np.full((2, 3), 0.5, np.float32), name="w")

    def construct(self, x):
        h = P.MatMul()(x * self.w, P.Transpose()(self.w, (1, 0)))
        a, b = P.ReduceSum()(h, 1), P.ReduceMax()(h, 1)
        if P.ReduceSum()(a) > 0:
            out = P.Softmax()(h) * 2.0
            self.w = self.w - 0.1 * x
        else:
            out = P.ReduceSum(keep_dims=True)(h * 3.0, 1) + P.ReduceMax(keep_dims=True)(h, 1) + h
        return out, a, b


@pytest.mark.parametrize("settings, tolerance", [
    (dict(device_target="Ascend", enable_graph_kernel=True, graph_kernel_flags="--opt_level=3"), 1e-6),
    (dict(device_target="CPU", enable_graph_kernel=True, graph_kernel_flags="--opt_level=3 --enable_parallel_fusion"),
     1e-6),
    (dict(device_target="Ascend", enable_graph_kernel=True, precision_mode="allow_mix_precision"), 2e-3),
], ids=["device-o3", "cpu-parallel", "mixed-precision"])
def test_every_pass_runs_inside_the_branches(settings, tolerance):
    inputs = [(X,), (-X - 1,), (X,)]
    expect = _run(REFERENCE, Heavier, inputs)
    got = _run(dict(mode=context.GRAPH_MODE, **settings), Heavier, inputs)
    for a, b in zip(got[0], expect[0]):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(got[1]["w"], expect[1]["w"], rtol=1e-6)


def test_debug_compare_runs_a_conditional_as_one_row():
    context.set_context(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True)
    for x in (X, X - 1):
        result = debug.compare(IfElse(), Tensor(x))
        assert result.first_bad is None
        assert [row.ops for row in result.rows][-1] == ("If",)
