"""tests/conftest.py itself: the run's seed, the slow, grid and sweep markers, and warnings that fail a test.

Selection and seeding are checked on a generated project that uses a copy of this conftest (and of
tests/seeding.py and tests/requires.py, and the markers of setup.cfg), run by pytester in this process; the warnings in a
subprocess of this very run.
"""
import configparser
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import seeding

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = 800
GRID = 80

GENERATED = f"""
import os
import pytest
from hypothesis import given, settings, strategies as st

@pytest.mark.sweep
@pytest.mark.parametrize("i", range({CASES}))
def test_case(i):
    pass

@pytest.mark.grid
@pytest.mark.parametrize("j", range({GRID}))
def test_grid(j):
    pass

@pytest.mark.grid
@pytest.mark.parametrize("k", range(2))
def test_pair(k):
    pass

@pytest.mark.slow
def test_big():
    pass

@pytest.mark.twin
def test_small():
    pass

def test_plain():
    pass

@settings(max_examples=5, database=None)
@given(st.integers(0, 2**40))
def test_draws(n):
    with open(os.environ["DRAWN"], "a") as f:
        f.write(f"{{n}}\\n")
"""


@pytest.fixture
def project(pytester):
    pytester.makeconftest((HERE / "conftest.py").read_text())
    pytester.makepyfile(seeding=(HERE / "seeding.py").read_text(), requires=(HERE / "requires.py").read_text(),
                        test_generated=GENERATED)
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    pytester.makeini("[pytest]\nmarkers =" + textwrap.indent(cfg["tool:pytest"]["markers"], "    ") + "\n")
    return pytester


