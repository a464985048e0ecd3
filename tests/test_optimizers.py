"""Each optimizer's update against its formula in float64 numpy over several steps, with weight decay,
parameter groups, per-step and scheduled learning rates; on every target, fused and unfused, in
GRAPH_MODE and PYNATIVE_MODE (the `setting` fixture). Bad arguments raise errors naming them."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Parameter, Tensor, nn
from graphkernel.cell import Cell

STEPS = 4
RTOL, ATOL = 2e-5, 1e-6   # float32 arithmetic over a few steps against float64


class Step(Cell):
    """One optimizer call on given gradients."""

    def __init__(self, opt):
        super().__init__(auto_prefix=False)
        self.opt = opt

    def construct(self, *grads):
        self.opt(grads)
        return grads[0]


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return [Parameter(rng.standard_normal((3, 4)).astype(np.float32), name="fc.weight"),
            Parameter(rng.standard_normal((4,)).astype(np.float32), name="fc.bias"),
            Parameter(rng.standard_normal((4,)).astype(np.float32) + 1.5, name="norm.gamma")]


def _grads(step, params):
    rng = np.random.default_rng(100 + step)
    return [rng.standard_normal(p.shape).astype(np.float32) for p in params]


# float64 references: (state, p, g, lr, wd, t) -> new p; state a dict per parameter
def ref_sgd(momentum, dampening=0.0, nesterov=False):
    def update(s, p, g, lr, wd, t):
        g = g + wd * p
        if momentum == 0:
            return p - lr * g
        s["v"] = g if t == 1 else momentum * s["v"] + (1 - dampening) * g
        return p - lr * (g + momentum * s["v"] if nesterov else s["v"])
    return update


def ref_momentum(momentum, nesterov=False):
    def update(s, p, g, lr, wd, t):
        g = g + wd * p
        s["v"] = momentum * s.get("v", 0.0) + g
        return p - lr * (g + momentum * s["v"] if nesterov else s["v"])
    return update


def ref_adam(b1=0.9, b2=0.999, eps=1e-8, nesterov=False):
    def update(s, p, g, lr, wd, t):
        g = g + wd * p
        s["m"] = s.get("m", 0.0) + (g - s.get("m", 0.0)) * (1 - b1)
        s["v"] = s.get("v", 0.0) + (g * g - s.get("v", 0.0)) * (1 - b2)
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        m = s["m"] * b1 + (1 - b1) * g if nesterov else s["m"]
        return p - lr_t * m / (np.sqrt(s["v"]) + eps)
    return update


def ref_adam_weight_decay(b1=0.9, b2=0.999, eps=1e-6):
    def update(s, p, g, lr, wd, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        return p - lr * (s["m"] / (np.sqrt(s["v"]) + eps) + wd * p)
    return update


def ref_adamw(b1=0.9, b2=0.999, eps=1e-8):
    def update(s, p, g, lr, wd, t):
        p = p * (1 - lr * wd)
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        return p - lr * (s["m"] / (1 - b1 ** t)) / (np.sqrt(s["v"] / (1 - b2 ** t)) + eps)
    return update


def ref_lamb(b1=0.9, b2=0.999, eps=1e-6):
    def update(s, p, g, lr, wd, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        r = (s["m"] / (1 - b1 ** t)) / (np.sqrt(s["v"] / (1 - b2 ** t)) + eps) + wd * p
        wn, rn = np.linalg.norm(p), np.linalg.norm(r)
        trust = wn / rn if wn > 0 and rn > 0 else 1.0
        return p - lr * trust * r
    return update


CASES = {
    "SGD": (lambda ps, lr, wd: nn.SGD(ps, lr, weight_decay=wd), ref_sgd(0.0), True),
    "SGD-momentum-dampening": (lambda ps, lr, wd: nn.SGD(ps, lr, momentum=0.9, dampening=0.1, weight_decay=wd),
                               ref_sgd(0.9, 0.1), True),
    "SGD-nesterov": (lambda ps, lr, wd: nn.SGD(ps, lr, momentum=0.8, nesterov=True, weight_decay=wd),
                     ref_sgd(0.8, 0.0, True), True),
    "Momentum": (lambda ps, lr, wd: nn.Momentum(ps, lr, 0.9, weight_decay=wd), ref_momentum(0.9), True),
    "Momentum-nesterov": (lambda ps, lr, wd: nn.Momentum(ps, lr, 0.9, weight_decay=wd, use_nesterov=True),
                          ref_momentum(0.9, True), True),
    "Adam": (lambda ps, lr, wd: nn.Adam(ps, lr, weight_decay=wd), ref_adam(), True),
    "Adam-nesterov": (lambda ps, lr, wd: nn.Adam(ps, lr, use_nesterov=True, eps=1e-6),
                      ref_adam(eps=1e-6, nesterov=True), None),
    "AdamWeightDecay": (lambda ps, lr, wd: nn.AdamWeightDecay(ps, lr, weight_decay=wd), ref_adam_weight_decay(),
                        True),
    "AdamW": (lambda ps, lr, wd: nn.AdamW(ps, lr, weight_decay=wd), ref_adamw(), False),
    "Lamb": (lambda ps, lr, wd: nn.Lamb(ps, lr, weight_decay=wd), ref_lamb(), True),
}


def _run(make, ref, decay_filter, lr=0.05, wd=0.01, groups=False):
    params = _params()
    start = [p.asnumpy().astype(np.float64) for p in params]
    if groups:   # per-group rates and decays; order_params gives the gradients' order
        spec = [{"params": [params[0]], "lr": lr * 2, "weight_decay": wd},
                {"params": params[1:], "weight_decay": 0.0},
                {"order_params": params}]
        opt = make(spec, lr, wd)
        rates, decays = [lr * 2, lr, lr], [wd, 0.0, 0.0]
    else:
        opt = make(params, lr, wd)
        rates = [lr] * 3
        filt = [True] * 3 if decay_filter is False else ["gamma" not in p.name for p in params]
        decays = [wd if f else 0.0 for f in filt]
    if isinstance(lr, list):
        rates = None
    cell = Step(opt)
    states = [dict() for _ in params]
    expect = start
    for t in range(1, STEPS + 1):
        grads = _grads(t, params)
        cell(*[Tensor(g) for g in grads])
        step_rates = [lr[t - 1]] * 3 if rates is None else rates
        expect = [ref(s, p, g.astype(np.float64), r, d, t)
                  for s, p, g, r, d in zip(states, expect, grads, step_rates, decays)]
        for p, e in zip(params, expect):
            np.testing.assert_allclose(p.asnumpy(), e, rtol=RTOL, atol=ATOL, err_msg=f"{p.name} step {t}")
    assert int(opt.global_step.asnumpy()[0]) == STEPS
    return cell


@pytest.mark.grid
@pytest.mark.parametrize("name", sorted(CASES))
def test_update_matches_formula(setting, name):
    make, ref, decay_filter = CASES[name]
    _run(make, ref, decay_filter, wd=0.0 if decay_filter is None else 0.01)


@pytest.mark.parametrize("name", ["SGD-momentum-dampening", "AdamWeightDecay", "Lamb", "AdamW"])
def test_parameter_groups(name):
    make, ref, _ = CASES[name]
    _run(make, ref, None, groups=True)


def test_per_step_learning_rate_list_and_its_end():
    make, ref, _ = CASES["AdamWeightDecay"]
    rates = [0.1, 0.05, 0.02, 0.01]
    cell = _run(make, ref, True, lr=rates)
    with pytest.raises(nn.OptimizerError, match="step 4 is past the end of the per-step list"):
        cell(*[Tensor(g) for g in _grads(5, _params())])


def test_learning_rate_is_read_at_run_time_not_baked_in():
    params = _params()
    opt = nn.SGD(params, 0.1)
    cell = Step(opt)
    grads = [Tensor(np.ones(p.shape, np.float32)) for p in params]
    before = params[1].asnumpy()
    cell(*grads)
    np.testing.assert_allclose(params[1].asnumpy(), before - 0.1, rtol=1e-6)
    opt.learning_rate.set_data(np.array(0.5, np.float32))
    cell(*grads)
    np.testing.assert_allclose(params[1].asnumpy(), before - 0.6, rtol=1e-6)
    assert cell.trace_count == 1


def test_schedule_cell_as_learning_rate():
    class Halving(Cell):   # lr = 0.1 / (1 + step)
        def construct(self, global_step):
            return 0.1 / (ms.ops.cast(global_step, ms.float32) + 1.0)
    params = _params()
    cell = Step(nn.SGD(params, Halving()))
    before = params[1].asnumpy().astype(np.float64)
    for t in range(3):
        cell(*[Tensor(np.ones(p.shape, np.float32)) for p in params])
        before = before - 0.1 / (1 + t)
        np.testing.assert_allclose(params[1].asnumpy(), before, rtol=1e-6)


def test_state_lives_in_named_parameters():
    params = _params()
    opt = nn.Adam(params, 1e-3)
    names = [p.name for p in opt.get_parameters()]
    for wanted in ("global_step", "learning_rate", "beta1_power", "moment1.fc.weight", "moment2.norm.gamma"):
        assert wanted in names


@pytest.mark.parametrize("build, match", [
    (lambda ps: nn.SGD([1.0, 2.0], 0.1), "must all be Parameters"),
    (lambda ps: nn.Adam([{"lr": 0.1}], 0.1), "group 0 has no 'params'"),
    (lambda ps: nn.Adam([{"params": ps}, {"params": ps[:1]}], 0.1), "is in group 0 and group 1"),
    (lambda ps: nn.Adam(ps, -0.1), "learning_rate must be >= 0"),
    (lambda ps: nn.Adam(ps, 0.1, beta1=1.0), "beta1 must be < 1"),
    (lambda ps: nn.SGD(ps, 0.1, nesterov=True), "nesterov needs momentum > 0"),
    (lambda ps: nn.Momentum(ps, 0.1, 1), "momentum must be a float"),
    (lambda ps: nn.Adam([{"params": ps}, {"order_params": ps[:1]}], 0.1), "order_params must hold"),
])
def test_bad_arguments(build, match):
    with pytest.raises(nn.OptimizerError, match=match):
        build(_params())


def test_wrong_gradients_are_named():
    params = _params()
    opt = nn.SGD(params, 0.1)
    with pytest.raises(nn.OptimizerError, match="one gradient per Parameter"):
        opt((Tensor(np.ones((3, 4), np.float32)),))
    with pytest.raises(nn.OptimizerError, match="gradient of fc.bias has shape"):
        opt(tuple(Tensor(np.ones(s, np.float32)) for s in [(3, 4), (5,), (4,)]))


def test_nn_schedule_drives_the_rate():
    params = _params()
    schedule = nn.WarmUpLR(learning_rate=0.1, warmup_steps=4)   # lr = 0.1 * min(step, 4) / 4
    cell = Step(nn.SGD(params, schedule))
    value = params[1].asnumpy().astype(np.float64)
    for t in range(6):
        cell(*[Tensor(np.ones(p.shape, np.float32)) for p in params])
        value = value - 0.1 * min(t, 4) / 4
        np.testing.assert_allclose(params[1].asnumpy(), value, rtol=1e-6, atol=1e-7)
    assert cell.trace_count == 1
