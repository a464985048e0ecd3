"""Record what MindSpore 2.10's in-place optimizer primitives compute on its CPU into optimizers.json
(tests/test_optimizer_primitives.py): the inputs, and for each call the result and the Parameters after
it, or the error (the Lamb pair has no CPU kernel there). Run it in MindSpore's environment:

    MINDSPORE_PYTHON tests/mindspore_data/record_optimizers.py > tests/mindspore_data/optimizers.json
"""
import numpy as np, mindspore as ms, json
from mindspore import Tensor, Parameter
from mindspore.ops import operations as P
ms.set_device("CPU")
rng = np.random.default_rng(3)
def arr(*s, lo=-1, hi=1): return (rng.random(s) * (hi - lo) + lo).astype(np.float32)
W, G, M, V = arr(2, 3), arr(2, 3), arr(2, 3), arr(2, 3, lo=0.1, hi=1)
out = {"inputs": {"w": W.tolist(), "g": G.tolist(), "m": M.tolist(), "v": V.tolist()}}
def run(key, fn):
    try:
        r = fn(); out[key] = r
    except Exception as e:
        out[key] = {"error": str(e).strip().splitlines()[0][:200]}
def mom(nesterov, scale):
    var, acc = Parameter(Tensor(W), "w"), Parameter(Tensor(M), "a")
    r = P.ApplyMomentum(use_nesterov=nesterov, gradient_scale=scale)(var, acc, Tensor(np.float32(0.1)), Tensor(G), Tensor(np.float32(0.9)))
    return {"out": r.asnumpy().tolist(), "var": var.asnumpy().tolist(), "accum": acc.asnumpy().tolist()}
run("ApplyMomentum", lambda: mom(False, 1.0))
run("ApplyMomentum-nesterov", lambda: mom(True, 1.0))
run("ApplyMomentum-scale", lambda: mom(False, 0.5))
def adam(nesterov):
    var, m, v = Parameter(Tensor(W), "w"), Parameter(Tensor(M), "m"), Parameter(Tensor(V), "v")
    r = P.Adam(use_nesterov=nesterov)(var, m, v, Tensor(np.float32(0.9**3)), Tensor(np.float32(0.999**3)), Tensor(np.float32(0.01)), Tensor(np.float32(0.9)), Tensor(np.float32(0.999)), Tensor(np.float32(1e-8)), Tensor(G))
    return {"out": [x.asnumpy().tolist() for x in r], "var": var.asnumpy().tolist(), "m": m.asnumpy().tolist(), "v": v.asnumpy().tolist()}
run("Adam", lambda: adam(False))
run("Adam-nesterov", lambda: adam(True))
def fcawd(vdt):
    var, m, v = Parameter(Tensor(W.astype(vdt)), "w"), Parameter(Tensor(M), "m"), Parameter(Tensor(V), "v")
    r = P.FusedCastAdamWeightDecay()(var, m, v, Tensor(np.float32(0.01)), Tensor(np.float32(0.9)), Tensor(np.float32(0.999)), Tensor(np.float32(1e-8)), Tensor(np.float32(0.1)), Tensor(G.astype(np.float16)), Tensor(np.float32(2.0)))
    return {"out": [x.asnumpy().astype(np.float64).tolist() for x in r], "var": var.asnumpy().astype(np.float64).tolist(), "m": m.asnumpy().tolist(), "v": v.asnumpy().tolist()}
run("FusedCastAdamWeightDecay-f32", lambda: fcawd(np.float32))
run("FusedCastAdamWeightDecay-f16", lambda: fcawd(np.float16))
def lamb_opt():
    v, m, var = Parameter(Tensor(V), "v"), Parameter(Tensor(M), "m"), Parameter(Tensor(W), "w")
    f = lambda x: Tensor(np.array([x], np.float32))
    r = P.LambApplyOptimizerAssign()(Tensor(G), v, m, var, f(0.9), f(0.1), f(0.999), f(0.001), f(1e-6), f(3.0), f(1.0), f(0.01))
    return {"out": [x.asnumpy().tolist() for x in r], "v": v.asnumpy().tolist(), "m": m.asnumpy().tolist()}
run("LambApplyOptimizerAssign", lamb_opt)
def lamb_w():
    var = Parameter(Tensor(W), "w")
    f = lambda x: Tensor(np.array([x], np.float32))
    r = P.LambApplyWeightAssign()(f(2.0), f(0.5), f(0.01), Tensor(G), var)
    return {"out": r.asnumpy().tolist(), "var": var.asnumpy().tolist()}
run("LambApplyWeightAssign", lamb_w)
print(json.dumps(out))
