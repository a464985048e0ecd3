"""Every gradient rule against float64 central finite differences of the op's numpy reference, generated
from the op table (tests/grad_samples.py), and the autodiff transform's own behaviour: fan-out sums,
unused and unreachable inputs, StopGradient, sens, tie rules, gradients of gradients, errors."""
import numpy as np
import pytest

from ir import GraphBuilder
from ir.autodiff import GradientError, differentiate
from ir.dtypes import DType
from ir.graph import TensorType
from ir.interpret import interpret
from ir.ops import OPS, evaluate, make_node
from ir.verify import verify
from tests.grad_samples import GradCase, grad_cases, not_the_derivative, without_rule

CASES = grad_cases()


def _weighted_loss_graph(case: GradCase, weights: list[np.ndarray]):
    """inputs -> op -> sum(out_k * w_k) -> its Gradient with respect to every float input."""
    b = GraphBuilder(*[TensorType(a.shape, DType(a.dtype.name)) for a in case.arrays])
    outs = b.ops(case.op, *b.inputs, **case.attrs)
    loss = None
    for out, w in zip(outs, weights):
        if w is None:
            continue
        term = b.reduce("ReduceSum", b.op("Mul", out, b.const(w, out.dtype)), (), keep_dims=False)
        loss = term if loss is None else b.op("Add", loss, term)
    wrt = [v for v in b.inputs if v.dtype.is_float]
    grads = b.ops("Gradient", loss, *wrt, seeds=1)
    return b.graph(loss, *grads), wrt


def _reference_loss(case: GradCase, arrays, weights) -> float:
    node = make_node(case.op, [v for v in GraphBuilder(*[TensorType(a.shape, DType(a.dtype.name))
                                                         for a in arrays]).inputs], case.attrs)
    outs = evaluate(node, arrays)
    return sum(float(np.sum(o * w)) for o, w in zip(outs, weights) if w is not None)


def _numeric_gradient(case: GradCase, weights, index: int, eps: float = 1e-6) -> np.ndarray:
    arrays = [a.copy() for a in case.arrays]
    grad = np.zeros_like(arrays[index])
    flat = arrays[index].reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = _reference_loss(case, arrays, weights)
        flat[i] = keep - eps
        down = _reference_loss(case, arrays, weights)
        flat[i] = keep
        grad.reshape(-1)[i] = (up - down) / (2 * eps)
    return grad


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_matches_finite_differences(case):
    rng = np.random.default_rng(1)
    node = make_node(case.op, GraphBuilder(*[TensorType(a.shape, DType(a.dtype.name))
                                             for a in case.arrays]).inputs, case.attrs)
    # every float result carries a cotangent; LayerNorm's mean and variance too
    weights = [rng.uniform(-1, 1, t.shape) if t.dtype.is_float else None for t in node.types]
    graph, wrt = _weighted_loss_graph(case, weights)
    differentiated = differentiate(graph)
    verify(differentiated)
    assert not any(n.op == "Gradient" for n in differentiated.nodes)
    results = interpret(differentiated, case.arrays)
    floats = [i for i, a in enumerate(case.arrays) if a.dtype.kind == "f"]
    for got, index in zip(results[1:], floats):
        want = _numeric_gradient(case, weights, index)
        scale = max(1.0, float(np.max(np.abs(want), initial=0)))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7 * scale, err_msg=f"{case.id} input {index}")


def _needs_rule(name: str) -> bool:
    """Whether the op can give a float result a cotangent reaches: its float32 inference says so; an op
    that needs attributes to infer at all (Gather, Cast, ...) is taken to need one."""
    d = OPS[name]
    if name in without_rule or d.domain == "bool":
        return False
    inputs = GraphBuilder(*[TensorType((2, 2), DType.float32)] * (d.arity or 1)).inputs
    try:
        return any(t.dtype.is_float for t in make_node(name, inputs).types)
    except Exception:  # noqa: BLE001 - required attributes, or inputs of another kind
        return True


