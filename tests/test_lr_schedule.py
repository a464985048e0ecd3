"""Learning-rate schedules (nn.learning_rate_schedule) and per-step lists (nn.dynamic_lr) against their
formulas evaluated here in float64, and against MindSpore's documented example outputs (checked
literally); in GRAPH and PYNATIVE mode, on the reference and on the device fused and unfused; one
compiled schedule serves every step (the step is a graph input, never a constant); bad arguments raise
MindSpore's TypeError or ValueError naming the argument.

Tolerance. A schedule computes in float32 (as MindSpore does) from float32 copies of its
hyperparameters, so it is compared with rtol 1e-6 (about 8 float32 ulps) and atol 1e-7 times the
schedule's largest learning rate: the values are of that magnitude, and a value far below it (0.9 ** 250
of it, say) is compared to that absolute accuracy, which is all float32 intermediates can give it. The
steps stay below 2 ** 16, where float32 holds step / decay_steps to well within an ulp, so the floors and
ceilings of the float32 graph and of the float64 formula fall on the same side.
"""
import math

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import nn
from graphkernel.tensor import Parameter
from ir.errors import GraphKernelError

RTOL, ATOL = 1e-6, 1e-7

# steps 0 and 1, around every boundary of the schedules below (decay_steps 4, warmup 3, the cycles of
# update_decay_steps at 8 and 12), and far beyond decay_steps
STEPS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 40, 999, 50000]


def _ceil_cycles(s, d):
    return np.maximum(np.ceil(s / d), 1.0)


# name -> (schedule factory, float64 formula of the step array s, largest learning rate)
CASES = {
    "exponential": (lambda: nn.ExponentialDecayLR(0.1, 0.9, 4),
                    lambda s: 0.1 * 0.9 ** (s / 4), 0.1),
    "exponential_stair": (lambda: nn.ExponentialDecayLR(0.1, 0.9, 4, is_stair=True),
                          lambda s: 0.1 * 0.9 ** np.floor(s / 4), 0.1),
    "natural_exp": (lambda: nn.NaturalExpDecayLR(0.1, 0.05, 4),
                    lambda s: 0.1 * np.exp(-0.05 * s), 0.1),
    "natural_exp_stair": (lambda: nn.NaturalExpDecayLR(0.1, 0.9, 4, True),
                          lambda s: 0.1 * np.exp(-0.9 * np.floor(s / 4) * 4), 0.1),
    "inverse": (lambda: nn.InverseDecayLR(0.1, 0.5, 4),
                lambda s: 0.1 / (1 + 0.5 * s / 4), 0.1),
    "inverse_stair": (lambda: nn.InverseDecayLR(0.1, 0.9, 4, True),
                      lambda s: 0.1 / (1 + 0.9 * np.floor(s / 4)), 0.1),
    "cosine": (lambda: nn.CosineDecayLR(0.01, 0.1, 4),
               lambda s: 0.01 + 0.5 * (0.1 - 0.01) * (1 + np.cos(np.pi * np.minimum(s, 4) / 4)), 0.1),
    "polynomial": (lambda: nn.PolynomialDecayLR(0.1, 0.01, 4, 0.5),
                   lambda s: (0.1 - 0.01) * (1 - np.minimum(s, 4) / 4) ** 0.5 + 0.01, 0.1),
    "polynomial_update": (lambda: nn.PolynomialDecayLR(0.1, 0.01, 4, 2.0, update_decay_steps=True),
                          lambda s: (0.1 - 0.01) * (1 - s / (4 * _ceil_cycles(s, 4))) ** 2.0 + 0.01, 0.1),
    "warmup": (lambda: nn.WarmUpLR(0.1, 3),
               lambda s: 0.1 * np.minimum(s, 3) / 3, 0.1),
}


def assert_lr(actual, expected, scale, what=""):
    actual = np.asarray(actual)
    assert actual.dtype == np.float32, f"{what}: dtype {actual.dtype}"
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=RTOL, atol=ATOL * scale, err_msg=what)


def step_tensor(step, shape=()):
    return ms.Tensor(np.full(shape, step, np.int32))


# -- the schedules: formulas, modes, targets, one compile --------------------------------------------

