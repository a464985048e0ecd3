"""Saves clean up after themselves (graphkernel/checkpoint.py, docs/checkpoints.md).

A process SIGKILLed while it saves leaves its temporary file (`.<name>.<12 hex>.tmp`) beside the target:
the next save or load of that target removes every such file no running save holds, a temporary file is
never loaded as a checkpoint, and the target itself is always a whole checkpoint (the old one or the new
one). The file we write ourselves is one any safetensors reader reads, byte for byte the same entries.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import safetensors.numpy

import graphkernel as ms
from graphkernel import checkpoint
from graphkernel.checkpoint import CheckpointError
from graphkernel.tensor import Parameter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMP = re.compile(r"\.net\.ckpt\.[0-9a-f]{12}\.tmp")

SAVER = textwrap.dedent("""
    import sys
    import time
    import numpy as np
    import graphkernel as ms
    from graphkernel import checkpoint
    from graphkernel.tensor import Parameter

    path, announce = sys.argv[1], sys.argv[2] == "announce"
    params = [Parameter(np.full((1024, 1024), i, np.float32), name=f"p{i}") for i in range(8)]   # 32 MiB
    write = checkpoint._write_safetensors

    def announced(f, arrays, metadata):   # writes half a checkpoint, says so, and waits there to be killed
        write(f, {k: arrays[k] for k in sorted(arrays)[:4]}, metadata)
        f.flush()
        print("writing", flush=True)
        time.sleep(3600)

    if announce:
        checkpoint._write_safetensors = announced
    print("ready", flush=True)
    step = 0
    while True:
        step += 1
        params[0].set_data(np.full((1024, 1024), step, np.float32))
        ms.save_checkpoint(params, path, append_dict={"step": step})
""")


def _saver(path, announce: bool) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SAVER, str(path), "announce" if announce else "loop"],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ROOT})


def _killed_saves(path, rng) -> None:
    """Four saving processes at once, killed: one looping over saves, at a random moment; three each
    half-way through its first write (a save removes only the files no running save holds, so all four
    files can be left)."""
    looping, *halfway = savers = [_saver(path, announce=k > 0) for k in range(4)]
    try:
        for saver in halfway:
            assert saver.stdout.readline().strip() == "ready"
            assert saver.stdout.readline().strip() == "writing"
        assert looping.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.6))
    finally:
        for saver in savers:
            saver.kill()
            saver.wait()


def _temps(directory) -> list[str]:
    return sorted(f for f in os.listdir(directory) if TEMP.fullmatch(f))


def test_the_files_of_killed_saves_are_removed_at_the_next_save_or_load(tmp_path):
    on_load, on_save = tmp_path / "load", tmp_path / "save"
    on_load.mkdir()
    _killed_saves(on_load / "net.ckpt", np.random.default_rng(int.from_bytes(os.urandom(4), "little")))
    left = _temps(on_load)
    assert len(left) >= 3 and set(os.listdir(on_load)) <= {"net.ckpt", *left}
    shutil.copytree(on_load, on_save)
    with pytest.raises(CheckpointError, match="temporary file of an unfinished save of net.ckpt"):
        ms.load_checkpoint(str(on_load / left[0]))   # never mistaken for a checkpoint
    assert _temps(on_load) == left   # a refused load removes nothing

    path = on_load / "net.ckpt"
    if path.exists():   # the target is a whole checkpoint: one of the saves that finished
        loaded = ms.load_checkpoint(str(path))
        assert float(loaded["p0"].asnumpy()[0, 0]) == float(loaded["step"].asnumpy()) >= 1
    else:
        with pytest.raises(CheckpointError, match="no such checkpoint"):
            ms.load_checkpoint(str(path))
    assert _temps(on_load) == [] and os.listdir(on_load) == (["net.ckpt"] if path.exists() else [])

    ms.save_checkpoint([Parameter(np.ones(3, np.float32), name="w")], str(on_save / "net.ckpt"))
    assert sorted(ms.load_checkpoint(str(on_save / "net.ckpt"))) == ["w"]
    assert os.listdir(on_save) == ["net.ckpt"]


def test_a_running_save_keeps_its_file():
    """The temporary file of a save still running (here stopped half-way) is locked: another process's
    save of the same target leaves it alone, and removes it once its writer is gone."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "net.ckpt")
        saver = _saver(path, announce=True)
        try:
            assert saver.stdout.readline().strip() == "ready"
            assert saver.stdout.readline().strip() == "writing"
            saver.send_signal(signal.SIGSTOP)
            (running,) = _temps(d)
            ms.save_checkpoint([Parameter(np.ones(3, np.float32), name="w")], path)
            assert _temps(d) == [running]
        finally:
            saver.kill()
            saver.wait()
        ms.save_checkpoint([Parameter(np.ones(3, np.float32), name="w")], path)
        assert _temps(d) == [] and os.listdir(d) == ["net.ckpt"]


def test_other_files_beside_the_target_are_left_alone(tmp_path):
    keep = [".net.ckpt.tmp", ".net.ckpt.0123.tmp", "net.ckpt.0123456789ab.tmp", ".other.ckpt.0123456789ab.tmp",
            ".net.ckpt.0123456789AB.tmp", ".tmpXyZ123"]
    for name in keep:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / ".net.ckpt.0123456789ab.tmp").write_bytes(b"partial")
    ms.save_checkpoint([Parameter(np.ones(3, np.float32), name="w")], str(tmp_path / "net.ckpt"))
    assert sorted(os.listdir(tmp_path)) == sorted(keep + ["net.ckpt"])


def test_our_writer_gives_what_safetensors_reads():
    arrays = {"b": np.arange(6, dtype=np.float16).reshape(2, 3), "a": np.array(True), "e": np.zeros((0, 4), np.int8),
              "d": np.arange(5, dtype=np.int64), "c": np.linspace(0, 1, 7, dtype=np.float64)}

    class Sink:
        def __init__(self):
            self.data = b""

        def write(self, chunk):
            self.data += bytes(chunk)

    sink = Sink()
    checkpoint._write_safetensors(sink, arrays, {"format": "x"})
    back = safetensors.numpy.load(sink.data)
    assert sorted(back) == sorted(arrays)
    for name, arr in arrays.items():
        assert back[name].dtype == arr.dtype and back[name].shape == arr.shape
        assert back[name].tobytes() == arr.tobytes()
    header = int.from_bytes(sink.data[:8], "little")
    assert header % 8 == 0