def test_every_op_with_a_float_result_has_a_rule_or_a_reason_and_every_rule_a_case():
    tested = {c.op for c in CASES}
    for name, d in OPS.items():
        if d.grad is not None:
            assert name in tested or name in not_the_derivative, f"{name} has a gradient rule but no case in tests/grad_samples.py"
        else:
            assert not _needs_rule(name), f"{name} has float results and no gradient rule (or add it to " \
                                          "without_rule in tests/grad_samples.py with the reason)"


# -- the transform itself ----------------------------------------------------------------------------

def _grad_graph(build, *types, sens=False):
    b = GraphBuilder(*types)
    seeds, wrt, extra = build(b, *b.inputs)
    grads = b.ops("Gradient", *seeds, *wrt, *extra, seeds=len(seeds), sens=sens)
    return differentiate(b.graph(*seeds, *grads))


F64 = lambda *s: TensorType(s, DType.float64)  # noqa: E731


def test_fan_out_sums_cotangents_and_unreached_inputs_get_zeros():
    def build(b, x, y):
        s = b.op("Add", b.op("Mul", x, x), x)           # x used three times
        loss = b.reduce("ReduceSum", s, (), keep_dims=False)
        return [loss], [x, y], []
    g = _grad_graph(build, F64(3), F64(2))
    x = np.array([1.0, -2.0, 0.5])
    _, gx, gy = interpret(g, [x, np.ones(2)])
    np.testing.assert_array_equal(gx, 2 * x + 1)
    np.testing.assert_array_equal(gy, np.zeros(2))


def test_stop_gradient_blocks_and_is_removed():
    def build(b, x):
        stopped = b.op("StopGradient", b.op("Mul", x, x))
        loss = b.reduce("ReduceSum", b.op("Mul", stopped, x), (), keep_dims=False)
        return [loss], [x], []
    g = _grad_graph(build, F64(3))
    assert not any(n.op == "StopGradient" for n in g.nodes)
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(interpret(g, [x])[1], x * x)


def test_sens_weights_a_non_scalar_output():
    def build(b, x, sens):
        return [b.op("Mul", x, b.scalar(3.0, x))], [x], [sens]
    g = _grad_graph(build, F64(2, 3), F64(2, 3), sens=True)
    sens = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(interpret(g, [np.ones((2, 3)), sens])[1], 3 * sens)


