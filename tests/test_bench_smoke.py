"""`graphkernel bench` on tiny sizes: the harness runs, verifies every implementation and writes its
outputs with the fields the docs and the report read. No time is asserted."""
import dataclasses
import json

import pytest

from graphkernel.bench import harness, report
from graphkernel.bench.cli import BenchError, run, workload_list
from graphkernel.cli import main


@pytest.fixture(scope="module")
def results():
    settings = dataclasses.replace(harness.TINY, peers=False, progress=False)
    return run(settings, only="NetBasicFuse,W1", log=lambda line: None)


def test_every_chosen_workload_is_measured_and_verified(results):
    names = [e["name"] for e in results["workloads"]]
    assert names == ["NetBasicFuse 4x4", "W1 x*2+1 8x1024"]
    for e in results["workloads"]:
        assert e["verified"] is True
        for impl in ("fused", "unfused", "numpy"):
            assert e["impls"][impl]["verify"]["ok"] is True
            assert e["impls"][impl]["time"]["calls"] >= 1
            assert e["impls"][impl]["time"]["q25_s"] <= e["impls"][impl]["time"]["median_s"]
        assert e["impls"]["fused"]["kernels"] < e["impls"]["unfused"]["kernels"]
        assert {"fused/unfused", "fused/numpy"} <= set(e["ratios"])
        assert "first_s" in e["impls"]["fused"]["compile"]
        assert e["impls"]["fused"]["peak_bytes"] >= 0 and isinstance(e["memory_ok"], bool)
        assert e["impls"]["fused"]["profile"]["kernels_s"] > 0
        assert "bound" not in e  # tiny sizes: launch costs, not traffic (harness.BOUND_MIN_ELEMENTS)


def test_environment_notes_the_openblas_variables(results):
    env = results["environment"]
    assert {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "openblas_vars_set", "numba_threading_layer"} <= set(env)


def test_outputs_are_written(results, tmp_path):
    paths = report.write(results, str(tmp_path))
    assert json.loads(open(paths["json"]).read())["workloads"][0]["name"] == "NetBasicFuse 4x4"
    table = open(paths["markdown"]).read()
    assert "| NetBasicFuse 4x4 | 2→1 |" in table


def test_verify_fails_outside_the_tolerance():
    import numpy as np
    e = np.ones(4, np.float32)
    assert harness.verify([e * (1 + 1e-6)], [e])["ok"]
    assert not harness.verify([e * (1 + 1e-4)], [e])["ok"]


def test_only_that_names_nothing_is_an_error(capsys):
    with pytest.raises(BenchError, match="names no workload"):
        workload_list(harness.TINY, only="nonesuch")
    assert main(["bench", "--tiny", "--only", "nonesuch"]) == 2
    assert "names no workload" in capsys.readouterr().err


def test_training_workloads_verify_and_count_kernels_per_phase():
    settings = dataclasses.replace(harness.TINY, peers=False, progress=False, cold_compile=False)
    results = run(settings, only="T1,T2,BERT layer fwd", log=lambda line: None)
    by_name = {e["name"]: e for e in results["workloads"]}
    assert set(by_name) == {"T1 LayerNormGrad(1024) 8x1024", "T2 SoftmaxGrad(128) 8x1024",
                            "BERT layer fwd+bwd b2 s8 h64"}
    for e in by_name.values():
        assert e["verified"] is True
        fused, unfused = e["impls"]["fused"]["phases"], e["impls"]["unfused"]["phases"]
        assert 0 < fused["backward"] < unfused["backward"]
        assert sum(fused.values()) == e["impls"]["fused"]["kernels"]
    assert "numpy" in by_name["T1 LayerNormGrad(1024) 8x1024"]["impls"]
    step = by_name["BERT layer fwd+bwd b2 s8 h64"]
    assert "numpy" not in step["impls"] and "numpy cannot differentiate" in step["no_array_code"]
    assert "outside_opaque fused/unfused" in step["ratios"]
