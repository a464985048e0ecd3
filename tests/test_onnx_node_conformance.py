"""Conformance: every ONNX backend node test case (onnx.backend.test.case.node.collect_testcases) whose
ops graphkernel supports, of every dtype, run with graph-kernel fusion on, against the outputs the case
ships.

The cases counted are committed in tests/onnx_node_cases.txt, and the test checks that the list is
exactly the cases whose ops we convert: the count cannot move by changing the list. A case passes when
every output has the expected dtype and shape and is within the case's own rtol/atol. The cases that
cannot pass are listed below, each with its reason: a tensor type graphkernel does not hold (float8,
string), a non-tensor (sequence, optional) graph input, Dropout in training mode
with a ratio above 0, a window length read at run time; the test then checks
that loading or running it fails with an OnnxImportError saying so. The module prints "ONNX node
conformance: N passed of M" at the end; docs/onnx.md says "passes N of those M cases".
"""
import importlib
import os
import pkgutil
import warnings

import numpy as np
import pytest

import onnx

from onnx import numpy_helper  # noqa: E402

from graphkernel import Tensor, context  # noqa: E402
import graphkernel.onnx as gx  # noqa: E402

# what the rejection names -> the cases: a tensor type graphkernel does not have (float8,
# float8e8m0, string), a non-tensor input, Dropout in training mode with a ratio above 0
# (random: graphkernel draws no random numbers).
LISTED_FOR_ONNX = "1.23.2"  # the onnx release whose cases the list was made from
_UNSUPPORTED = {
    "training mode": (   # Dropout in training mode with a ratio above 0: random, refused
        "test_training_dropout_default", "test_training_dropout_default_mask", "test_training_dropout",
        "test_training_dropout_mask",
    ),
    "FLOAT8E4M3FN": (
        "test_cast_FLOAT_to_FLOAT8E4M3FN", "test_cast_FLOAT16_to_FLOAT8E4M3FN",
        "test_cast_FLOAT8E4M3FN_to_FLOAT", "test_cast_FLOAT8E4M3FN_to_FLOAT16",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN", "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN",
        "test_castlike_FLOAT_to_FLOAT8E4M3FN", "test_castlike_FLOAT_to_FLOAT8E4M3FN_expanded",
        "test_castlike_FLOAT16_to_FLOAT8E4M3FN", "test_castlike_FLOAT16_to_FLOAT8E4M3FN_expanded",
        "test_castlike_FLOAT8E4M3FN_to_FLOAT", "test_castlike_FLOAT8E4M3FN_to_FLOAT_expanded",
        "test_castlike_FLOAT8E4M3FN_to_FLOAT16", "test_castlike_FLOAT8E4M3FN_to_FLOAT16_expanded",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN_expanded",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN_expanded",
        "test_quantizelinear_e4m3fn", "test_dequantizelinear_e4m3fn", "test_dequantizelinear_e4m3fn_float16", "test_dequantizelinear_e4m3fn_zero_point",
    ),
    "FLOAT8E4M3FNUZ": (
        "test_cast_FLOAT_to_FLOAT8E4M3FNUZ", "test_cast_FLOAT16_to_FLOAT8E4M3FNUZ",
        "test_cast_FLOAT8E4M3FNUZ_to_FLOAT", "test_cast_FLOAT8E4M3FNUZ_to_FLOAT16",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ", "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ",
        "test_castlike_FLOAT_to_FLOAT8E4M3FNUZ", "test_castlike_FLOAT_to_FLOAT8E4M3FNUZ_expanded",
        "test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ", "test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ_expanded",
        "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT", "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT_expanded",
        "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16", "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16_expanded",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ_expanded",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ_expanded",
    ),
    "FLOAT8E5M2": (
        "test_cast_FLOAT_to_FLOAT8E5M2", "test_cast_FLOAT16_to_FLOAT8E5M2", "test_cast_FLOAT8E5M2_to_FLOAT",
        "test_cast_FLOAT8E5M2_to_FLOAT16", "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2",
        "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2", "test_castlike_FLOAT_to_FLOAT8E5M2",
        "test_castlike_FLOAT_to_FLOAT8E5M2_expanded", "test_castlike_FLOAT16_to_FLOAT8E5M2",
        "test_castlike_FLOAT16_to_FLOAT8E5M2_expanded", "test_castlike_FLOAT8E5M2_to_FLOAT",
        "test_castlike_FLOAT8E5M2_to_FLOAT_expanded", "test_castlike_FLOAT8E5M2_to_FLOAT16",
        "test_castlike_FLOAT8E5M2_to_FLOAT16_expanded", "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2_expanded",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded",
        "test_quantizelinear_e5m2", "test_dequantizelinear_e5m2",
    ),
    "FLOAT8E5M2FNUZ": (
        "test_cast_FLOAT_to_FLOAT8E5M2FNUZ", "test_cast_FLOAT16_to_FLOAT8E5M2FNUZ",
        "test_cast_FLOAT8E5M2FNUZ_to_FLOAT", "test_cast_FLOAT8E5M2FNUZ_to_FLOAT16",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ", "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ",
        "test_castlike_FLOAT_to_FLOAT8E5M2FNUZ", "test_castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded",
        "test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ", "test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ_expanded",
        "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT", "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT_expanded",
        "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16", "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ_expanded",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ_expanded",
    ),
    "FLOAT8E8M0": (
        "test_cast_e8m0_FLOAT8E8M0_to_FLOAT", "test_cast_e8m0_FLOAT8E8M0_to_FLOAT16",
    ),
    "came after opset 21": (   # Cast's round_mode (opset 24), which only a cast to float8e8m0 reads
        "test_cast_e8m0_FLOAT_to_FLOAT8E8M0", "test_cast_e8m0_FLOAT16_to_FLOAT8E8M0",
    ),
    "must be known at compile time": (   # a window length read at run time: shapes are static here
        "test_blackmanwindow_expanded", "test_blackmanwindow_symmetric_expanded", "test_hammingwindow_expanded",
        "test_hammingwindow_symmetric_expanded", "test_hannwindow_expanded", "test_hannwindow_symmetric_expanded",
    ),
    "STRING": (
        "test_equal_string", "test_equal_string_broadcast",
    ),
    "sequence_type": (
        "test_identity_sequence",
    ),
    "optional_type": (
        "test_identity_opt",
    ),
}
EXPECTED_REJECTION = {name: what for what, names in _UNSUPPORTED.items() for name in names}


