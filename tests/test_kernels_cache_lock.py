"""The kernel cache never waits forever for another process (kernels/cache_lock.py, docs/kernels.md).

Two processes on one cache directory, the first stopped (SIGSTOP) while it builds a kernel under the
entry's lock: the second finishes while the first stays stopped, after waiting out the bound, with the
right result and one CacheWarning naming the entry. A process killed while holding a lock leaves its
lock file naming it; the next process to use the directory removes it. The stall detection tells a
stopped, an idle and a working holder apart.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from kernels import CACHE_STATS, CacheWarning, DeviceConfig, lower
from kernels import cache_lock
from kernels.cache import clear_memory, lock_timeout, set_lock_timeout
from tests.test_kernels_cache import ROOT, SEED_NET, expected, seed_net

STOPPED_BUILDER = SEED_NET + textwrap.dedent("""
    import os, signal, sys
    import kernels.compile as kc
    from kernels import DeviceConfig, lower
    build = kc.compile_for

    def stop_then_build(*args, **kwargs):   # stopped holding the entry's lock, as Ctrl-Z would
        os.kill(os.getpid(), signal.SIGSTOP)
        return build(*args, **kwargs)

    kc.compile_for = stop_then_build
    lower(graph, DeviceConfig(cache_dir=sys.argv[1]))
""")

WAITER = SEED_NET + textwrap.dedent("""
    import json, sys, time, warnings
    import numpy as np
    from kernels import CACHE_STATS, DeviceConfig, lower
    from kernels.cache import set_lock_timeout
    set_lock_timeout(float(sys.argv[2]))
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = lower(graph, DeviceConfig(cache_dir=sys.argv[1]))
    seconds = time.monotonic() - start
    out = program.run([np.ones((4, 4), np.float32)])[0]
    print(json.dumps({"stats": dict(CACHE_STATS), "value": float(out[0, 0]), "seconds": seconds,
                      "warnings": [str(w.message) for w in caught]}))
