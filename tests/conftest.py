"""Shared test setup: one kernel cache directory per test run (subprocesses inherit it through the
environment), kernels built before a graph's first call (GRAPHKERNEL_COMPILE_MODE=wait), ir.verify
after every pass, a fresh context for every test, the run's seed, and which tests run.

Seed. Hypothesis draws from `seeding.commit_seed()` (CI: the commit's, so every commit explores new
examples; a local run: a fresh one; GRAPHKERNEL_SEED overrides both). The header prints it with the
command that reproduces the run, and so does the summary of a failed run.

Which tests run (markers in setup.cfg). Two selections: the README's command (`python -m pytest -q -n
auto`) and CI's (`.ci/run` adds --runslow). `slow`: deselected unless --runslow (or `-m slow`).
`twin`: the smaller twin of a slow test (the same check at a smaller size or with fewer examples):
runs without --runslow, and --runslow, which runs the slow test itself, deselects it.
`grid`: one case of a parametrized grid; a run takes the share of each test's cases that a hash of
(seed, node id) picks, 1 in --grid-share (3 with --runslow, as CI samples it; 12 without; 1 takes every
case), and at least one case of each test. `sweep`: one case of the systematic sweep
(tests/test_sweep.py); a run takes the share a hash of (seed, node id) picks, 1 in --sweep-share (10
with --runslow, as CI samples it; 160 without), and --sweep=all (or GRAPHKERNEL_SWEEP=all) takes every
one. A test named on the command line by its node id always runs. `--runslow --sweep=all
--grid-share=1` runs everything but the twins. tests/test_conftest.py checks all of this.

Warnings. A kernel that fails to build (KernelBuildWarning) or a kernel cache that cannot be used as
asked (CacheWarning: a corrupt or stale entry, a refused directory) fails the test: setup.cfg turns
them into errors, and PYTHONWARNINGS does the same in the tests' Python subprocesses. A test that
provokes one on purpose says so with pytest.warns.
"""
import hashlib
import os
import shutil
import shlex
import signal
import tempfile
import threading

import pytest
from hypothesis import settings

from requires import missing_dot, require
from seeding import SOURCE, commit_seed

pytest_plugins = ["pytester"]   # tests/test_conftest.py runs this conftest on generated tests

