"""The dtype rules of MindSpore's gradient primitives (`_grad_ops`) as MindSpore 2.10 applies them: every
primitive graphkernel has, over every dtype and mixed float widths (tests/mindspore_data/grad_calls.py),
against what MindSpore 2.10 did on its CPU (grads.json, recorded by record_grads.py there): where it
computed, the same result dtypes and values within the dtype's tolerance; where it refused, a clear error
of ours. Mixed float widths are MindSpore's implicit conversion (ir/ops Api.casts): each float input
converted to the leading input's dtype, results in the dtypes MindSpore returns."""
import json
import os

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import GraphKernelError, Tensor, context
from graphkernel.nn import Cell
from graphkernel.ops.operations import _grad_ops as G
from tests.mindspore_data.grad_calls import CASES, combos, inputs
from tests.tolerance import assert_close

DATA = json.load(open(os.path.join(os.path.dirname(__file__), "mindspore_data", "grads.json")))
# MindSpore 2.10's CPU runs no SoftmaxGrad call ("The pointer[value] is null"): it follows LogSoftmaxGrad's
# rules here, and its values are checked against numpy by the op-table tests
NO_MINDSPORE = {"SoftmaxGrad"}
KEYS = [(name, label, dtypes) for name, (_, specs) in CASES.items() for label, dtypes in combos(len(specs))]


def call(name, dtypes):
    kwargs = CASES[name][0]
    out = getattr(G, name)(**kwargs)(*[Tensor(a) for a in inputs(name, dtypes)])
    return out if isinstance(out, tuple) else (out,)


def close(got: np.ndarray, expected: np.ndarray, dtypes) -> None:
    """Within the result dtype's tolerance; float16's where an input was float16 (it rounds before either
    kernel converts it), float32's for float64 results (MindSpore 2.10's CPU kernels compute these
    gradients at float32 precision)."""
    wide = {np.dtype(np.float64): np.float32}.get(expected.dtype)
    narrow = np.float16 if "float16" in dtypes else wide
    if narrow is not None and expected.dtype.kind == "f":
        got, expected = got.astype(narrow), expected.astype(narrow)
    assert_close(got, expected)


def check(name, label, dtypes):
    want = DATA[f"{name}/{label}"]
    if isinstance(want, dict) and "error" in want:
        with pytest.raises(GraphKernelError, match=name):
            call(name, dtypes)
        return
    want = want if isinstance(want, list) else [want]
    got = call(name, dtypes)
    assert [str(g.asnumpy().dtype) for g in got] == [w["dtype"] for w in want]
    for g, w in zip(got, want):
        close(g.asnumpy(), np.array(w["values"]).reshape(w["shape"]).astype(w["dtype"]), dtypes)


@pytest.mark.parametrize("name, label, dtypes", [k for k in KEYS if k[0] not in NO_MINDSPORE],
                         ids=[f"{k[0]}/{k[1]}" for k in KEYS if k[0] not in NO_MINDSPORE])
def test_each_combination_as_mindspore(cpu, name, label, dtypes):
    context.set_context(mode=context.PYNATIVE_MODE)
    check(name, label, dtypes)


def test_softmax_grad_follows_log_softmax_grads_rules(cpu):
    y = Tensor(np.full((2, 3), 1 / 3, np.float16))
    dy = Tensor(np.ones((2, 3), np.float32))
    assert G.SoftmaxGrad()(y, dy).dtype == ms.float16
    with pytest.raises(GraphKernelError, match="SoftmaxGrad"):
        G.SoftmaxGrad()(Tensor(np.ones((2, 3), np.int32)), Tensor(np.ones((2, 3), np.int32)))


SAMPLE = [("ReluGrad", "bool"), ("MaximumGrad", "int32"), ("MaximumGrad", "input1-float16"),
          ("SigmoidGrad", "input0-float16")]


@pytest.mark.parametrize("name, label", SAMPLE)
def test_in_a_graph_on_the_device(two_settings, name, label):
    """The conversions are nodes of the traced graph: they compile and fuse like any Cast."""
    dtypes = dict((lab, d) for lab, d in combos(len(CASES[name][1])))[label]

    class Net(Cell):
        def construct(self, *args):
            out = getattr(G, name)(**CASES[name][0])(*args)
            return out if isinstance(out, tuple) else (out,)

    want = DATA[f"{name}/{label}"]
    want = want if isinstance(want, list) else [want]
    got = Net()(*[Tensor(a) for a in inputs(name, dtypes)])
    assert [str(g.asnumpy().dtype) for g in got] == [w["dtype"] for w in want]
    for g, w in zip(got, want):
        close(g.asnumpy(), np.array(w["values"]).reshape(w["shape"]).astype(w["dtype"]), dtypes)
