"""`graphkernel run MODEL.onnx` from a shell: a subprocess `python -m graphkernel run ...` on models the
tests write. Exit 0 with outputs, kernel table and step time; exit 2 with one line on stderr otherwise (the
error cases call the command's main in this process: the same code after the interpreter's start)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import onnx

from onnx import TensorProto, helper  # noqa: E402

from graphkernel.onnx.examples import bert_layer_model  # noqa: E402
from graphkernel.tools.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def graphkernel(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "graphkernel", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd or ROOT, timeout=600)


@pytest.fixture(scope="module")
def bert_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "bert.onnx"
    onnx.save(bert_layer_model(hidden=32, heads=4, seq=8, batch=2), path)
    return path


@pytest.fixture(scope="module")
def dynamic_path(tmp_path_factory):
    graph = helper.make_graph([helper.make_node("Tanh", ["x"], ["y"])], "tanh",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    path = tmp_path_factory.mktemp("onnx") / "tanh.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _kernel_count(stdout: str) -> int:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("kernels ("))
    return int(line[len("kernels ("):].split(")")[0])


def test_run_random_inputs_fused_and_unfused(bert_path, tmp_path):
    fused = graphkernel("run", bert_path, "--random", "--device-target", "CPU", "--repeat", "3",
                        "--save-graphs", tmp_path / "dumps")
    assert fused.returncode == 0, fused.stderr
    out = fused.stdout
    assert "y  float32[2, 8, 32]  checksum sum=" in out
    assert "step time: median" in out and "Fused_" in out
    assert (tmp_path / "dumps" / "6_validate.dot").exists()
    unfused = graphkernel("run", bert_path, "--no-graph-kernel", "--device-target", "CPU", "--repeat", "2")
    assert unfused.returncode == 0, unfused.stderr
    assert _kernel_count(unfused.stdout) > _kernel_count(out)


def test_run_a_model_with_dim_params_without_dim(dynamic_path, tmp_path):
    """A dim_param needs no --dim: random inputs size it 1, given inputs whatever their arrays are."""
    res = graphkernel("run", dynamic_path, "--random", "--repeat", "2", "--device-target", "CPU")
    assert res.returncode == 0, res.stderr
    assert "x  float32[1, 4]" in res.stdout
    for batch in (3, 5):
        np.savez(tmp_path / f"in{batch}.npz", x=np.ones((batch, 4), np.float32))
        res = graphkernel("run", dynamic_path, "--inputs", tmp_path / f"in{batch}.npz", "--repeat", "2", "--check")
        assert res.returncode == 0, res.stderr
        assert f"y  float32[{batch}, 4]" in res.stdout and "every kernel within tolerance" in res.stdout


def test_run_inputs_from_npz_on_numba_with_profile(dynamic_path, tmp_path):
    x = np.linspace(-1, 3, 12, dtype=np.float32).reshape(3, 4)
    np.savez(tmp_path / "in.npz", x=x)
    res = graphkernel("run", dynamic_path, "--inputs", tmp_path / "in.npz", "--profile", tmp_path / "prof",
                      "--repeat", "2")
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("y  float32[3, 4]"))
    checksum = float(line.split("checksum sum=")[1].split()[0])
    assert checksum == pytest.approx(float(np.tanh(x).sum(dtype=np.float64)), rel=1e-5)
    assert "block_dim" in res.stdout and "Profiler: 1 kernels, 2 steps" in res.stdout
    assert "step_trace.csv, trace.json" in res.stdout
    assert (tmp_path / "prof" / "profiler" / "kernel_details.csv").exists()


@pytest.mark.grid
@pytest.mark.parametrize("args,message", [
    (["run", "missing.onnx"], "missing.onnx"),
    (["run", "{dynamic}", "--dim", "btch=4"], "dim 'btch': the model has no dynamic dim of that name (did you mean "
                                              "'batch'?); its dynamic dims: 'batch'"),
    (["run", "{dynamic}", "--inputs", "{bad_npz}"], "no array for input"),
    (["run", "{not_onnx}"], "not an ONNX model"),
    (["run", "{dynamic}", "--dim", "batch=two"], "NAME=SIZE"),
    (["run", "{dynamic}", "--flags=--opt_levle=2", "--device-target", "CPU", "--dim", "batch=2"],
     "opt_levle"),
    (["run", "{dynamic}", "--inputs", "{truncated_npz}"], "cannot read inputs from"),
    (["run", "{dynamic}", "--inputs", "{int8_npz}"], "input 'x': dtype int8, the model declares float32"),
    (["run", "{dynamic}", "--inputs", "{good_npz}", "--dim", "batch=2"], "--dim sizes dynamic dims of --random"),
    (["run", "{dynamic}", "--seed", "-1"], "--seed: expected a non-negative integer, got '-1'"),
    (["run", "{dynamic}", "--repeat", "0"], "--repeat: expected a positive integer, got '0'"),
])
def test_errors_exit_2_with_one_line(dynamic_path, tmp_path, monkeypatch, capsys, args, message):
    np.savez(tmp_path / "bad.npz", z=np.zeros(3))
    np.savez(tmp_path / "good.npz", x=np.zeros((2, 4), np.float32))
    np.savez(tmp_path / "int8.npz", x=np.zeros((2, 4), np.int8))
    (tmp_path / "truncated.npz").write_bytes((tmp_path / "good.npz").read_bytes()[:100])
    (tmp_path / "junk.onnx").write_bytes(b"\x00garbage, not a protobuf \xff" * 3)
    paths = {"dynamic": dynamic_path, "bad_npz": tmp_path / "bad.npz", "not_onnx": tmp_path / "junk.onnx",
             "good_npz": tmp_path / "good.npz", "int8_npz": tmp_path / "int8.npz",
             "truncated_npz": tmp_path / "truncated.npz"}
    monkeypatch.chdir(tmp_path)
    try:
        status = main([a.format(**paths) for a in args])
    except SystemExit as e:   # argparse's usage errors
        status = e.code
    stderr = capsys.readouterr().err
    assert status == 2
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1 or stderr.startswith("usage:")


def test_opt_level_0_says_fusion_is_off_and_outputs_print_under_headings(dynamic_path):
    res = graphkernel("run", dynamic_path, "--dim", "batch=2", "--flags=--opt_level=0", "--print-outputs",
                      "--device-target", "CPU", "--repeat", "1", "--seed", "3")
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0].endswith("target CPU, graph kernel off (opt_level 0)")
    (line,) = [ln for ln in out if ln.startswith("  y  float32[2, 4]")]
    assert "mean_abs=" in line and "|x|" not in line    # the output is y: no name in the figure's label
    x = np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)
    printed = out[out.index(line) + 1] + out[out.index(line) + 2]
    assert np.allclose(eval(printed), np.tanh(x), atol=1e-7)   # noqa: S307 - numpy's own text of an array
    heading = out[out.index("kernels (1):") + 1].split()
    assert heading == ["#", "name", "op", "types", "block_dim", "inputs", "->", "outputs", "kernel"]
    assert out[out.index("kernels (1):") + 2].split()[:3] == ["0", "Default/Tanh_0/Tanh-op0", "Tanh"]


def test_a_reader_that_leaves_early_ends_the_run_quietly(dynamic_path):
    """`graphkernel run ... | head -1`: no BrokenPipeError traceback."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               PYTHONUNBUFFERED="1")   # every line written at once: the pipe breaks while the run prints
    proc = subprocess.Popen([sys.executable, "-m", "graphkernel", "run", str(dynamic_path), "--dim", "batch=2",
                             "--device-target", "CPU", "--repeat", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    proc.stdout.readline()
    proc.stdout.close()   # the reader leaves, as `head -1` does
    stderr = proc.communicate(timeout=600)[1].decode()
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


def test_usage_error_exits_2():
    res = graphkernel("run")
    assert res.returncode == 2 and "usage" in res.stderr
