"""MindSpore's in-place optimizer primitives (P.ApplyMomentum, P.Adam, P.FusedCastAdamWeightDecay,
P.LambApplyOptimizerAssign, P.LambApplyWeightAssign): the Parameters they update and what the call
returns, against MindSpore 2.10 on its CPU (optimizers.json, recorded by record_optimizers.py there) in
every mode and target, fused and unfused. Where its CPU has no kernel (the Lamb pair) or ignores an
attribute (ApplyMomentum's use_nesterov and gradient_scale: three calls, one result), the documented
formula is checked against numpy instead (tests/op_cases.py)."""
import json
import os

import numpy as np
import pytest

from graphkernel import GraphKernelError, Parameter, Tensor
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from tests.tolerance import assert_close

DATA = json.load(open(os.path.join(os.path.dirname(__file__), "mindspore_data", "optimizers.json")))
W, G, M, V = (np.array(DATA["inputs"][k], np.float32) for k in ("w", "g", "m", "v"))
F = np.float32


class Step(Cell):
    """One optimizer primitive on Parameters of the cell, returning what the call returns."""

    def __init__(self, prim, params, extra):
        super().__init__()
        self.prim = prim
        self.names = [name for name, _ in params]
        for name, value in params:
            setattr(self, name, Parameter(Tensor(value), name=name))
        self.extra = extra   # (position, value): scalars and gradients, passed as constants

    def construct(self, *tensors):
        args = [getattr(self, n) for n in self.names]
        for (position, _), t in zip(self.extra, tensors):
            args.insert(position, t)
        return self.prim(*args)


def run(prim, params, extra):
    step = Step(prim, params, extra)
    out = step(*[Tensor(v) for _, v in extra])
    return out, {n: getattr(step, n).asnumpy() for n in step.names}


def test_apply_momentum_as_mindspore(two_settings):
    out, params = run(P.ApplyMomentum(), [("w", W), ("a", M)], [(2, F(0.1)), (3, G), (4, F(0.9))])
    want = DATA["ApplyMomentum"]
    assert isinstance(out, Tensor)   # MindSpore returns the variable alone
    assert_close(out.asnumpy(), np.array(want["out"], F))
    assert_close(params["w"], np.array(want["var"], F))
    assert_close(params["a"], np.array(want["accum"], F))


@pytest.mark.parametrize("nesterov", [False, True])
def test_adam_as_mindspore(two_settings, nesterov):
    scalars = [(3, F(0.9 ** 3)), (4, F(0.999 ** 3)), (5, F(0.01)), (6, F(0.9)), (7, F(0.999)), (8, F(1e-8)), (9, G)]
    out, params = run(P.Adam(use_nesterov=nesterov), [("w", W), ("m", M), ("v", V)], scalars)
    want = DATA["Adam-nesterov" if nesterov else "Adam"]
    for name, key in (("w", "var"), ("m", "m"), ("v", "v")):
        assert_close(params[name], np.array(want[key], F))
    # MindSpore 2.10's CPU returns zeros as the results; its documentation (and graphkernel) the new values
    assert_close(out[0].asnumpy(), params["w"])


@pytest.mark.parametrize("var_dtype", [np.float32, np.float16])
def test_fused_cast_adam_weight_decay_as_mindspore(two_settings, var_dtype):
    scalars = [(3, F(0.01)), (4, F(0.9)), (5, F(0.999)), (6, F(1e-8)), (7, F(0.1)), (8, G.astype(np.float16)), (9, F(2.0))]
    _, params = run(P.FusedCastAdamWeightDecay(), [("w", W.astype(var_dtype)), ("m", M), ("v", V)], scalars)
    want = DATA["FusedCastAdamWeightDecay-" + ("f32" if var_dtype == np.float32 else "f16")]
    assert params["w"].dtype == var_dtype
    assert_close(params["w"], np.array(want["var"]).astype(var_dtype))
    assert_close(params["m"], np.array(want["m"], F))
    assert_close(params["v"], np.array(want["v"], F))


def test_lamb_pair_updates_its_parameters(two_settings):
    f = [F(x) for x in (0.9, 0.1, 0.999, 0.001, 1e-6, 3.0, 1.0, 0.01)]
    out, params = run(P.LambApplyOptimizerAssign(), [("v", V), ("m", M), ("w", W)], [(0, G)] + [(4 + i, x) for i, x in enumerate(f)])
    update, v_new, m_new = (o.asnumpy() for o in out)
    assert_close(params["v"], v_new)
    assert_close(params["m"], m_new)
    assert_close(params["w"], W)   # var is read, not written
    w_norm, g_norm = np.linalg.norm(W), np.linalg.norm(update)
    out, params = run(P.LambApplyWeightAssign(), [("w", W)], [(0, F(w_norm)), (1, F(g_norm)), (2, F(0.01)), (3, update)])
    assert_close(params["w"], (W - F(0.01) * F(w_norm / g_norm) * update).astype(F), bitwise=False)


def test_a_tensor_where_a_parameter_is_updated_is_named(cpu):
    with pytest.raises(GraphKernelError, match="P.ApplyMomentum: variable must be a Parameter"):
        P.ApplyMomentum()(Tensor(W), Parameter(Tensor(M), name="a"), 0.1, Tensor(G), 0.9)
    with pytest.raises(GraphKernelError, match="gradient must be float16"):
        P.FusedCastAdamWeightDecay()(Parameter(Tensor(W), name="w"), Parameter(Tensor(M), name="m"),
                                     Parameter(Tensor(V), name="v"), *[Tensor(F(x)) for x in (0.01, 0.9, 0.999, 1e-8, 0.1)],
                                     Tensor(G), Tensor(F(1)))
