"""The kernel cache: disk reuse across processes, corrupt entries, unwritable dirs, the three modes."""
import glob
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import kernels.emitters
from kernels import CACHE_STATS, CacheWarning, DeviceConfig, KernelBuildWarning, lower
from kernels.cache import clear_memory
from ir import GraphBuilder
from tests.kernel_graphs import fused, random_array

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SEED_NET = """
from ir import GraphBuilder
from tests.kernel_graphs import fused
b = GraphBuilder()
x = b.input((4, 4))
graph = fused(b.graph(b.op("Pow", b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0)), b.const(3.0))))
"""


def seed_net():
    namespace = {}
    exec(SEED_NET, namespace)
    return namespace["graph"]


def expected(a):
    return (a * np.float32(2) + np.float32(1)) ** 3


def run_in_subprocess(cache_dir: str) -> dict:
    script = SEED_NET + textwrap.dedent(f"""
        import json
        import numpy as np
        from kernels import CACHE_STATS, DeviceConfig, lower
        program = lower(graph, DeviceConfig(cache_dir={cache_dir!r}))
        out = program.run([np.ones((4, 4), np.float32)])[0]
        print(json.dumps({{"stats": dict(CACHE_STATS), "value": float(out[0, 0])}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_takes_kernels_from_disk(tmp_path):
    first = run_in_subprocess(str(tmp_path))
    second = run_in_subprocess(str(tmp_path))
    assert first["stats"].get("compiled") == 1 and not first["stats"].get("disk")
    assert second["stats"].get("disk") == 1 and not second["stats"].get("compiled")
    assert first["value"] == second["value"] == 27.0


def _lower_fresh(cfg):
    clear_memory()
    return lower(seed_net(), cfg)


def test_corrupt_source_entry_is_rebuilt_with_warning(tmp_path):
    cfg = DeviceConfig(cache_dir=str(tmp_path))
    program = _lower_fresh(cfg)
    (entry,) = glob.glob(str(tmp_path / "Fused_*.py"))
    with open(entry, "w") as f:
        f.write("this is not the kernel\x00")
    with pytest.warns(CacheWarning, match="corrupt or stale"):
        program = _lower_fresh(cfg)
    a = random_array((4, 4))
    np.testing.assert_allclose(program.run([a])[0], expected(a), rtol=1e-5)
    assert open(entry).read() == program.kernels[0].source


def test_corrupt_numba_files_do_not_break_the_run(tmp_path):
    cfg = DeviceConfig(cache_dir=str(tmp_path))
    _lower_fresh(cfg)
    numba_files = glob.glob(str(tmp_path / "__pycache__" / "*.nb*"))
    assert numba_files
    for path in numba_files:
        with open(path, "wb") as f:
            f.write(b"garbage")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)  # rebuilt, with or without a warning from us
        program = _lower_fresh(cfg)
    a = random_array((4, 4))
    np.testing.assert_allclose(program.run([a])[0], expected(a), rtol=1e-5)
    # the rebuilt entry loads cleanly next time
    before = CACHE_STATS["rebuilt"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        _lower_fresh(cfg)
    assert CACHE_STATS["rebuilt"] == before


def test_a_kernel_that_fails_to_build_leaves_no_entry_behind(tmp_path, monkeypatch):
    monkeypatch.setitem(kernels.emitters.EMITTERS, "Neg", lambda o: f"{o.args[0]}[:1]")  # numba: no getitem
    b = GraphBuilder()
    graph = b.graph(b.op("Neg", b.input((5,))))
    for _ in range(2):   # the second request fails alike: no "corrupt or stale" entry from the first
        clear_memory()
        with pytest.warns(KernelBuildWarning, match="Neg") as record:
            lower(graph, DeviceConfig(cache_dir=str(tmp_path)))
        assert [w.category for w in record] == [KernelBuildWarning]
        assert "TypingError" in str(record[0].message)
        assert not glob.glob(str(tmp_path / "*.*")) and not glob.glob(str(tmp_path / "__pycache__" / "*"))


def test_unwritable_cache_dir_falls_back_to_memory(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    cfg = DeviceConfig(cache_dir=str(blocker / "cache"))
    with pytest.warns(CacheWarning, match="cannot be written"):
        program = _lower_fresh(cfg)
    a = random_array((4, 4))
    np.testing.assert_allclose(program.run([a])[0], expected(a), rtol=1e-5)


def test_disable_writes_nothing_and_force_rebuilds(tmp_path):
    _lower_fresh(DeviceConfig(cache_mode="disable", cache_dir=str(tmp_path)))
    assert os.listdir(tmp_path) == []
    _lower_fresh(DeviceConfig(cache_dir=str(tmp_path)))
    assert glob.glob(str(tmp_path / "Fused_*.py"))
    before = CACHE_STATS["compiled"]
    lower(seed_net(), DeviceConfig(cache_mode="force", cache_dir=str(tmp_path)))  # even from memory
    assert CACHE_STATS["compiled"] == before + 1


def test_one_kernel_serves_every_shape_with_the_same_structure(tmp_path):
    cfg = DeviceConfig(cache_dir=str(tmp_path))
    names = set()
    for shape in [(4, 4), (3, 5, 7), (1000,), ()]:
        b = GraphBuilder()
        x = b.input(shape)
        g = fused(b.graph(b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0))))
        program = lower(g, cfg)
        names.add(program.kernels[0].kernel)
        a = random_array(shape)
        np.testing.assert_allclose(program.run([a])[0], a * np.float32(2) + np.float32(1), rtol=1e-6)
    assert len(names) == 1


@pytest.mark.parametrize("enabled", [True, False])
def test_a_build_runs_without_the_cyclic_collector_and_leaves_it_as_it_was(enabled):
    """kernels.compile.compile_for turns the cyclic collector off while numba compiles (its objects
    made every collection walk the test worker's whole heap) and back to how it found it, after a
    build that fails too."""
    import gc
    from numba import types
    from kernels import compile as kc
    seen = []
    source = "def probe_kernel(a, n):\n    a[0] = n\n"
    dispatcher = kc.from_source("probe_kernel", source)
    original = dispatcher.compile

    def compile_and_look(sig):
        seen.append(gc.isenabled())
        return original(sig)
    dispatcher.compile = compile_and_look
    (gc.enable if enabled else gc.disable)()
    try:
        kc.compile_for(dispatcher, (types.Array(types.float32, 1, "C"), types.int64))
        assert seen == [False] and gc.isenabled() == enabled
        broken = kc.from_source("broken_kernel", "def broken_kernel(a):\n    return a.no_such_attribute\n")
        with pytest.raises(Exception):
            kc.compile_for(broken, (types.Array(types.float32, 1, "C"),))
        assert gc.isenabled() == enabled
    finally:
        gc.enable()