# onnx's case modules that make only cases of ops graphkernel.onnx does not load (pooling): their case
# generators take 8 of the 9 s of collecting every case, so collection leaves them out;
# test_the_modules_left_out_make_no_loadable_case (slow: it collects them) checks that nothing is lost
LEFT_OUT_MODULES = ("averagepool", "lppool", "maxpool")


def _loadable(case) -> bool:
    ops = set(gx.supported_ops())
    return all(n.op_type in ops and n.domain in ("", "ai.onnx") for n in case.model.graph.node)


def _collect():
    """onnx's node test cases (as its collect_testcases makes them) whose ops graphkernel.onnx loads."""
    import onnx.backend.test.case.node as node
    from onnx.backend.test.case.utils import import_recursive
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators warn about overflows they mean
        for _, name, is_package in pkgutil.iter_modules(node.__path__):
            if name not in LEFT_OUT_MODULES:
                module = importlib.import_module(f"{node.__name__}.{name}")
                if is_package:
                    import_recursive(module)
    return [c for c in node._NodeTestCases if _loadable(c)]


CASES = _collect()
RESULTS = {"passed": 0, "rejected": 0}
LIST_FILE = os.path.join(os.path.dirname(__file__), "onnx_node_cases.txt")


def _listed() -> list[str]:
    with open(LIST_FILE, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


LISTED = _listed()


@pytest.fixture(scope="module", autouse=True)
def summary(request):
    yield
    if not RESULTS["passed"] + RESULTS["rejected"]:   # the reference cases were deselected
        return
    line = (f"ONNX node conformance: {RESULTS['passed']} passed of {len(CASES)} cases whose ops graphkernel "
            f"supports ({RESULTS['rejected']} rejected as listed)")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + line)


def _array(a):
    return numpy_helper.to_array(a) if isinstance(a, onnx.TensorProto) else np.asarray(a)


def _run(case):
    cell = gx.load(case.model)
    for inputs, expected in case.data_sets:
        got = cell(*[Tensor(_array(a)) for a in inputs])
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
        for name, g, e in zip(cell.output_names, got, expected):
            g, e = g.asnumpy(), _array(e)
            assert g.dtype == e.dtype, f"output {name}: dtype {g.dtype}, expected {e.dtype}"
            assert g.shape == e.shape, f"output {name}: shape {g.shape}, expected {e.shape}"
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                       err_msg=f"output {name}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_node_case(case, cpu):
    context.set_context(enable_graph_kernel=True)
    what = EXPECTED_REJECTION.get(case.name)
    if what is not None:
        with pytest.raises(gx.OnnxImportError, match=what):
            _run(case)
        RESULTS["rejected"] += 1
        return
    _run(case)
    RESULTS["passed"] += 1


def test_every_listed_case_exists():
    """The expected-rejection list names real cases only (it cannot hide a typo'd or vanished case)."""
    assert onnx.__version__ == LISTED_FOR_ONNX, (
        f"the list was made from onnx {LISTED_FOR_ONNX}'s cases, this is onnx {onnx.__version__}: install the "
        "test extra (pip install -e '.[test]' pins it), or make the list anew for this release")
    names = {c.name for c in CASES}
    assert not sorted(set(EXPECTED_REJECTION) - names)


