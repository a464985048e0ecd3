"""Every failing example found so far, replayed: the graphs of tests/corpus/*.ir.

A corpus file is a graph of primitives in the IR text form (what `ir.print_graph` writes; the property
tests print a failing graph's text in hypothesis's report), after `#` lines saying what bug it found.
Add one for every failing example, whoever finds it, named after the bug.

For each file: it parses and verifies; on inputs from a fixed seed, the numpy reference, the unfused
kernels, the whole graph as one composite (when one kernel can compute it) and the graph through the
fusion passes agree within tests/tolerance.py's tolerance; with no reduction in a float32 graph of
elementwise ops, every fused result equals the unfused one bit for bit. A KernelBuildWarning fails
the test (setup.cfg), so a composite that does not build fails here too.
"""
from pathlib import Path

import pytest

from fusion_helpers import fuse_all, options
from ir import Pattern, parse_graph, pattern_of, verify
from ir.dtypes import DType
from ir.interpret import interpret
from kernel_graphs import fused, random_array
from kernels import DeviceConfig, lower
from kernels.fusible import unsupported_reason
from tolerance import assert_close

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.ir"))
CFG = DeviceConfig()


def elementwise_float32(graph) -> bool:
    """No reduction, transpose or library call, and every value float32: fusion must keep the bits."""
    values = [*graph.inputs, *(v for n in graph.nodes for v in n.outputs)]
    return (all(pattern_of(n) <= Pattern.BROADCAST for n in graph.nodes)
            and all(v.dtype == DType.float32 for v in values))


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_graph(path):
    text = path.read_text()
    graph = parse_graph(text)
    verify(graph)
    arrays = [random_array(v.shape, v.dtype.np, seed=k) for k, v in enumerate(graph.inputs)]
    want = interpret(graph, arrays)

    programs = {"unfused kernels": lower(graph, CFG)}
    if unsupported_reason(graph) is None:
        programs["one composite"] = lower(fused(graph), CFG)
    programs["fusion passes"] = lower(fuse_all(graph, options())[1], CFG)
    results = {name: program.run(arrays) for name, program in programs.items()}
    for name, outs in results.items():
        assert len(outs) == len(want), name
        for k, (got, ref) in enumerate(zip(outs, want)):
            assert_close(got, ref, err_msg=f"{path.name}: {name}, output {k}")
    if elementwise_float32(graph):
        for name, outs in results.items():
            for k, (got, unfused) in enumerate(zip(outs, results["unfused kernels"])):
                assert_close(got, unfused, bitwise=True, err_msg=f"{path.name}: {name}, output {k}")