def test_maximum_tie_gives_x_the_whole_cotangent_and_reduce_max_shares_it():
    def build(b, x, y):
        loss = b.reduce("ReduceSum", b.op("Maximum", x, y), (), keep_dims=False)
        return [loss], [x, y], []
    g = _grad_graph(build, F64(3), F64(3))
    _, gx, gy = interpret(g, [np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 0.0])])
    np.testing.assert_array_equal(gx, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(gy, [0.0, 1.0, 0.0])

    def build_max(b, x):
        return [b.reduce("ReduceMax", x, (), keep_dims=False)], [x], []
    g = _grad_graph(build_max, F64(4))
    np.testing.assert_array_equal(interpret(g, [np.array([2.0, 5.0, 5.0, 1.0])])[1], [0, 0.5, 0.5, 0])


def test_gradient_of_a_gradient():
    def build(b, x):
        cube = b.reduce("ReduceSum", b.op("Mul", x, b.op("Mul", x, x)), (), keep_dims=False)
        (d,) = b.ops("Gradient", cube, x, seeds=1)          # 3 x^2
        return [b.reduce("ReduceSum", d, (), keep_dims=False)], [x], []
    g = _grad_graph(build, F64(3))
    x = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(interpret(g, [x])[1], 6 * x)


def test_backward_nodes_are_named_after_the_forward_node():
    b = GraphBuilder(F64(3))
    (x,) = b.inputs
    y = b.op("Tanh", x, name="Default/net-Net/Tanh-op0")
    loss = b.reduce("ReduceSum", y, (), keep_dims=False, name="Default/net-Net/ReduceSum-op1")
    (d,) = b.ops("Gradient", loss, x, seeds=1, name="Default/Gradient-op2")
    g = differentiate(b.graph(d))
    names = [n.name for n in g.nodes if n.name.startswith("Gradients/")]
    assert any(n.startswith("Gradients/Default/net-Net/Tanh-op0/") for n in names), names
    assert any(n.startswith("Gradients/Default/net-Net/ReduceSum-op1/") for n in names), names


def test_an_op_without_a_rule_is_an_error_naming_it():
    from ir.ops.host import HostFunction
    b = GraphBuilder(F64(3))
    (x,) = b.inputs
    (y,) = b.ops("PyFunc", x, fn=HostFunction(lambda a: a), in_types=(DType.float64,), in_shapes=((3,),),
                 out_types=(DType.float64,), out_shapes=((3,),), name="Default/PyFunc-op0")
    loss = b.reduce("ReduceSum", y, (), keep_dims=False)
    (d,) = b.ops("Gradient", loss, x, seeds=1)
    with pytest.raises(GradientError, match=r"PyFunc \(Default/PyFunc-op0\) has no gradient rule.*bprop"):
        differentiate(b.graph(d))


def test_gradient_node_refuses_a_non_scalar_seed_without_sens():
    b = GraphBuilder(F64(3))
    (x,) = b.inputs
    with pytest.raises(Exception, match="not a scalar"):
        b.ops("Gradient", b.op("Neg", x), x, seeds=1)


COMPOSITE_CASES = [c for c in CASES if OPS[c.op].expandable and not c.op.endswith("Grad")]


@pytest.mark.parametrize("case", COMPOSITE_CASES, ids=[c.id for c in COMPOSITE_CASES])
def test_composite_rule_equals_the_gradient_of_its_expansion(case):
    """A composite op's rule (a composite gradient op) against autodiff through the primitives its
    expander writes, both in float64."""
    from graphkernel.expanders import expand
    from graphkernel.settings.options import CompileOptions
    rng = np.random.default_rng(4)
    node = make_node(case.op, GraphBuilder(*[TensorType(a.shape, DType(a.dtype.name))
                                             for a in case.arrays]).inputs, case.attrs)
    weights = [rng.uniform(-1, 1, t.shape) if t.dtype.is_float else None for t in node.types]
    graph, _ = _weighted_loss_graph(case, weights)
    by_rule = interpret(expand(differentiate(graph), CompileOptions()), case.arrays)
    by_expansion = interpret(differentiate(expand(graph, CompileOptions())), case.arrays)
    for got, want in zip(by_rule, by_expansion):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=case.id)


def test_wrt_values_are_independent_inputs_even_when_one_was_computed_from_another():
    """grad of f(x, y) = sum(x * y) at y = 2x (computed before f ran): the partials y and x, not the
    total derivative through y's producer."""
    def build(b, x):
        y = b.op("Mul", x, b.scalar(2.0, x))
        return [b.reduce("ReduceSum", b.op("Mul", x, y), (), keep_dims=False)], [x, y], []
    g = _grad_graph(build, F64(3))
    x = np.array([1.0, -2.0, 0.5])
    _, gx, gy = interpret(g, [x])
    np.testing.assert_array_equal(gx, 2 * x)
    np.testing.assert_array_equal(gy, x)


@pytest.mark.parametrize("dtype", [DType.float32, DType.bfloat16, DType.float64])
def test_fast_gelu_has_a_gradient_in_every_float_dtype(dtype):
    """FastGeLUGrad (MindSpore's bprop) where MindSpore's primitive takes the dtype, its formula in
    primitive ops elsewhere: both give float32's gradient within the dtype's rounding."""
    x = np.linspace(-6, 6, 25)

    def build(b, v):
        return [b.reduce("ReduceSum", b.op("FastGeLU", v), (), keep_dims=False)], [v], []
    g = _grad_graph(build, TensorType((25,), dtype))
    assert ("FastGeLUGrad" in {n.op for n in g.nodes}) == (dtype == DType.float32)
    (_, got) = interpret(g, [x.astype(dtype.np)])
    want = evaluate(make_node("FastGeLUGrad", GraphBuilder(TensorType((25,), DType.float32),
                                                           TensorType((25,), DType.float32)).inputs, {}),
                    [np.ones(25, np.float32), x.astype(np.float32)])[0]
    tol = {DType.bfloat16: 2e-2, DType.float32: 1e-6, DType.float64: 1e-6}[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)