""")


def _stopped_holder(cache_dir: str) -> subprocess.Popen:
    """A process stopped while it builds the seed kernel, holding the entry's lock."""
    holder = subprocess.Popen([sys.executable, "-c", STOPPED_BUILDER, cache_dir], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": ROOT})
    _, status = os.waitpid(holder.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), f"the holder ended instead of stopping (status {status})"
    return holder


def _lock_files(cache_dir: str) -> list[str]:
    return sorted(f for f in os.listdir(cache_dir) if f.endswith(".lock"))


def test_a_stopped_holder_is_bypassed_after_the_bound(tmp_path):
    holder = _stopped_holder(str(tmp_path))
    try:
        (lock,) = _lock_files(str(tmp_path))
        assert open(tmp_path / lock).read().split()[0] == str(holder.pid)
        waiter = subprocess.run([sys.executable, "-c", WAITER, str(tmp_path), "1.0"], cwd=ROOT, text=True,
                                capture_output=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=300)
        assert waiter.returncode == 0, waiter.stderr
        got = json.loads(waiter.stdout.strip().splitlines()[-1])
        assert holder.poll() is None   # still stopped: the waiter did not wait for it to go on
        assert got["value"] == 27.0 and got["stats"].get("bypassed") == 1
        assert got["seconds"] >= 1.0   # it did wait for the bound
        (warning,) = [w for w in got["warnings"] if "kernel cache entry" in w]
        name = lock[1:-len(".lock")]
        assert name in warning and f"process {holder.pid}, which is stopped" in warning
        assert "built in memory" in warning
    finally:
        holder.kill()    # dies holding the lock: its file stays behind, naming it
        holder.wait()
    assert _lock_files(str(tmp_path)) == [lock]
    # the next process to use the directory removes it (and rebuilds the entry the holder left unfinished)
    clear_memory()
    before = CACHE_STATS["stale locks"]
    with pytest.warns(CacheWarning, match="corrupt or stale"):
        program = lower(seed_net(), DeviceConfig(cache_dir=str(tmp_path)))
    assert CACHE_STATS["stale locks"] == before + 1
    assert _lock_files(str(tmp_path)) == []
    a = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(program.run([a])[0], expected(a))


def test_a_lock_is_taken_at_once_when_its_holder_died(tmp_path):
    path = cache_lock.lock_path(str(tmp_path), "Fused_X")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with open(path, "w") as f:   # what a process killed while holding it leaves
        f.write(f"{dead.stdout.strip()} {cache_lock._HOST}\n")
    start = time.monotonic()
    fd = cache_lock.acquire(str(tmp_path), "Fused_X", bound=30.0)
    assert time.monotonic() - start < 30.0
    assert open(path).read().split()[0] == str(os.getpid())
    cache_lock.release(str(tmp_path), "Fused_X", fd)
    assert not os.path.exists(path)


def test_sweep_removes_only_the_locks_no_process_holds(tmp_path):
    held = cache_lock.acquire(str(tmp_path), "Fused_Held", bound=1.0)
    open(cache_lock.lock_path(str(tmp_path), "Fused_Left"), "w").close()
    try:
        assert cache_lock.sweep(str(tmp_path)) == 1
        assert _lock_files(str(tmp_path)) == [".Fused_Held.lock"]
    finally:
        cache_lock.release(str(tmp_path), "Fused_Held", held)
    assert _lock_files(str(tmp_path)) == []


def test_a_waiter_takes_the_lock_once_its_holder_releases_it(tmp_path):
    """A holder that finishes within the bound is waited for, not bypassed; the lock file it removed is
    not mistaken for the lock (the waiter locks the file that replaces it)."""
    script = textwrap.dedent("""
        import sys, time
        from kernels import cache_lock
        fd = cache_lock.acquire(sys.argv[1], "Fused_Y", bound=30.0)
        print("held", flush=True)
        time.sleep(0.5)
        cache_lock.release(sys.argv[1], "Fused_Y", fd)
    """)
    other = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert other.stdout.readline().strip() == "held"
        fd = cache_lock.acquire(str(tmp_path), "Fused_Y", bound=30.0)
        assert other.wait(timeout=60) == 0   # it released before we got the lock
        assert open(cache_lock.lock_path(str(tmp_path), "Fused_Y")).read().split()[0] == str(os.getpid())
        cache_lock.release(str(tmp_path), "Fused_Y", fd)
    finally:
        other.kill()
        other.wait()


def test_the_stall_of_a_holder_is_read_from_its_state_and_cpu_time(tmp_path):
    path = cache_lock.lock_path(str(tmp_path), "Fused_Z")

    def why(pid, seconds):
        with open(path, "w") as f:
            f.write(f"{pid} {cache_lock._HOST}\n")
        watch, start = cache_lock._Watch(path), time.monotonic()
        reason = watch.why_stalled(start)
        while time.monotonic() - start < seconds:
            time.sleep(0.1)
            reason = watch.why_stalled(time.monotonic())
        return reason

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert idle.stdout.readline().strip() == "ready"   # past its start-up's CPU time
        assert why(busy.pid, cache_lock.IDLE_SECONDS + 0.5) is None   # running, using CPU time: building
        assert "used no CPU time" in why(idle.pid, cache_lock.IDLE_SECONDS + 0.5)
        busy.send_signal(signal.SIGSTOP)
        os.waitpid(busy.pid, os.WUNTRACED)
        assert "stopped" in why(busy.pid, 0)
    finally:
        for p in (busy, idle):
            p.kill()
            p.wait()
    assert "gone" in why(busy.pid, 0)
    with open(path, "w") as f:
        f.write(f"{os.getpid()} another-host\n")
    assert "on host another-host" in cache_lock._Watch(path).why_stalled(time.monotonic())


def test_the_bound_is_a_context_setting():
    from graphkernel import context
    assert context.get_context("op_compiler_cache_lock_timeout") == 10.0
    with pytest.raises(context.ContextError, match="op_compiler_cache_lock_timeout"):
        context.set_context(op_compiler_cache_lock_timeout=0)
    saved = lock_timeout()
    try:
        context.set_context(op_compiler_cache_lock_timeout=2.5, device_target="Ascend")
        from graphkernel import Tensor
        from graphkernel.cell import Cell

        class Twice(Cell):
            def construct(self, x):
                return x * 2.0

        Twice()(Tensor(np.ones((2,), np.float32)))
        assert lock_timeout() == 2.5
    finally:
        set_lock_timeout(saved)
