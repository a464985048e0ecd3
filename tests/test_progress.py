"""A compile's progress on a terminal (graphkernel/observation/progress.py): kernels built / total and cache hits,
shown only on a terminal."""
import io

import numpy as np

from graphkernel import Tensor, context
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.observation.progress import CompileProgress
from kernels import DeviceConfig, kernels_to_build, lower
from ir import GraphBuilder


class Terminal(io.StringIO):
    def isatty(self):
        return True


def chain_graph(ops=("Exp", "Neg", "Abs", "Exp")):
    b = GraphBuilder()
    x = b.input((4, 8))
    for op in ops:
        x = b.op(op, x)
    return b.graph(x)


def test_the_bar_counts_kernels_and_cache_hits_on_a_terminal():
    graph = chain_graph()
    total = kernels_to_build(graph)
    assert total == 4
    stream = Terminal()
    with CompileProgress(total, "graph 7 kernels", stream=stream, delay=0) as progress:
        lower(graph, DeviceConfig(cache_mode="force"), progress)    # built anew, whatever the process holds
    # four launches of three structures: the second Exp runs this program's own kernel, a cache hit
    assert (progress.done, progress.hits) == (4, 1)
    text = stream.getvalue()   # tqdm redraws at most every 0.1 s and clears the bar at the end
    assert "graph 7 kernels" in text and "/4 [" in text and "cache hits 0" in text
    assert text.endswith("\r") and text.rstrip("\r").split("\r")[-1].strip() == ""


def test_nothing_is_written_off_a_terminal_or_for_nothing_to_build():
    stream = io.StringIO()
    with CompileProgress(4, "graph 0 kernels", stream=stream, delay=0) as progress:
        lower(chain_graph(), DeviceConfig(cache_mode="disable"), progress)
    assert progress.done == 4 and stream.getvalue() == ""
    quiet = Terminal()
    with CompileProgress(0, "kernels", stream=quiet, delay=0):
        pass
    assert quiet.getvalue() == ""


def test_a_compile_reports_to_stderr_when_it_is_a_terminal(monkeypatch):
    stream = Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr("graphkernel.observation.progress.DELAY_SECONDS", 0.0)

    class Chain(Cell):
        def construct(self, x):
            return P.Neg()(P.Exp()(x)) * 3.0

    context.set_context(device_target="Ascend", enable_graph_kernel=False)
    Chain()(Tensor(np.ones((2, 3), np.float32)))
    assert "graph " in stream.getvalue() and "kernels:" in stream.getvalue() and "/3 [" in stream.getvalue()
