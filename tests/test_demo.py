"""`graphkernel demo`: the fusion example's two nets with fusion off and on, checked against numpy, with
MindSpore's dump files, kernel counts and an interleaved timing summary."""
import os

import numpy as np
import pytest

from graphkernel.tools.cli import main
from graphkernel.tools.demo import NetBasicFuse, NetCompositeFuse, reference, run_demo

SEED_DUMPS = {  # MindSpore's file names, graph 0 of each directory
    False: ["6_validate.dot", "hwopt_d_expand_end_graph_0.dot", "hwopt_d_simplify_end_graph_0.dot"],
    True: ["6_validate.dot", "hwopt_d_expand_end_graph_0.dot", "hwopt_d_simplify_end_graph_0.dot",
           "hwopt_d_fuse_basic_opt_end_graph_0.dot", "hwopt_d_composite_opt_end_graph_0.dot"],
}


@pytest.mark.parametrize("target", ["Ascend", "CPU"])
def test_demo_runs_both_nets_fused_and_unfused(tmp_path, target):
    lines = []
    results = run_demo(save_graphs_path=str(tmp_path), device_target=target, repeat=4, out=lines.append,
                       large=(64, 32))
    for net_cls, unfused_kernels in ((NetBasicFuse, 2), (NetCompositeFuse, 3)):
        name = net_cls.__name__
        off, on = results[(name, False)], results[(name, True)]
        assert off["matches_numpy"] and on["matches_numpy"]
        if target == "Ascend":
            assert (len(off["kernels"]), len(on["kernels"])) == (unfused_kernels, 1)
            assert on["kernels"][0].startswith("Fused_Mul_Add" + ("_Pow" if net_cls is NetCompositeFuse else ""))
        np.testing.assert_array_equal(off["result"], on["result"])
        for fusion in (False, True):
            directory = tmp_path / name / ("fusion_on" if fusion else "fusion_off")
            expected = SEED_DUMPS[fusion] + (["kernel_graph_0.dot"] if target == "Ascend" else []) + \
                ["compile_0.json"]   # the compile record, for graphkernel report
            # beside them, MindSpore 2.x's graph-kernel IR folder (graphkernel/observation/dump.py)
            assert sorted(os.listdir(directory)) == sorted(expected + ["verbose_ir_files"])
            files = results[(name, fusion)]["dump_files"]
            assert [os.path.basename(p) for p in files if os.path.dirname(p) == str(directory)] == expected
            ms_ir = [p for p in files if os.path.dirname(p) != str(directory)]
            assert ms_ir and all(os.path.dirname(p) == str(directory / "verbose_ir_files" / "graph_kernel")
                                 for p in ms_ir)
        for size in ("small", "large"):
            assert set(results[(name, size)]) == {False, True}
            assert all(t > 0 for t in results[(name, size)].values())
    summary = lines[lines.index(next(line for line in lines if "summary" in line)) + 1:]
    assert [line.split()[0] for line in summary] == ["NetBasicFuse", "NetCompositeFuse"]
    assert all(line.endswith("same result: True") for line in summary)


def test_reference_is_the_seed_arithmetic():
    x = np.array([[-1.0, 0.5]], np.float32)
    np.testing.assert_array_equal(reference(NetBasicFuse, x), [[-1.0, 2.0]])
    np.testing.assert_array_equal(reference(NetCompositeFuse, x), [[-1.0, 8.0]])


def test_demo_render_without_graphviz_fails_before_the_demo_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert main(["demo", "--render", "--save-graphs", str(tmp_path / "dumps"), "--repeat", "1"]) == 2
    err = capsys.readouterr().err
    assert "--render needs Graphviz's `dot` program" in err and "apt-get install graphviz" in err
    assert not (tmp_path / "dumps").exists()     # nothing ran


def test_demo_command_rejects_a_bad_repeat(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--repeat", "0"])
    assert exit_info.value.code == 2
    assert "--repeat: expected a positive integer, got '0'" in capsys.readouterr().err