# CI (`.ci/run` sets CI=1) draws from the commit's seed (below), saves no examples between runs and
# prints the blob that replays a failure.
settings.register_profile("ci", derandomize=False, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

if "GRAPHKERNEL_CACHE_DIR" not in os.environ:
    os.environ["GRAPHKERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="graphkernel-test-cache-")
os.environ["GRAPHKERNEL_VERIFY"] = "1"
# every kernel is built before a graph's first call (--compile_mode=wait), so a test's results never depend
# on when a background build finishes; tests/test_first_step.py sets background where it tests it
os.environ["GRAPHKERNEL_COMPILE_MODE"] = "wait"

# A run started in the background by a shell without job control (`cmd &`, nohup) inherits SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler: the tests of interrupted steps
# (tests/test_atomic_step.py) need Ctrl-C's usual one, in this process and in the ones it starts.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN and threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Python reads PYTHONWARNINGS before site-packages can be imported, so a subprocess cannot name
# kernels.KernelBuildWarning or kernels.CacheWarning there: these match the start of their messages
# ("kernel of Fused_... failed to build", "kernel cache entry ... is corrupt or stale", "kernel cache
# directory ...", "numba would cache kernel ..."); tests/test_conftest.py checks that a subprocess
# dies of both.
SUBPROCESS_WARNINGS = ("error:kernel of:RuntimeWarning", "error:kernel cache:RuntimeWarning",
                       "error:numba would cache kernel:RuntimeWarning")
os.environ["PYTHONWARNINGS"] = ",".join(   # after the caller's own: the last filter given wins
    dict.fromkeys([*filter(None, os.environ.get("PYTHONWARNINGS", "").split(",")), *SUBPROCESS_WARNINGS]))

SWEEP_ENV = "GRAPHKERNEL_SWEEP"
SWEEP_SHARE_CI = 10   # CI's share of the sweep (--runslow)
SWEEP_SHARE = 160     # the README command's
GRID_SHARE_CI = 3     # CI's share of each grid test's cases (--runslow)
GRID_SHARE = 12       # the README command's
EXAMPLE_SHARE_ENV = "GRAPHKERNEL_EXAMPLE_SHARE"   # read by tests/fuzz_helpers.py: the property tests' share
_MODE = pytest.StashKey[str]()      # "share" or "all"
_COUNTS = pytest.StashKey[dict]()   # what the selection kept and dropped, for the header


def pytest_addoption(parser):
    group = parser.getgroup("graphkernel")
    group.addoption("--runslow", action="store_true", help="run the tests marked slow too")
    group.addoption("--sweep", choices=("share", "all"), default=None,
                    help=f"tests marked sweep: 'share' (default, or ${SWEEP_ENV}) runs 1 in --sweep-share "
                         "of them, picked by the seed; 'all' runs every one")
    group.addoption("--sweep-share", type=int, default=None, metavar="N",
                    help=f"run 1 in N of the tests marked sweep (default {SWEEP_SHARE_CI} with --runslow, "
                         f"{SWEEP_SHARE} without)")
    group.addoption("--grid-share", type=int, default=None, metavar="N",
                    help=f"run 1 in N of the cases of each test marked grid (default {GRID_SHARE_CI} with "
                         f"--runslow, {GRID_SHARE} without; 1 runs every case)")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Hand the run's seed to hypothesis's plugin (which reads --hypothesis-seed after this)."""
    seed = commit_seed()
    if config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = str(seed)
    mode = config.getoption("sweep") or os.environ.get(SWEEP_ENV) or "share"
    if mode not in ("share", "all"):
        raise pytest.UsageError(f"{SWEEP_ENV}={mode!r}: expected 'share' or 'all'")
    for option in ("sweep_share", "grid_share"):
        if (config.getoption(option) or 1) < 1:
            raise pytest.UsageError(f"--{option.replace('_', '-')} must be at least 1")
    config.stash[_MODE] = mode
    os.environ[EXAMPLE_SHARE_ENV] = str(grid_share(config))   # hypothesis examples: tests/fuzz_helpers.py


def _run_slow(config) -> bool:
    return config.getoption("runslow") or "slow" in (config.getoption("markexpr") or "")


def sweep_share(config) -> int:
    return config.getoption("sweep_share") or (SWEEP_SHARE_CI if _run_slow(config) else SWEEP_SHARE)


def grid_share(config) -> int:
    return config.getoption("grid_share") or (GRID_SHARE_CI if _run_slow(config) else GRID_SHARE)



def in_sweep_share(seed: int, nodeid: str, share: int) -> bool:
    """Whether this run takes the sweep case `nodeid`: stable for a seed, about 1 in `share`."""
    digest = hashlib.sha256(f"{seed}/{nodeid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % share == 0


def _grid_picks(items, seed: int, share: int) -> set[str]:
    """The node ids of the grid cases a run takes: about 1 in `share` of each test's cases, stable for a
    seed, and at least one case of every test (the one whose hash is least)."""
    tests: dict = {}
    for item in items:
        tests.setdefault(item.nodeid.split("[")[0], []).append(item.nodeid)
    picks = set()
    for ids in tests.values():
        chosen = [i for i in ids if in_sweep_share(seed, i, share)]
        picks.update(chosen or [min(ids, key=lambda i: hashlib.sha256(f"{seed}/{i}".encode()).digest())])
    return picks


def _named(config) -> list[str]:
    """The node ids given on the command line (`path::name...`), relative to the rootdir as node ids are."""
    named = []
    for arg in config.args:
        path, sep, rest = arg.partition("::")
        if sep:
            full = os.path.join(str(config.invocation_params.dir), path)
            named.append(os.path.relpath(full, config.rootpath).replace(os.sep, "/") + "::" + rest)
    return named


@pytest.hookimpl(trylast=True)  # after -m and -k: the counts are of what they left
def pytest_collection_modifyitems(config, items):
    run_slow = _run_slow(config)
    every_sweep, share, seed = config.stash[_MODE] == "all", sweep_share(config), commit_seed()
    grid = grid_share(config)
    named = _named(config)
    keep, dropped = [], []
    counts = {"slow": 0, "twin": 0, "sweep": 0, "sweep_run": 0, "grid": 0, "grid_run": 0}
    in_grid = _grid_picks([i for i in items if i.get_closest_marker("grid")], seed, grid)
    for item in items:
        asked = any(item.nodeid == n or item.nodeid.startswith((n + "[", n + "::")) for n in named)
        if item.get_closest_marker("slow") and not (run_slow or asked):
            counts["slow"] += 1
            dropped.append(item)
            continue
        if item.get_closest_marker("twin") and run_slow and not asked:
            counts["twin"] += 1
            dropped.append(item)
            continue
        if item.get_closest_marker("sweep"):
            counts["sweep"] += 1
            if not (every_sweep or asked or in_sweep_share(seed, item.nodeid, share)):
                dropped.append(item)
                continue
            counts["sweep_run"] += 1
        if item.get_closest_marker("grid"):
            counts["grid"] += 1
            if not (asked or item.nodeid in in_grid):
                dropped.append(item)
                continue
            counts["grid_run"] += 1
        keep.append(item)
    config.stash[_COUNTS] = counts
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    # the slow tests first (in their order): xdist's worksteal gives each worker half the list and an idle
    # one takes from the end of the other's, so a long test left at the end of a list ran alone while the
    # other worker waited; first, the short tests behind it are what gets shared out
    keep.sort(key=lambda item: item.get_closest_marker("slow") is None)
    items[:] = keep


def _seed_lines(config) -> list[str]:
    seed = commit_seed()
    hypothesis_seed = config.getoption("hypothesis_seed", None)
    note = "" if hypothesis_seed == str(seed) else f"; hypothesis seed {hypothesis_seed}"
    env = f"GRAPHKERNEL_SEED={seed}" + (f" {SWEEP_ENV}=all" if os.environ.get(SWEEP_ENV) == "all" else "")
    return [f"graphkernel seed {seed} ({SOURCE['how'] or 'given'}{note})",
            f"reproduce: {env} python -m pytest {shlex.join(config.invocation_params.args)}".rstrip()]


def pytest_report_header(config):
    return _seed_lines(config)


def pytest_report_collectionfinish(config):
    """Shown after collection even under -q, which hides the header (the seed then goes here too)."""
    counts = config.stash.get(_COUNTS, None)
    lines = []
    if counts is not None:
        lines.append(f"sweep: {counts['sweep_run']} of {counts['sweep']} sweep tests selected " + (
            "(--sweep=all)" if config.stash[_MODE] == "all" else
            f"(1 in {sweep_share(config)} by seed {commit_seed()}; --sweep=all runs every one)"))
        if counts["grid"] > counts["grid_run"]:
            lines.append(f"grid: {counts['grid_run']} of {counts['grid']} grid cases selected (1 in "
                         f"{grid_share(config)} of each test's by seed {commit_seed()}; --grid-share=1 runs every one)")
        if counts["slow"]:
            lines.append(f"slow: {counts['slow']} deselected (--runslow runs them)")
        if counts["twin"]:
            lines.append(f"twin: {counts['twin']} deselected (their slow tests run)")
    if config.option.verbose < 0 or config.option.no_header:
        lines = _seed_lines(config) + lines
    return lines


def pytest_terminal_summary(terminalreporter, config):
    if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
        terminalreporter.write_line(_seed_lines(config)[1])


@pytest.fixture(autouse=True)
def pass_context():
    """One PassContext per test: the fusion log of the passes a test runs by hand (fusion_log())."""
    from graphkernel.passes.pass_context import PassContext
    with PassContext():
        yield


@pytest.fixture(autouse=True)
def fresh_context():
    from graphkernel import context
    context.reset_context()
    context.reset_graph_id()
    yield
    context.reset_context()


DEVICE_SETTINGS = [(mode, target, fuse) for mode in (0, 1)      # GRAPH_MODE, PYNATIVE_MODE
                   for target, fuse in (("CPU", False), ("Ascend", False), ("Ascend", True))]


@pytest.fixture(params=[pytest.param(s, marks=pytest.mark.grid) for s in DEVICE_SETTINGS],
                ids=lambda s: f"{('graph', 'pynative')[s[0]]}-{s[1]}-{'fused' if s[2] else 'unfused'}")
def setting(request):
    """Each mode x (the reference, the device unfused, the device fused), set in the context: a grid
    (CI runs every setting of every test, the README's command a share of them)."""
    from graphkernel import context
    mode, target, fuse = request.param
    context.set_context(mode=mode, device_target=target, enable_graph_kernel=fuse)
    return request.param


@pytest.fixture(params=[(0, "Ascend", True), (1, "CPU", False)], ids=["graph-Ascend-fused", "pynative-CPU"])
def two_settings(request):
    """The two ends of `setting`: a fused graph on the device and op-by-op on the reference (for tests
    whose other settings another test covers already)."""
    from graphkernel import context
    mode, target, fuse = request.param
    context.set_context(mode=mode, device_target=target, enable_graph_kernel=fuse)
    return request.param


@pytest.fixture
def cpu():
    """The numpy reference target."""
    from graphkernel import context
    context.set_context(device_target="CPU")


@pytest.fixture
def dot():
    """The path of Graphviz's `dot`; skips the test without it (fails it under CI: tests/requires.py)."""
    require(missing_dot())
    return shutil.which("dot")