def test_the_committed_list_is_every_supported_case():
    """tests/onnx_node_cases.txt names exactly the cases whose ops graphkernel converts, each once: a
    converter added (its cases join) or a case dropped from the count shows in that file's diff."""
    names = [c.name for c in CASES]
    assert len(LISTED) == len(set(LISTED)), "a case is listed twice"
    missing, extra = sorted(set(names) - set(LISTED)), sorted(set(LISTED) - set(names))
    assert not missing and not extra, (f"cases of supported ops not in {LIST_FILE}: {missing[:10]}; listed cases "
                                       f"that are not (any more): {extra[:10]}; regenerate the list")


def test_enough_cases_pass():
    """The count over the committed list: 809 of its 905 cases pass (onnx 1.23.2); the rest are refused
    as listed above, so this floor is the listed count, not a guess."""
    assert len(LISTED) == 905
    assert len(LISTED) - len(EXPECTED_REJECTION) == 809


# A cross-section of the cases on the numba kernels (device_target Ascend): every op family once with
# fusion on, the ones whose fused and unfused kernels differ most also with fusion off. Every case runs
# on the numpy reference above; compiling numba kernels for all of them takes many minutes of the CI
# budget. A full run of all cases on the numba kernels (fusion on, and off) passed all but the eight
# rotary-embedding cases, which hit an executor bug with zero-size temporaries; since its fix they pass
# (one is here; tests/test_security_limits.py tests zero-size tensors directly).
NUMBA_CASES = (
    "test_add_bcast", "test_cast_FLOAT_to_FLOAT16", "test_div_int32_trunc", "test_erf", "test_sigmoid",
    "test_tanh", "test_expand_dim_changed", "test_gather_2d_indices", "test_gelu_default_2",
    "test_gelu_tanh_2", "test_gemm_all_attributes", "test_layer_normalization_4d_axis1",
    "test_logsoftmax_axis_1", "test_matmul_bcast", "test_max_float16", "test_pow_types_int64_float32",
    "test_reduce_max_keepdims_random", "test_reduce_mean_do_not_keepdims_random",
    "test_reduce_sum_default_axes_keepdims_random", "test_slice_neg_steps", "test_softmax_axis_0",
    "test_split_2d_uneven_split_opset18", "test_concat_3d_axis_1", "test_where_long_example",
    "test_mvn_expanded", "test_clip_splitbounds", "test_leakyrelu", "test_softplus",
    "test_greater_equal_bcast", "test_mean_example", "test_selu", "test_hardswish",
    "test_reduce_log_sum_exp_keepdims_random", "test_batchnorm_epsilon", "test_tile",
    "test_rotary_embedding_expanded", "test_div_int8", "test_mul_uint64", "test_celu_bfloat16",
    "test_quantizelinear_axis", "test_dequantizelinear_blocked", "test_cast_FLOAT_to_INT4",
    "test_castlike_UINT2_to_FLOAT16_expanded", "test_quantizelinear_int4", "test_dequantizelinear_uint4",
    "test_cast_FLOAT_to_FLOAT4E2M1", "test_quantizelinear_float4e2m1",
)
NUMBA_UNFUSED_TOO = ("test_gelu_default_2", "test_layer_normalization_4d_axis1", "test_logsoftmax_axis_1",
                     "test_rotary_embedding_expanded",
                     "test_mvn_expanded", "test_reduce_log_sum_exp_keepdims_random", "test_selu",
                     "test_batchnorm_epsilon", "test_where_long_example", "test_quantizelinear_axis",
                     "test_cast_FLOAT_to_INT4", "test_quantizelinear_int4", "test_cast_FLOAT_to_FLOAT4E2M1")


NUMBA_RUNS = [(n, True) for n in NUMBA_CASES] + [(n, False) for n in NUMBA_UNFUSED_TOO]
if os.environ.get("GRAPHKERNEL_CONFORMANCE_NUMBA") == "all":   # every passing case, fused and unfused
    NUMBA_RUNS = [(c.name, fuse) for c in CASES if c.name not in EXPECTED_REJECTION for fuse in (True, False)]


@pytest.mark.grid
@pytest.mark.parametrize("name,fuse", NUMBA_RUNS,
                         ids=lambda v: v if isinstance(v, str) else ("fused" if v else "unfused"))
def test_node_case_on_numba_kernels(name, fuse):
    context.set_context(device_target="Ascend", enable_graph_kernel=fuse)
    _run(next(c for c in CASES if c.name == name))


def test_numba_cross_section_names_real_cases():
    names = {c.name for c in CASES}
    assert set(NUMBA_CASES) <= names and set(NUMBA_UNFUSED_TOO) <= set(NUMBA_CASES)


@pytest.mark.slow
def test_the_modules_left_out_make_no_loadable_case():
    """LEFT_OUT_MODULES is a collection shortcut, not a filter: onnx's own collection of every case (which
    imports the modules left out) finds no loadable case that CASES lacks. When graphkernel.onnx learns
    one of their ops, this fails until the module leaves the list."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        every = collect_testcases()
    assert sorted(c.name for c in every if _loadable(c)) == sorted(c.name for c in CASES)
