"""The kernel disk cache's trust model (kernels/cache.py): a private directory, numba's files kept
inside it, entries loaded only when every file matches its recorded hash, and directories or entries
that another user could write refused with a warning (the kernel is then built in memory).

Tests run as root, so permissions are made with chmod/chown and judged from mode bits and owners.
One entry is built once (module fixture) and copied into each test's directory."""
import os
import pickle
import shutil
import stat
import warnings

import numba
import numpy as np
import pytest

from kernels import CACHE_STATS, CacheWarning, DeviceConfig, lower
from kernels.cache import clear_memory
from ir import GraphBuilder
from tests.kernel_graphs import fused
from tests.tolerance import assert_close

OTHER_UID = 12345


def tiny_graph():
    b = GraphBuilder()
    x = b.input((8,))
    return fused(b.graph(b.op("Add", b.op("Mul", x, b.const(3.0)), b.const(1.0))))


def run_fresh(cache_dir):
    """Lower the tiny graph with an empty in-memory cache, run it, check the result."""
    clear_memory()
    program = lower(tiny_graph(), DeviceConfig(cache_dir=str(cache_dir)))
    a = np.arange(8, dtype=np.float32)
    assert_close(program.run([a])[0], a * np.float32(3) + np.float32(1))
    return program


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def snapshot(directory) -> dict:
    """Every file under `directory` with its bytes, mode and owner."""
    files = {}
    for root, _, names in os.walk(directory):
        for n in names:
            p = os.path.join(root, n)
            st = os.lstat(p)
            files[os.path.relpath(p, directory)] = (open(p, "rb").read(), st.st_mode, st.st_uid)
    return files


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A cache directory (three levels we create) holding one clean entry, built with umask 0 and
    NUMBA_CACHE_DIR pointing elsewhere; returns (cache dir, the NUMBA_CACHE_DIR, kernel name)."""
    base = tmp_path_factory.mktemp("pristine")
    cache_dir, numba_dir = base / "a" / "b" / "cache", base / "numba_cache_dir"
    numba_dir.mkdir()
    old_umask, old_numba_dir = os.umask(0), numba.config.CACHE_DIR
    numba.config.CACHE_DIR = str(numba_dir)
    try:
        program = run_fresh(cache_dir)
    finally:
        os.umask(old_umask)
        numba.config.CACHE_DIR = old_numba_dir
    return cache_dir, numba_dir, program.kernels[0].kernel


@pytest.fixture
def entry(pristine, tmp_path):
    """A private copy of the pristine cache directory: (cache dir, kernel name)."""
    cache_dir = tmp_path / "cache"
    shutil.copytree(pristine[0], cache_dir)  # copies modes; the owner is us
    return cache_dir, pristine[2]


def entry_file(cache_dir, name, suffix):
    """The entry's file ending in `suffix`: the source or manifest beside it, numba's in __pycache__."""
    if suffix in (".py", ".manifest"):
        return cache_dir / f"{name}{suffix}"
    (path,) = (cache_dir / "__pycache__").glob(f"{name}.*{suffix}")
    return path


def test_directory_and_parents_we_create_are_private(pristine):
    cache_dir, numba_dir, name = pristine
    for d in (cache_dir.parent.parent, cache_dir.parent, cache_dir, cache_dir / "__pycache__"):
        assert mode(d) == 0o700, d
    files = snapshot(cache_dir)
    assert {f"{name}.py", f"{name}.manifest"} <= set(files)
    assert {f: oct(stat.S_IMODE(m)) for f, (_, m, _) in files.items()} == {f: "0o600" for f in files}


def test_numba_files_stay_inside_the_cache_dir(pristine):
    cache_dir, numba_dir, name = pristine
    assert entry_file(cache_dir, name, ".nbi") and entry_file(cache_dir, name, ".nbc")
    assert list(numba_dir.iterdir()) == []          # NUMBA_CACHE_DIR was ignored
    assert not list(cache_dir.rglob("*.pyc"))       # the source is compiled, never imported


def test_clean_entry_is_reused_from_disk(entry):
    cache_dir, _ = entry
    before = dict(CACHE_STATS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        run_fresh(cache_dir)
    assert CACHE_STATS["disk"] == before.get("disk", 0) + 1
    assert CACHE_STATS["compiled"] == before.get("compiled", 0)


@pytest.mark.parametrize("dir_mode", [0o770, 0o707])
def test_directory_writable_by_group_or_others_is_refused(tmp_path, dir_mode):
    cache_dir = tmp_path / "shared"
    cache_dir.mkdir()
    os.chmod(cache_dir, dir_mode)
    compiled = CACHE_STATS["compiled"]
    with pytest.warns(CacheWarning, match="writable by group or others"):
        run_fresh(cache_dir)
    assert list(cache_dir.iterdir()) == []
    assert CACHE_STATS["compiled"] == compiled + 1  # built in memory


def test_directory_owned_by_another_user_is_refused(tmp_path):
    cache_dir = tmp_path / "theirs"
    cache_dir.mkdir(mode=0o700)
    os.chown(cache_dir, OTHER_UID, -1)
    with pytest.warns(CacheWarning, match=f"owned by uid {OTHER_UID}"):
        run_fresh(cache_dir)
    assert list(cache_dir.iterdir()) == []


def test_numba_subdirectory_writable_by_others_is_refused(entry):
    cache_dir, _ = entry
    os.chmod(cache_dir / "__pycache__", 0o777)
    before = snapshot(cache_dir)
    with pytest.warns(CacheWarning, match="__pycache__ is writable by group or others"):
        run_fresh(cache_dir)
    assert snapshot(cache_dir) == before


def _group_writable(path):
    os.chmod(path, 0o660)


def _other_owner(path):
    os.chown(path, OTHER_UID, -1)


def _symlink_to_copy(path):
    copy = path.with_name("elsewhere")
    shutil.copy(path, copy)
    path.unlink()
    path.symlink_to(copy)


@pytest.mark.parametrize("suffix, change, reason", [
    (".nbc", _group_writable, "writable by group or others"),
    (".py", _other_owner, f"owned by uid {OTHER_UID}"),
    (".manifest", _other_owner, f"owned by uid {OTHER_UID}"),
    (".nbi", _symlink_to_copy, "not a regular file"),
])
def test_entry_another_user_could_write_is_refused(entry, suffix, change, reason):
    cache_dir, name = entry
    change(entry_file(cache_dir, name, suffix))
    before, refused = snapshot(cache_dir), CACHE_STATS["refused"]
    with pytest.warns(CacheWarning, match=f"refused .*{reason}"):
        run_fresh(cache_dir)
    assert CACHE_STATS["refused"] == refused + 1
    assert snapshot(cache_dir) == before  # nothing rewritten: the kernel was built in memory


class Canary:
    """Unpickling it creates the directory `path`: proof that a file was loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def _tamper_source(path, canary):
    path.write_text(f"import os\nos.mkdir({str(canary)!r})\n" + path.read_text())


