"""The op rows' sample calls (tests/op_cases.py): the reference equals an independent numpy expression,
the device, unfused and fused, equals the reference bit for bit (these rows move or pick data, or
compute on integers; a case marked `bitwise=False`, a float sum whose order the kernel picks, within the
dtype's tolerance), and bad attributes or inputs fail with an error naming the op and the rule."""
import numpy as np
import pytest

from graphkernel.compiler import compile_graph
from graphkernel.expanders import EXPANDERS
from graphkernel.settings.options import CompileOptions
from fusion_helpers import options
from ir import GraphBuilder
from ir.dtypes import as_dtype
from ir.errors import IRError
from ir.graph import TensorType
from ir.interpret import interpret
from ir.ops import OPS
from op_cases import BAD, CASES, TESTED_ELSEWHERE
from op_samples import kernel_ops
from tolerance import assert_close

seen: dict = {}
for _c in CASES:
    seen[_c.op] = seen.get(_c.op, 0) + 1
    _c.id = f"{_c.op}-{seen[_c.op]}"


def _graph(case, *, consumer: bool = False):
    b = GraphBuilder(*[TensorType(a.shape, as_dtype(a.dtype)) for a in case.arrays])
    outs = b.ops(case.op, *b.inputs, **case.attrs)
    if consumer:   # an elementwise reader of each float result: something to fuse with
        outs = tuple(b.op("Mul", v, b.scalar(2, v)) if v.dtype.is_float else v for v in outs)
    return b.graph(*outs)


def _results(value):
    return value if isinstance(value, tuple) else (value,)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_reference_equals_numpy(case):
    got = interpret(_graph(case), case.arrays)
    want = _results(case.numpy(*case.arrays))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, case.id
        assert_close(g, w.astype(g.dtype), bitwise=case.bitwise, err_msg=case.id)


@pytest.mark.grid
@pytest.mark.parametrize("consumer", [False, True], ids=["alone", "with-consumer"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_device_unfused_and_fused_equal_the_reference(case, consumer):
    graph = _graph(case, consumer=consumer)
    want = interpret(graph, case.arrays)
    for opts in (CompileOptions(), options()):
        compiled = compile_graph(graph, opts, eager=True)
        for got, ref in zip(compiled.run_arrays(case.arrays), want):
            assert got.shape == ref.shape
            assert_close(got, ref, bitwise=case.bitwise, err_msg=case.id)


@pytest.mark.parametrize("bad", BAD, ids=[f"{b.op}-{i}" for i, b in enumerate(BAD)])
def test_bad_calls_name_the_op_and_the_rule(bad):
    b = GraphBuilder(*[TensorType(a.shape, as_dtype(a.dtype)) for a in bad.arrays])
    with pytest.raises(IRError, match=rf"{bad.op}.*{bad.match}"):
        b.ops(bad.op, *b.inputs, **bad.attrs)


def test_every_row_has_a_case_or_says_where_it_is_tested():
    """Elementwise rows are reached by the generated kernel tests, composite rows by the expander tests
    (tests/test_expanders.py, which checks each has a case); every other row needs a case here."""
    cased = {c.op for c in CASES}
    for name in OPS:
        if name in cased or name in kernel_ops() or name in EXPANDERS:
            continue
        assert name in TESTED_ELSEWHERE, f"{name}: add a case to tests/op_cases.py (or say in TESTED_ELSEWHERE " \
                                         "where it is tested)"
    assert not cased & set(TESTED_ELSEWHERE)
