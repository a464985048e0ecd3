"""The dtype sweep of MindSpore's gradient primitives (`ops.operations._grad_ops`) that graphkernel has:
each primitive's construction, its inputs (shape and how to fill them), and the dtype combinations tried.
tests/test_grad_dtypes.py runs them on graphkernel; record_grads.py ran them on MindSpore 2.10's CPU
(grads.json). Only numpy is imported."""
import numpy as np

# name: (construction keywords, [(shape, fill) per input]); fill: "real", "positive", "mask", "unit", or
# "mean:0"/"var:0" (input 0's row statistics, as LayerNorm gives them), "apart:0" (input 0 moved by +-1:
# no ties, where MindSpore's CPU splits a tie between x1 and x2 and graphkernel gives it to x1)
CASES = {
    "SoftmaxGrad": ({}, [((3, 4), "unit"), ((3, 4), "real")]),
    "LogSoftmaxGrad": ({}, [((3, 4), "real"), ((3, 4), "real")]),
    "GeLUGrad": ({}, [((3, 4), "real"), ((3, 4), "real"), ((3, 4), "real")]),
    "SigmoidGrad": ({}, [((3, 4), "unit"), ((3, 4), "real")]),
    "TanhGrad": ({}, [((3, 4), "unit"), ((3, 4), "real")]),
    "SqrtGrad": ({}, [((3, 4), "positive"), ((3, 4), "real")]),
    "ReluGrad": ({}, [((3, 4), "real"), ((3, 4), "real")]),
    "BiasAddGrad": ({}, [((2, 3, 4), "real")]),
    "LayerNormGrad": ({"begin_norm_axis": 1, "begin_params_axis": 1},
                      [((3, 4), "real"), ((3, 4), "real"), ((3, 1), "var:0"), ((3, 1), "mean:0"), ((4,), "real")]),
    "MaximumGrad": ({}, [((3, 4), "real"), ((3, 4), "apart:0"), ((3, 4), "real")]),
    "MinimumGrad": ({}, [((3, 4), "real"), ((3, 4), "apart:0"), ((3, 4), "real")]),
    "SigmoidCrossEntropyWithLogitsGrad": ({}, [((3, 4), "real"), ((3, 4), "unit"), ((3, 4), "real")]),
    "DropoutGrad": ({"keep_prob": 0.5}, [((3, 4), "real"), ((3, 4), "mask")]),
    "FastGeLUGrad": ({}, [((3, 4), "real"), ((3, 4), "real")]),
}

DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8", "uint8", "bool")


def combos(n: int):
    """(label, dtype of each input): every input in one dtype, then each input alone in float16 or
    float64 beside float32 ones (mixed float widths)."""
    out = [(dt, (dt,) * n) for dt in DTYPES]
    for i in range(n):
        for dt in ("float16", "float64", "int32"):
            out.append((f"input{i}-{dt}", tuple(dt if k == i else "float32" for k in range(n))))
    return out


def inputs(name: str, dtypes) -> list:
    rng = np.random.default_rng(7)
    out = []
    for ((shape, fill), dt) in zip(CASES[name][1], dtypes):
        if fill.startswith(("mean:", "var:", "apart:")):
            kind, source = fill.split(":")
            base = out[int(source)].astype(np.float64)
            if kind == "apart":
                out.append((base + rng.choice([-1.0, 1.0], shape)).astype(dt))
            else:
                out.append(getattr(base, kind)(axis=-1, keepdims=True).astype(dt))
            continue
        if fill == "mask":
            a = (rng.random(shape) < 0.5).astype(np.float64)
        elif fill == "positive":
            a = rng.random(shape) * 2 + 0.5
        elif fill == "unit":
            a = rng.random(shape) * 0.8 + 0.1
        else:
            a = rng.standard_normal(shape) * 2
        if dt not in ("float16", "float32", "float64"):
            a = np.round(a * 3)
        out.append(a.astype(dt))
    return out