def run(project, monkeypatch, *args, seed="1", **env):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GRAPHKERNEL_SWEEP", raising=False)
    monkeypatch.setenv("GRAPHKERNEL_SEED", seed)
    monkeypatch.setenv("GRAPHKERNEL_EXAMPLE_SHARE", "")   # the inner run sets it: restored after the test
    for module in ("seeding", "requires"):   # the project's copies, imported afresh (their state is per run)
        monkeypatch.delitem(sys.modules, module, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # in this process (pytester keeps sys.modules and the working directory apart): ~0.1 s a run
    # instead of a Python start with pytest and hypothesis imported, ~1.5 s
    return project.runpytest_inprocess("-p", "no:cacheprovider", "--strict-markers", *args)


def selected(project, monkeypatch, *args, **kw) -> set[str]:
    result = run(project, monkeypatch, "--collect-only", "-q", *args, **kw)
    assert result.ret == 0, result.stdout.str()
    return {line for line in result.outlines if line.startswith("test_generated.py::")}


def cases(ids, test="test_case") -> set[str]:
    return {i for i in ids if f"{test}[" in i}


def test_the_sweep_and_grid_shares_are_about_one_in_n_stable_for_a_seed_and_change_with_it(project, monkeypatch):
    first = selected(project, monkeypatch, seed="1")
    assert 1 <= len(cases(first)) <= 14                           # the README command: 1 in 160 of 800
    assert 2 <= len(cases(first, "test_grid")) <= 16              # 1 in 12 of 80
    assert 1 <= len(cases(first, "test_pair")) <= 2               # at least one case of every grid test
    assert selected(project, monkeypatch, seed="1") == first
    other = selected(project, monkeypatch, seed="2")
    assert cases(other) != cases(first) and 1 <= len(cases(other)) <= 14
    assert cases(other, "test_grid") != cases(first, "test_grid")
    ci = selected(project, monkeypatch, "--runslow", seed="1")    # CI's selection: 1 in 10, 1 in 3 of the grid
    assert 50 <= len(cases(ci)) <= 115 and 15 <= len(cases(ci, "test_grid")) <= 42
    assert 1 <= len(cases(ci, "test_pair")) <= 2
    assert cases(selected(project, monkeypatch, "--runslow", seed="2"), "test_grid") != cases(ci, "test_grid")
    every = selected(project, monkeypatch, "--runslow", "--grid-share=1", seed="1")
    assert len(cases(every, "test_grid")) == GRID and len(cases(every, "test_pair")) == 2
    share = selected(project, monkeypatch, "--sweep-share=4", "--grid-share=2", seed="1")
    assert 150 <= len(cases(share)) <= 260 and 25 <= len(cases(share, "test_grid")) <= 55
    for ids in (first, other):   # tests without a marker always run, slow ones never by default, twins do
        assert "test_generated.py::test_plain" in ids and "test_generated.py::test_big" not in ids
        assert "test_generated.py::test_small" in ids


def test_sweep_all_grid_share_1_and_runslow_select_every_test(project, monkeypatch):
    everything = {f"test_generated.py::test_case[{i}]" for i in range(CASES)}
    assert cases(selected(project, monkeypatch, "--sweep=all")) == everything
    assert cases(selected(project, monkeypatch, GRAPHKERNEL_SWEEP="all")) == everything
    slow = selected(project, monkeypatch, "--runslow", "--sweep=all", "--grid-share=1")
    assert "test_generated.py::test_big" in slow and cases(slow) == everything
    assert "test_generated.py::test_small" not in slow     # a slow test's twin: the slow one runs
    named = selected(project, monkeypatch, "--runslow", "test_generated.py::test_small")
    assert named == {"test_generated.py::test_small"}                 # named: it runs
    assert len(cases(slow, "test_grid")) == GRID and len(cases(slow, "test_pair")) == 2
    assert selected(project, monkeypatch, "-m", "slow") == {"test_generated.py::test_big"}
    assert selected(project, monkeypatch, "test_generated.py::test_big") == {"test_generated.py::test_big"}
    missing = sorted(everything - cases(selected(project, monkeypatch, seed="1")))[:3]
    assert cases(selected(project, monkeypatch, *missing, seed="1")) == set(missing)   # named: they run


def test_slow_tests_run_first(project, monkeypatch):
    result = run(project, monkeypatch, "--collect-only", "-q", "--runslow", seed="1")
    order = [line for line in result.outlines if line.startswith("test_generated.py::")]
    assert order[0] == "test_generated.py::test_big" and len(order) > 80   # defined after the sweep and grid
    rest = [line.split("[")[0] for line in order[1:]]
    assert rest.index("test_generated.py::test_grid") > rest.index("test_generated.py::test_case")  # kept order


def test_the_seed_and_the_selection_are_printed_with_how_to_reproduce(project, monkeypatch):
    result = run(project, monkeypatch, "-k", "case or big or grid", seed="77")   # -k grid: the marker too
    result.stdout.fnmatch_lines(["graphkernel seed 77 (from GRAPHKERNEL_SEED)",
                                 "reproduce: GRAPHKERNEL_SEED=77 python -m pytest * -k 'case or big or grid'",
                                 f"sweep: * of {CASES} sweep tests selected (1 in 160 by seed 77; --sweep=all runs*",
                                 f"grid: * of {GRID + 2} grid cases selected (1 in 12 of each test's by seed 77; "
                                 "--grid-share=1 runs every one)",
                                 "slow: 1 deselected (--runslow runs them)"])
    quiet = run(project, monkeypatch, "-q", "-k", "plain", seed="77")   # -q hides the header, not the seed
    quiet.stdout.fnmatch_lines(["graphkernel seed 77 *", "reproduce: GRAPHKERNEL_SEED=77 *"])
    no_git = run(project, monkeypatch, "-q", "-k", "plain", CI="1", GRAPHKERNEL_SEED="")
    no_git.stdout.fnmatch_lines(["graphkernel seed * (random: no git checkout)"])   # no repository here


def test_hypothesis_draws_from_the_seed(project, monkeypatch, tmp_path):
    def draws(seed):
        out = tmp_path / f"{seed}-{len(list(tmp_path.iterdir()))}.txt"
        result = run(project, monkeypatch, "-q", "-k", "draws", seed=seed, DRAWN=str(out))
        assert result.ret == 0, result.stdout.str()
        return out.read_text().split()
    first = draws("5")
    assert len(first) >= 5 and draws("5") == first and draws("6") != first


def test_ci_derives_the_seed_from_the_commit(monkeypatch):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")   # the seed is random then: seen in the test above
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("GRAPHKERNEL_SEED")
    monkeypatch.setitem(seeding.SOURCE, "how", "")
    assert seeding.commit_seed() == int(head.stdout[:8], 16) == int(os.environ["GRAPHKERNEL_SEED"])
    assert seeding.SOURCE["how"] == f"from commit {head.stdout[:12]}"


BUILD_FAILS = """
import kernels.emitters
from kernels import DeviceConfig, lower
from ir import GraphBuilder
kernels.emitters.EMITTERS["Neg"] = lambda o: "undefined_function_xyz()"
b = GraphBuilder()
lower(b.graph(b.op("Neg", b.input((5,)))), DeviceConfig(cache_mode="disable"))
print("went on")
"""

ENTRY_CORRUPT = """
import glob, sys
from kernels import DeviceConfig, lower
from kernels.cache import clear_memory
from ir import GraphBuilder
from tests.kernel_graphs import fused
b = GraphBuilder()
graph = fused(b.graph(b.op("Neg", b.op("Mul", b.input((4, 4)), b.const(3.0)))))
lower(graph, DeviceConfig(cache_dir=sys.argv[1]))
(entry,) = glob.glob(sys.argv[1] + "/Fused_*.py")
open(entry, "w").write("not the kernel")
clear_memory()
lower(graph, DeviceConfig(cache_dir=sys.argv[1]))
print("went on")
"""


@pytest.mark.parametrize("script, warning", [(BUILD_FAILS, "KernelBuildWarning: kernel of Neg failed"),
                                             (ENTRY_CORRUPT, "CacheWarning: kernel cache entry Fused_")],
                         ids=["build-fails", "entry-corrupt"])
def test_a_subprocess_of_the_tests_dies_of_a_kernel_or_cache_warning(script, warning, tmp_path):
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)   # the environment is this run's (PYTHONWARNINGS)
    assert proc.returncode != 0 and "went on" not in proc.stdout, proc.stdout + proc.stderr
    assert re.search(re.escape(warning), proc.stderr), proc.stderr
