"""MindSpore 2.x's namespaces and Tensor methods generated from the op table (ir/ops Form,
graphkernel/ops/forms.py): every function graphkernel puts into `ops.`, `mint.` (= `ops.extend`) and
`mint.nn.functional` exists in MindSpore 2.10 with the same parameter names (forms.json, recorded there
by tests/mindspore_data/record.py), every Tensor method is one of 2.10's, and the sample calls of
tests/mindspore_data/form_calls.py give MindSpore 2.10's results on its CPU."""
import inspect
import json
import os

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, mint, ops
from graphkernel.ops import extend
from graphkernel.ops.forms import generated_names
from tests.mindspore_data.form_calls import CALLS, X
from tests.tolerance import assert_close

DATA = json.load(open(os.path.join(os.path.dirname(__file__), "mindspore_data", "forms.json")))

# MindSpore parameters graphkernel leaves out (a call giving one is a TypeError naming it): what no row
# expresses. ops.gelu's `approximate` is kept (graphkernel/ops/functional.py).
NOT_EXPRESSED = {"dtype", "rounding_mode", "inplace", "decimals", "beta", "threshold", "initial", "where"}
# graphkernel's Tensor methods that MindSpore 2.10 no longer has (kept for scripts of earlier versions)
EARLIER_METHODS = {"relu"}
# sample calls MindSpore 2.10 has no CPU kernel for: the recorded call that must give the same result
SAME_AS = {"mint.arctan": "Tensor.arctan", "mint.nn.functional.gelu": "ops.gelu",
           "mint.nn.functional.log_softmax": "ops.log_softmax", "mint.ones_like": None, "mint.zeros_like": None}


def resolve(path: str):
    obj = ms
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def test_the_recorded_names_are_the_generated_ones():
    names = generated_names()
    assert sorted(DATA["functions"]) == names["functions"], "re-run tests/mindspore_data/record.py"
    assert sorted(DATA["methods"]) == names["methods"], "re-run tests/mindspore_data/record.py"


@pytest.mark.parametrize("path", sorted(DATA["functions"]))
def test_each_function_has_mindspores_parameters(path):
    theirs = DATA["functions"][path]
    assert theirs != "missing", f"MindSpore 2.10 has no {path}"
    ours = list(inspect.signature(resolve(path)).parameters)
    if theirs is not None:   # None: MindSpore's signature is (*args, **kwargs)
        assert ours == [p for p in theirs if p in ours or p not in NOT_EXPRESSED]


def test_each_tensor_method_is_one_of_mindspores():
    assert {m for m, known in DATA["methods"].items() if not known} == EARLIER_METHODS
    x = Tensor(X)
    for name in DATA["methods"]:
        assert callable(getattr(x, name))


def test_ops_extend_is_mint():
    assert set(extend.__all__) <= set(mint.__all__)
    assert inspect.signature(extend.sum) == inspect.signature(mint.sum)


def encode(x):
    if isinstance(x, (tuple, list)):
        return [encode(i) for i in x]
    a = x.asnumpy()
    return {"dtype": str(a.dtype), "shape": list(a.shape), "values": a.astype(np.float64).ravel().tolist()}


def same(got, want):
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    assert (got["dtype"], got["shape"]) == (want["dtype"], want["shape"])
    dtype = np.dtype(want["dtype"])
    assert_close(np.array(got["values"]).astype(dtype), np.array(want["values"]).astype(dtype))


@pytest.mark.parametrize("key", sorted(CALLS))
def test_each_call_gives_mindspores_result(cpu, key):
    got = encode(CALLS[key](ms, Tensor))
    want = DATA["calls"][key]
    if "error" in want:   # MindSpore 2.10's CPU could not run it
        other = SAME_AS[key]
        if other is None:   # ones_like / zeros_like
            fill = 1.0 if "ones" in key else 0.0
            want = {"dtype": "float32", "shape": list(X.shape), "values": [fill] * X.size}
        else:
            want = DATA["calls"][other]
    same(got, want)


def test_a_parameter_mindspore_has_and_no_row_expresses_is_named():
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtype'"):
        ops.sum(Tensor(X), dtype=ms.float16)
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        ops.gelu(Tensor(X), approximate="erf")
