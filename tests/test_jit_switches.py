"""MindSpore 2.x's switches of graph-kernel fusion: set_context(jit_config=...), set_context(jit_level=...),
JitConfig with Cell.set_jit_config, the jit decorator's jit_level (and its deprecated jit_config), their
precedence (an explicit enable_graph_kernel wins), the compile key and the fusion log that name the switch.

Each spelling's acceptance was checked against MindSpore 2.10 (pip install mindspore==2.10.0) on the CPU:
the ACCEPTED / WARNED / REJECTED tables below are what it did there, and what graphkernel does.
"""
import warnings

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, context
from graphkernel.settings.jit_config import JitConfigError, JitConfigWarning
from graphkernel.nn import Cell
from graphkernel.ops import operations as P


class MulAdd(Cell):
    """Mul then Add: one kernel fused, two unfused."""

    def __init__(self):
        super().__init__()
        self.mul, self.add = P.Mul(), P.Add()

    def construct(self, x):
        return self.add(self.mul(x, 2.0), 1.0)


FUSED, UNFUSED = 1, 2


@pytest.fixture
def x():
    return Tensor(np.arange(8, dtype=np.float32).reshape(2, 4))


def kernels(compiled):
    return len(compiled.kernels)


@pytest.mark.parametrize("settings,count,decided_by", [
    ({}, UNFUSED, "default"),
    ({"jit_config": {"jit_level": "O1"}}, FUSED, "set_context(jit_config={'jit_level': 'O1'})"),
    ({"jit_config": {"jit_level": "O0"}}, UNFUSED, "set_context(jit_config={'jit_level': 'O0'})"),
    ({"jit_config": {"jit_level": "O2"}}, FUSED, "set_context(jit_config={'jit_level': 'O2'})"),
    ({"jit_level": "O1"}, FUSED, "set_context(jit_level='O1')"),
    ({"jit_level": "O0"}, UNFUSED, "set_context(jit_level='O0')"),
    ({"enable_graph_kernel": True}, FUSED, "set_context(enable_graph_kernel=True)"),
])
def test_each_context_spelling_turns_fusion_on_or_off(cpu, x, settings, count, decided_by):
    context.set_context(**settings)
    compiled = MulAdd().compile(x)
    assert kernels(compiled) == count
    assert compiled.options.fusion_switch.decided_by.startswith(decided_by)
    np.testing.assert_array_equal(MulAdd()(x).asnumpy(), x.asnumpy() * 2 + 1)


@pytest.mark.parametrize("calls,count,decided_by", [
    # scripts set jit_level O0 and then enable_graph_kernel=True, expecting fusion: the explicit key wins
    ([{"jit_level": "O0"}, {"enable_graph_kernel": True}], FUSED, "set_context(enable_graph_kernel=True)"),
    ([{"enable_graph_kernel": True}, {"jit_config": {"jit_level": "O0"}}], FUSED,
     "set_context(enable_graph_kernel=True)"),
    ([{"jit_config": {"jit_level": "O1"}}, {"enable_graph_kernel": False}], UNFUSED,
     "set_context(enable_graph_kernel=False)"),
    # both spellings of the session's level write one setting: the last one set wins
    ([{"jit_config": {"jit_level": "O1"}}, {"jit_level": "O0"}], UNFUSED, "set_context(jit_level='O0')"),
    ([{"jit_level": "O0"}, {"jit_config": {"jit_level": "O1"}}], FUSED, "set_context(jit_config="),
])
def test_conflicting_settings_resolve_as_documented(cpu, x, calls, count, decided_by):
    for settings in calls:
        context.set_context(**settings)
    compiled = MulAdd().compile(x)
    assert kernels(compiled) == count
    assert compiled.options.fusion_switch.decided_by.startswith(decided_by)


def test_get_context_reads_the_level_back():
    context.set_context(jit_config={"jit_level": "O1"})
    assert context.get_context("jit_level") == "O1"
    assert context.get_context("jit_config") == {"jit_level": "O1"}
    context.set_context(jit_level="O0")
    assert context.get_context("jit_level") == "O0"


