"""The compile cache (graphkernel/compile_cache.py): a graph compiled once is found on disk by its trace and
skips the pass pipeline; a changed network, changed options or a changed package never reuse it."""
import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

import graphkernel.compiler as compiler
from graphkernel import Tensor, compile_cache, context
from graphkernel.compile_cache import CompileCacheWarning
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.settings.flags import parse_flags
from graphkernel.settings.options import CompileOptions
from ir import GraphBuilder
from ir.dtypes import as_dtype
from ir.graph import TensorType
from tolerance import assert_close


class Net(Cell):
    def __init__(self, scale=2.0):
        super().__init__()
        self.scale = scale

    def construct(self, x):
        return P.Softmax()(x * self.scale + 1.0) * x


@pytest.fixture
def pipeline_runs(monkeypatch):
    runs = []
    real = compiler.run_pipeline

    def counted(graph, opts, on_stage):
        runs.append(graph)
        return real(graph, opts, on_stage)
    monkeypatch.setattr(compiler, "run_pipeline", counted)
    return runs


X = Tensor(np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32))


def test_a_second_compile_of_the_same_trace_skips_the_passes(tmp_path, pipeline_runs):
    context.set_context(enable_graph_kernel=True, enable_compile_cache=True, compile_cache_path=str(tmp_path))
    first = Net().compile(X)
    assert len(pipeline_runs) == 1 and len(os.listdir(tmp_path / compile_cache.SUBDIR)) == 1
    second = Net().compile(X)   # a new Cell: a new compile, as in a second process
    assert len(pipeline_runs) == 1
    assert "cached" in second.stages and second.graph.key() == first.graph.key()
    assert [k.kernel for k in second.kernels] == [k.kernel for k in first.kernels]
    assert_close(second(X).asnumpy(), first(X).asnumpy(), bitwise=True)


def test_a_changed_network_or_options_compiles_anew(tmp_path, pipeline_runs):
    context.set_context(enable_graph_kernel=True, enable_compile_cache=True, compile_cache_path=str(tmp_path))
    Net(2.0).compile(X)
    changed = Net(3.0)
    want = 3.0 * X.asnumpy() + 1.0
    assert len(pipeline_runs) == 1
    got = changed(X).asnumpy()
    assert len(pipeline_runs) == 2
    e = np.exp(want - want.max(-1, keepdims=True))
    assert_close(got, e / e.sum(-1, keepdims=True) * X.asnumpy())
    context.set_context(enable_graph_kernel=False)
    Net(2.0).compile(X)
    assert len(pipeline_runs) == 3


def test_a_changed_package_never_reuses_a_graph(tmp_path, pipeline_runs, monkeypatch):
    context.set_context(enable_graph_kernel=True, enable_compile_cache=True, compile_cache_path=str(tmp_path))
    Net().compile(X)
    monkeypatch.setattr(compile_cache, "source_digest", lambda: "another version")
    Net().compile(X)
    assert len(pipeline_runs) == 2
    assert len(os.listdir(tmp_path / compile_cache.SUBDIR)) == 2


def test_an_unreadable_entry_is_a_warning_and_a_compile(tmp_path, pipeline_runs):
    context.set_context(enable_graph_kernel=True, enable_compile_cache=True, compile_cache_path=str(tmp_path))
    want = Net()(X).asnumpy()
    (entry,) = (tmp_path / compile_cache.SUBDIR).iterdir()
    entry.write_text("graph (%0: f32[4, 32]) {\n  %1 = Bogus(\n")
    with pytest.warns(CompileCacheWarning, match="is unusable"):
        got = Net()(X).asnumpy()
    assert len(pipeline_runs) == 2
    assert_close(got, want, bitwise=True)


def test_off_by_default_and_mindspore_environment_switches(tmp_path, pipeline_runs, monkeypatch):
    monkeypatch.delenv("MS_COMPILER_CACHE_ENABLE", raising=False)
    assert compile_cache.cache_dir(None, None) is None
    monkeypatch.setenv("MS_COMPILER_CACHE_ENABLE", "1")
    monkeypatch.setenv("MS_COMPILER_CACHE_PATH", str(tmp_path))
    assert compile_cache.cache_dir(None, None) == os.path.join(str(tmp_path), compile_cache.SUBDIR)
    Net().compile(X)
    Net().compile(X)
    assert len(pipeline_runs) == 1
    context.set_context(enable_compile_cache=False)
    assert compile_cache.cache_dir(False, None) is None
    Net().compile(X)
    assert len(pipeline_runs) == 2


def test_save_graphs_runs_the_passes_for_its_dumps(tmp_path, pipeline_runs):
    context.set_context(enable_compile_cache=True, compile_cache_path=str(tmp_path / "c"), save_graphs=True,
                        save_graphs_path=str(tmp_path / "dumps"))
    Net().compile(X)
    Net().compile(X)
    assert len(pipeline_runs) == 2


KEY_SCRIPT = """
from graphkernel import compile_cache
from graphkernel.settings.options import CompileOptions
from graphkernel.settings.flags import parse_flags
from ir import GraphBuilder
from ir.dtypes import as_dtype
from ir.graph import TensorType
b = GraphBuilder(TensorType((4, 8), as_dtype("float32")))
graph = b.graph(b.op("Exp", b.inputs[0]))
flags = parse_flags("--enable_expand_ops=GeLU,Softmax,LayerNorm,Square --disable_pass=a.b,c.d,e.f", read_env=False)
print(compile_cache.key_of(graph, CompileOptions(enable_graph_kernel=True, flags=flags)))
"""


def test_the_key_is_the_same_in_every_process(tmp_path):
    # sets of strings iterate in an order each process's string hashing decides: the key sorts them
    keys = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", KEY_SCRIPT], capture_output=True, text=True, cwd=tmp_path,
                              env=dict(os.environ, PYTHONHASHSEED=seed))
        assert done.returncode == 0, done.stderr
        keys.add(done.stdout.strip())
    assert len(keys) == 1


def test_the_key_leaves_out_where_a_compile_writes_and_when_kernels_build(tmp_path):
    b = GraphBuilder(TensorType((4, 8), as_dtype("float32")))
    graph = b.graph(b.op("Exp", b.inputs[0]))
    base = CompileOptions(enable_graph_kernel=True)
    same = [dataclasses.replace(base, save_graphs_path=str(tmp_path), cache_dir=str(tmp_path), cache_lock_timeout=3.0,
                                compile_cache_dir=str(tmp_path)),
            dataclasses.replace(base, flags=parse_flags("--compile_mode=wait", read_env=False))]
    assert {compile_cache.key_of(graph, o) for o in same} == {compile_cache.key_of(graph, base)}
    other = dataclasses.replace(base, flags=parse_flags("--opt_level=1", read_env=False))
    assert compile_cache.key_of(graph, other) != compile_cache.key_of(graph, base)