def _tamper_pickle(path, canary):
    path.write_bytes(pickle.dumps(Canary(str(canary))))


def _drop(path, canary):
    path.unlink()


@pytest.mark.parametrize("suffix, tamper, reason", [
    (".py", _tamper_source, r"\.py does not match"),
    (".nbi", _tamper_pickle, r"\.nbi does not match"),
    (".nbc", _tamper_pickle, r"\.nbc does not match"),
    (".manifest", _drop, "no readable manifest"),
])
def test_tampered_entry_is_rebuilt_without_loading_it(entry, tmp_path, suffix, tamper, reason):
    cache_dir, name = entry
    canary = tmp_path / "canary"
    tamper(entry_file(cache_dir, name, suffix), canary)
    rebuilt = CACHE_STATS["rebuilt"]
    with pytest.warns(CacheWarning, match=f"corrupt or stale .*{reason}"):
        program = run_fresh(cache_dir)
    assert not canary.exists()
    assert CACHE_STATS["rebuilt"] == rebuilt + 1
    assert (cache_dir / f"{name}.py").read_text() == program.kernels[0].source
    assert b"Canary" not in b"".join(data for data, _, _ in snapshot(cache_dir).values())
    with warnings.catch_warnings():  # the rebuilt entry is clean and recorded
        warnings.simplefilter("error", CacheWarning)
        run_fresh(cache_dir)


@pytest.mark.skipif(not hasattr(numba.config, "CACHE_LOCATOR_CLASSES"), reason="numba without the option")
def test_numba_locator_override_is_refused(tmp_path, monkeypatch):
    cache_dir, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    monkeypatch.setattr(numba.config, "CACHE_LOCATOR_CLASSES", "UserProvidedCacheLocator")
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(elsewhere))
    with pytest.warns(CacheWarning, match="numba would cache kernel"):
        run_fresh(cache_dir)
    assert [f for f in snapshot(cache_dir) if not f.startswith(".")] == []  # only the entry's lock
    assert not [f for f in elsewhere.rglob("*") if f.is_file()]