def test_cell_jit_config_comes_before_the_session(cpu, x):
    context.set_context(jit_level="O0")
    net = MulAdd()
    net.set_jit_config(ms.JitConfig(jit_level="O1"))
    compiled = net.compile(x)
    assert kernels(compiled) == FUSED
    assert compiled.options.fusion_switch.decided_by == "MulAdd.set_jit_config(JitConfig(jit_level='O1'))"
    assert kernels(MulAdd().compile(x)) == UNFUSED   # another Cell keeps the session's level
    with pytest.warns(JitConfigWarning, match="can only be set once"):   # as MindSpore: set once
        net.set_jit_config(ms.JitConfig(jit_level="O0"))
    assert kernels(net.compile(x)) == FUSED
    context.set_context(enable_graph_kernel=False)   # the explicit key wins over the Cell's too
    assert kernels(net.compile(x)) == UNFUSED


def test_cell_jit_config_needs_a_jitconfig():
    with pytest.raises(JitConfigError, match="MulAdd.set_jit_config: expected a JitConfig, got dict"):
        MulAdd().set_jit_config({"jit_level": "O1"})


def test_jit_decorator_level(cpu, x):
    def f(x):
        return x * 2.0 + 1.0

    assert kernels(ms.jit(f, jit_level="O1").compile(x)) == FUSED
    assert kernels(ms.jit(jit_level="O0")(f).compile(x)) == UNFUSED
    assert kernels(ms.jit(f).compile(x)) == UNFUSED             # no level given: the session's decides
    context.set_context(jit_config={"jit_level": "O1"})
    assert kernels(ms.jit(f).compile(x)) == FUSED
    assert kernels(ms.jit(f, jit_level="O0").compile(x)) == UNFUSED   # its own level before the session's
    assert ms.common.api.jit is ms.jit   # where MindSpore keeps it, and the package's name for it
    compiled = ms.common.api.jit(f, jit_level="O1", capture_mode="bytecode", fullgraph=True, dynamic=1,
                                 backend="ms_backend").compile(x)
    assert kernels(compiled) == FUSED and compiled.options.fusion_switch.decided_by == "jit(jit_level='O1')"
    np.testing.assert_array_equal(ms.jit(f, jit_level="O1")(x).asnumpy(), x.asnumpy() * 2 + 1)


def test_jit_decorator_deprecated_jit_config_warns_and_sets_the_level(cpu, x):
    with pytest.warns(JitConfigWarning, match="'jit_config' is deprecated"):
        g = ms.jit(lambda x: x * 2.0 + 1.0, jit_config=ms.JitConfig(jit_level="O1"))
    compiled = g.compile(x)
    assert kernels(compiled) == FUSED
    assert compiled.options.fusion_switch.decided_by == "jit(jit_config=JitConfig(jit_level='O1'))"


def test_the_compile_key_holds_the_switch(cpu, x):
    net = MulAdd()
    assert kernels(net.compile(x)) == UNFUSED
    context.set_context(jit_level="O1")
    assert kernels(net.compile(x)) == FUSED
    context.set_context(enable_graph_kernel=True)   # same answer, another switch: a compile of its own
    on_explicitly = net.compile(x)
    assert on_explicitly.options.fusion_switch.decided_by == "set_context(enable_graph_kernel=True)"
    assert net.trace_count == 3
    assert net.compile(x) is on_explicitly


def test_the_fusion_log_names_the_switch(cpu, x, tmp_path):
    context.set_context(jit_config={"jit_level": "O1"}, save_graphs=True, save_graphs_path=str(tmp_path),
                        graph_kernel_flags="--dump_as_text")
    compiled = MulAdd().compile(x)
    first = (tmp_path / "fusion_log_0.ir").read_text().splitlines()[0]
    assert first == "[switch] graph-kernel fusion on: set_context(jit_config={'jit_level': 'O1'})"
    assert str(compiled.log.switch) == first[len("[switch] "):]