@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("shape", [(), (1,)], ids=["scalar", "shape1"])
def test_schedule_matches_formula(setting, name, shape):
    make, formula, scale = CASES[name]
    schedule = make()
    for step in STEPS:
        out = schedule(step_tensor(step, shape))
        assert out.shape == shape and out.dtype == ms.float32
        assert_lr(out.asnumpy(), formula(np.full(shape, step, np.float64)), scale, f"{name} at step {step}")
    mode = setting[0]
    # GRAPH_MODE: one trace served every step (the step is a graph input); PYNATIVE_MODE never traces
    assert schedule.trace_count == (1 if mode == ms.GRAPH_MODE else 0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_global_step_parameter_read_inside_a_graph(setting, name):
    """As an optimizer holds it: an int32 (1,) Parameter that the training step updates in place."""
    make, formula, scale = CASES[name]

    class Stepper(nn.Cell):
        def __init__(self):
            super().__init__()
            self.learning_rate = make()
            self.global_step = Parameter(np.zeros((1,), np.int32), name="global_step", requires_grad=False)

        def construct(self, x):
            return self.learning_rate(self.global_step) * x

    net = Stepper()
    one = ms.Tensor(np.ones((1,), np.float32))
    for step in (0, 3, 4, 9, 40):
        net.global_step.set_data(np.array([step], np.int32))
        assert_lr(net(one).asnumpy(), formula(np.array([step], np.float64)), scale, f"{name} at step {step}")
    assert net.trace_count == (1 if setting[0] == ms.GRAPH_MODE else 0)


def test_int64_and_float_steps():
    schedule = nn.PolynomialDecayLR(0.1, 0.01, 4, 0.5)
    want = (0.1 - 0.01) * (1 - 2 / 4) ** 0.5 + 0.01
    for step in (ms.Tensor(np.array(2, np.int64)), ms.Tensor(np.array(2.0, np.float32))):
        assert_lr(schedule(step).asnumpy(), want, 0.1, str(step.dtype))


def test_documented_examples_print_mindspores_values():
    """MindSpore's class examples (global_step = Tensor(2, int32)) print these float32 values."""
    step = ms.Tensor(2, ms.int32)
    examples = [(nn.ExponentialDecayLR(0.1, 0.9, 4), "0.09486833"),
                (nn.NaturalExpDecayLR(0.1, 0.9, 4, True), "0.1"),
                (nn.InverseDecayLR(0.1, 0.9, 4, True), "0.1"),
                (nn.CosineDecayLR(0.01, 0.1, 4), "0.055"),
                (nn.PolynomialDecayLR(0.1, 0.01, 4, 0.5), "0.07363961"),
                (nn.WarmUpLR(0.1, 2), "0.1")]
    for mode in (ms.GRAPH_MODE, ms.PYNATIVE_MODE):
        for target, fuse in (("CPU", False), ("Ascend", False), ("Ascend", True)):
            ms.set_context(mode=mode, device_target=target, enable_graph_kernel=fuse)
            printed = [str(schedule(step).asnumpy()) for schedule, _ in examples]
            assert printed == [want for _, want in examples], (mode, target, fuse)


def test_natural_exp_decay_follows_mindspores_code():
    """MindSpore computes exp(-decay_rate * step) (its docstring's p = step / decay_steps is not what
    it runs); decay_steps only sets the width of the stairs."""
    schedule = nn.NaturalExpDecayLR(0.1, 0.9, 4)
    assert_lr(schedule(step_tensor(4)).asnumpy(), 0.1 * math.exp(-0.9 * 4), 0.1)
    stair = nn.NaturalExpDecayLR(0.1, 0.9, 4, True)
    assert_lr(stair(step_tensor(7)).asnumpy(), 0.1 * math.exp(-0.9 * 4), 0.1)


def test_polynomial_update_decay_steps_restarts_each_cycle():
    schedule = nn.PolynomialDecayLR(0.1, 0.01, 4, 1.0, update_decay_steps=True)
    got = [float(schedule(step_tensor(s)).asnumpy()) for s in (0, 4, 5, 8, 9)]
    want = [0.1, 0.01, 0.09 * (1 - 5 / 8) + 0.01, 0.01, 0.09 * (1 - 9 / 12) + 0.01]
    assert_lr(np.float32(got), np.array(want), 0.1)


# -- dynamic_lr: MindSpore's documented examples, literally ------------------------------------------

def test_dynamic_lr_documented_examples():
    assert nn.piecewise_constant_lr([2, 5, 10], [0.1, 0.05, 0.01]) == [
        0.1, 0.1, 0.05, 0.05, 0.05, 0.01, 0.01, 0.01, 0.01, 0.01]
    assert nn.exponential_decay_lr(0.1, 0.9, 6, 2, 1) == [
        0.1, 0.1, 0.09000000000000001, 0.09000000000000001, 0.08100000000000002, 0.08100000000000002]
    assert nn.natural_exp_decay_lr(0.1, 0.9, 6, 2, 2, True) == [
        0.1, 0.1, 0.1, 0.1, 0.016529888822158657, 0.016529888822158657]
    assert nn.inverse_decay_lr(0.1, 0.5, 6, 1, 1, True) == [
        0.1, 0.06666666666666667, 0.05, 0.04, 0.03333333333333333, 0.028571428571428574]
    assert nn.cosine_decay_lr(0.01, 0.1, 6, 2, 2) == [0.1, 0.1, 0.05500000000000001, 0.05500000000000001, 0.01, 0.01]
    assert nn.polynomial_decay_lr(0.1, 0.01, 6, 2, 2, 0.5) == [
        0.1, 0.1, 0.07363961030678928, 0.07363961030678928, 0.01, 0.01]
    assert nn.warmup_lr(0.1, 6, 2, 2) == [0.0, 0.0, 0.05, 0.05, 0.1, 0.1]


# -- dynamic_lr: formulas ---------------------------------------------------------------------------

def _epochs(total, per_epoch):
    return np.floor(np.arange(total) / per_epoch)


@pytest.mark.parametrize("total,per_epoch,decay", [(1, 1, 1), (7, 1, 3), (30, 4, 2), (25, 3, 5)])
@pytest.mark.parametrize("stair", [False, True])
def test_decay_lists_match_formulas(total, per_epoch, decay, stair):
    e = _epochs(total, per_epoch)
    p = np.floor(e / decay) if stair else e / decay
    checks = [(nn.exponential_decay_lr(0.2, 0.7, total, per_epoch, decay, stair), 0.2 * 0.7 ** p),
              (nn.natural_exp_decay_lr(0.2, 0.7, total, per_epoch, decay, stair),
               0.2 * np.exp(-0.7 * (np.floor(e / decay) * decay if stair else e))),
              (nn.inverse_decay_lr(0.2, 0.7, total, per_epoch, decay, stair), 0.2 / (1 + 0.7 * p))]
    for got, want in checks:
        assert isinstance(got, list) and len(got) == total and all(type(v) is float for v in got)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("total,per_epoch,decay", [(1, 1, 1), (7, 1, 3), (30, 4, 2), (25, 3, 5)])
def test_cosine_polynomial_warmup_lists_match_formulas(total, per_epoch, decay):
    e = _epochs(total, per_epoch)
    t = np.minimum(e, decay)
    np.testing.assert_allclose(nn.cosine_decay_lr(0.001, 0.3, total, per_epoch, decay),
                               0.001 + 0.5 * (0.3 - 0.001) * (1 + np.cos(np.pi * t / decay)), rtol=1e-14, atol=1e-17)
    np.testing.assert_allclose(nn.polynomial_decay_lr(0.3, 0.001, total, per_epoch, decay, 1.5),
                               (0.3 - 0.001) * (1 - t / decay) ** 1.5 + 0.001, rtol=1e-14, atol=0)
    cycles = decay * np.maximum(np.ceil(e / decay), 1)
    np.testing.assert_allclose(nn.polynomial_decay_lr(0.3, 0.001, total, per_epoch, decay, 1.5, True),
                               (0.3 - 0.001) * (1 - e / cycles) ** 1.5 + 0.001, rtol=1e-14, atol=0)
    np.testing.assert_allclose(nn.warmup_lr(0.3, total, per_epoch, decay), 0.3 * t / decay, rtol=1e-14, atol=0)


def test_piecewise_constant_lr():
    assert nn.piecewise_constant_lr((1, 3), (0.5, 0.25)) == [0.5, 0.25, 0.25]
    assert nn.piecewise_constant_lr([2, 2, 3], [0.5, 0.4, 0.3]) == [0.5, 0.5, 0.3]   # an empty piece
    assert nn.piecewise_constant_lr([], []) == []
    assert nn.piecewise_constant_lr([1], [-0.5]) == [-0.5]   # MindSpore checks only the type of a rate


@pytest.mark.parametrize("per_epoch", [1, 3])
def test_lists_agree_with_the_schedules(per_epoch):
    """With decay counted in epochs of one step, a list is its schedule evaluated at every step."""
    total = 13
    steps = np.arange(total) // per_epoch
    pairs = [(nn.exponential_decay_lr(0.1, 0.9, total, per_epoch, 4), nn.ExponentialDecayLR(0.1, 0.9, 4)),
             (nn.natural_exp_decay_lr(0.1, 0.2, total, per_epoch, 4, True), nn.NaturalExpDecayLR(0.1, 0.2, 4, True)),
             (nn.inverse_decay_lr(0.1, 0.9, total, per_epoch, 4), nn.InverseDecayLR(0.1, 0.9, 4)),
             (nn.cosine_decay_lr(0.01, 0.1, total, per_epoch, 4), nn.CosineDecayLR(0.01, 0.1, 4)),
             (nn.polynomial_decay_lr(0.1, 0.01, total, per_epoch, 4, 2.0, True),
              nn.PolynomialDecayLR(0.1, 0.01, 4, 2.0, True)),
             (nn.warmup_lr(0.1, total, per_epoch, 4), nn.WarmUpLR(0.1, 4))]
    for values, schedule in pairs:
        got = np.float32([float(schedule(step_tensor(int(s))).asnumpy()) for s in steps])
        assert_lr(got, np.array(values), 0.1, type(schedule).__name__)


# -- arguments --------------------------------------------------------------------------------------

BAD = [
    # (call, exception, words the message must contain)
    (lambda: nn.ExponentialDecayLR(1, 0.9, 4), TypeError, "learning_rate"),
    (lambda: nn.ExponentialDecayLR(0.1, 0.9, 4.0), TypeError, "decay_steps"),
    (lambda: nn.ExponentialDecayLR(0.1, 0.9, True), TypeError, "decay_steps"),
    (lambda: nn.ExponentialDecayLR(0.1, 0.9, 0), ValueError, "decay_steps"),
    (lambda: nn.ExponentialDecayLR(0.0, 0.9, 4), ValueError, "learning_rate"),
    (lambda: nn.ExponentialDecayLR(0.1, -0.9, 4), ValueError, "decay_rate"),
    (lambda: nn.ExponentialDecayLR(0.1, float("nan"), 4), ValueError, "decay_rate"),
    (lambda: nn.ExponentialDecayLR(0.1, 0.9, 4, is_stair=1), TypeError, "is_stair"),
    (lambda: nn.NaturalExpDecayLR(float("inf"), 0.9, 4), ValueError, "learning_rate"),
    (lambda: nn.NaturalExpDecayLR(0.1, 1, 4), TypeError, "decay_rate"),
    (lambda: nn.InverseDecayLR(0.1, 0.9, -1), ValueError, "decay_steps"),
    (lambda: nn.InverseDecayLR(0.1, 0.9, 4, "yes"), TypeError, "is_stair"),
    (lambda: nn.CosineDecayLR(0, 0.1, 4), TypeError, "min_lr"),
    (lambda: nn.CosineDecayLR(-0.01, 0.1, 4), ValueError, "min_lr"),
    (lambda: nn.CosineDecayLR(0.01, 0.0, 4), ValueError, "max_lr"),
    (lambda: nn.CosineDecayLR(0.01, 1, 4), TypeError, "max_lr"),
    (lambda: nn.CosineDecayLR(0.1, 0.1, 4), ValueError, "max_lr must be greater than min_lr"),
    (lambda: nn.CosineDecayLR(0.01, 0.1, 0), ValueError, "decay_steps"),
    (lambda: nn.PolynomialDecayLR(0.1, 0, 4, 0.5), TypeError, "end_learning_rate"),
    (lambda: nn.PolynomialDecayLR(0.1, -0.01, 4, 0.5), ValueError, "end_learning_rate"),
    (lambda: nn.PolynomialDecayLR(-0.1, 0.01, 4, 0.5), ValueError, "learning_rate"),
    (lambda: nn.PolynomialDecayLR(0.1, 0.01, 4, 0.0), ValueError, "power"),
    (lambda: nn.PolynomialDecayLR(0.1, 0.01, 4, 2), TypeError, "power"),
    (lambda: nn.PolynomialDecayLR(0.1, 0.01, 4, 0.5, update_decay_steps=None), TypeError, "update_decay_steps"),
    (lambda: nn.WarmUpLR(1, 2), TypeError, "learning_rate"),
    (lambda: nn.WarmUpLR(-0.1, 2), ValueError, "learning_rate"),
    (lambda: nn.WarmUpLR(0.1, 0), ValueError, "warmup_steps"),
    (lambda: nn.WarmUpLR(0.1, 2.0), TypeError, "warmup_steps"),
    (lambda: nn.piecewise_constant_lr({2: 0.1}, [0.1]), TypeError, "milestone"),
    (lambda: nn.piecewise_constant_lr([2], 0.1), TypeError, "learning_rates"),
    (lambda: nn.piecewise_constant_lr([2, 5], [0.1]), ValueError, "one length"),
    (lambda: nn.piecewise_constant_lr([2, 0], [0.1, 0.2]), ValueError, "milestone[1]"),
    (lambda: nn.piecewise_constant_lr([5, 2], [0.1, 0.2]), ValueError, "milestone[1]=2"),
    (lambda: nn.piecewise_constant_lr([2, 5], [0.1, 1]), TypeError, "learning_rates[1]"),
    (lambda: nn.exponential_decay_lr(0.1, 0.9, 0, 2, 1), ValueError, "total_step"),
    (lambda: nn.exponential_decay_lr(0.1, 0.9, 6, 2.0, 1), TypeError, "step_per_epoch"),
    (lambda: nn.natural_exp_decay_lr(0.1, 0.9, 6, 2, 0), ValueError, "decay_epoch"),
    (lambda: nn.inverse_decay_lr(0.1, 0, 6, 2, 1), TypeError, "decay_rate"),
    (lambda: nn.inverse_decay_lr(0.1, 0.5, 6, 2, 1, None), TypeError, "is_stair"),
    (lambda: nn.cosine_decay_lr(0.1, 0.01, 6, 2, 2), ValueError, "max_lr must be greater than min_lr"),
    (lambda: nn.cosine_decay_lr(1, 2.0, 6, 2, 2), TypeError, "min_lr"),
    (lambda: nn.polynomial_decay_lr(0.1, 0.01, 6, 2, 2, -0.5), ValueError, "power"),
    (lambda: nn.polynomial_decay_lr(0.1, 0.01, 6, 2, 2, 0.5, 1), TypeError, "update_decay_epoch"),
    (lambda: nn.warmup_lr(0.1, 6, 2, 0), ValueError, "warmup_epoch"),
    (lambda: nn.warmup_lr(1, 6, 2, 2), TypeError, "learning_rate"),
]


@pytest.mark.parametrize("call,exc,words", BAD, ids=[f"{i}-{w}" for i, (_, _, w) in enumerate(BAD)])
def test_bad_arguments(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    assert isinstance(info.value, nn.LearningRateError) and isinstance(info.value, GraphKernelError)
    assert words in str(info.value), str(info.value)


def test_mindspores_lenient_corners_are_kept():
    """What MindSpore's checks let through, accepted here too."""
    assert float(nn.WarmUpLR(0.0, 2)(step_tensor(1)).asnumpy()) == 0.0   # learning_rate >= 0 (its doc: > 0)
    assert nn.warmup_lr(0.0, 2, 1, 1) == [0.0, 0.0]
    nn.PolynomialDecayLR(0.01, 0.1, 4, 1.0)   # no check that learning_rate > end_learning_rate
    nn.CosineDecayLR(0.0, 0.1, 4)             # min_lr may be 0


def test_bad_global_step(setting):
    schedule = nn.WarmUpLR(0.1, 2)
    with pytest.raises(nn.LearningRateTypeError, match="WarmUpLR: global_step must be an int or float Tensor"):
        schedule(ms.Tensor(np.array(True)))
    # a Python int reaches construct as a constant (as in MindSpore); the schedule names what it needs
    with pytest.raises(nn.LearningRateTypeError, match="global_step must be an int or float Tensor, got int"):
        schedule(3)


def test_base_class_needs_construct():
    with pytest.raises(NotImplementedError, match="construct"):
        nn.LearningRateSchedule()(step_tensor(1))