def test_set_device(cpu, x):
    ms.set_device("CPU")
    assert context.get_context("device_target") == "CPU"
    ms.set_device("Ascend", device_id=0)
    assert context.get_context("device_target") == "Ascend"
    with pytest.raises(ms.GraphKernelError, match="device_target.*'GPU'.*accepted: 'Ascend', 'CPU'"):
        ms.set_device("GPU")
    with pytest.raises(ms.GraphKernelError, match="device_id -1"):
        ms.set_device("CPU", device_id=-1)


# What MindSpore 2.10 (CPU) did with each spelling, and graphkernel does the same.
ACCEPTED = [
    lambda: context.set_context(jit_config={"jit_level": "O0"}),
    lambda: context.set_context(jit_config={"jit_level": "O1"}),
    lambda: context.set_context(jit_config={"jit_level": "O2"}),      # deprecated in the docs only
    lambda: context.set_context(jit_config={}),
    lambda: context.set_context(jit_level="O1"),
    lambda: ms.JitConfig(jit_level="O1"),
    lambda: ms.JitConfig(jit_level="O2"),
    lambda: ms.JitConfig(),
    lambda: ms.JitConfig(anything=1),                                   # kwargs are kept, unused
    lambda: ms.jit(lambda x: x, jit_level="O1"),
    lambda: ms.jit(lambda x: x, capture_mode="bytecode"),
    lambda: ms.jit(lambda x: x, backend="GE"),
    lambda: ms.jit(lambda x: x, fullgraph=True),
    lambda: ms.jit(lambda x: x, dynamic=1),
    lambda: ms.jit(lambda x: x, exec_order="bfs"),
    lambda: ms.set_device("CPU"),
]
WARNED = [
    (lambda: ms.jit(lambda x: x, jit_config=ms.JitConfig(jit_level="O1")), "'jit_config' is deprecated"),
    (lambda: ms.jit(lambda x: x, foo=1), "option 'foo' is not recognized"),
    (lambda: context.set_context(jit_config={"jit_level": "O0", "infer_boost": "on"}), "infer_boost"),
    (lambda: ms.JitConfig(infer_boost="on"), "infer_boost 'on' is deprecated"),
]
REJECTED = [
    (lambda: context.set_context(jit_config={"jit_level": "O3"}), r"jit_level 'O3'.*accepted: 'O0', 'O1', 'O2'"),
    (lambda: context.set_context(jit_config={"jit_lvl": "O1"}), "key 'jit_lvl'"),
    (lambda: context.set_context(jit_config="O1"), "must be a dict"),
    (lambda: context.set_context(jit_config={"jit_level": "O1", "infer_boost": "on"}), "needs jit_level 'O0'"),
    (lambda: ms.JitConfig(jit_level="O3"), "jit_level 'O3'"),
    (lambda: ms.JitConfig(jit_level="o1"), "jit_level 'o1'"),
    (lambda: ms.jit(lambda x: x, jit_level="O2"), r"jit: jit_level 'O2'.*accepted: 'O0', 'O1'"),
    (lambda: ms.jit(lambda x: x, capture_mode="xx"), "capture_mode 'xx'"),
    (lambda: ms.jit(lambda x: x, dynamic=2), "dynamic 2"),
    # MindSpore 2.10 stores any string here unchecked; a level that would do nothing is an error here
    (lambda: context.set_context(jit_level="O3"), r"set_context\(jit_level=...\).*'O3'"),
]


@pytest.mark.parametrize("call", ACCEPTED)
def test_accepted_as_in_mindspore(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitConfigWarning)
        call()


@pytest.mark.parametrize("call,match", WARNED)
def test_warned_as_in_mindspore(call, match):
    with pytest.warns(JitConfigWarning, match=match):
        call()


@pytest.mark.parametrize("call,match", REJECTED)
def test_rejected_as_in_mindspore(call, match):
    with warnings.catch_warnings(), pytest.raises(JitConfigError, match=match):
        warnings.simplefilter("ignore", JitConfigWarning)   # infer_boost warns before the refusal, as there
        call()
