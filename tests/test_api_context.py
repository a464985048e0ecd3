"""set_context/get_context: validation, accepted values listed."""
import numpy as np
import pytest

from graphkernel import GraphKernelError, Tensor, context
from graphkernel.tools.demo import NetBasicFuse


def test_defaults_and_round_trip():
    assert context.get_context("mode") == context.GRAPH_MODE
    assert context.get_context("device_target") == "Ascend"
    assert context.get_context("enable_graph_kernel") is False
    assert context.get_context("save_graphs_path") == "dot_out"
    context.set_context(enable_graph_kernel=True, core_num=7, graph_kernel_flags="--opt_level=3")
    assert context.get_context("enable_graph_kernel") is True
    assert context.get_context("core_num") == 7


def test_unknown_key_suggests_and_lists():
    with pytest.raises(GraphKernelError, match=r"unknown context key 'enable_graph_kernal' \(did you mean "
                                                r"'enable_graph_kernel'\?\); accepted keys: mode, "):
        context.set_context(enable_graph_kernal=True)
    with pytest.raises(GraphKernelError, match="unknown context key"):
        context.get_context("nope")


@pytest.mark.parametrize("key,value,accepted", [
    ("device_target", "GPU", "'Ascend', 'CPU'"),
    ("mode", 5, r"context.GRAPH_MODE \(0\) or context.PYNATIVE_MODE \(1\)"),
    ("mode", "graph", r"context.GRAPH_MODE \(0\) or context.PYNATIVE_MODE \(1\)"),
    ("enable_graph_kernel", "yes", "True or False"),
    ("core_num", 0, "1..1024"),
    ("op_compiler_cache_mode", "on", "'enable', 'disable', 'force'"),
])
def test_bad_values_list_what_is_accepted(key, value, accepted):
    with pytest.raises(GraphKernelError, match=rf"set_context\({key}=...\): got .*accepted: .*{accepted}"):
        context.set_context(**{key: value})


def test_bad_key_changes_nothing():
    with pytest.raises(GraphKernelError):
        context.set_context(core_num=8, device_target="GPU")
    assert context.get_context("core_num") == 32


def test_misspelt_flag_suggests_nearest():
    with pytest.raises(GraphKernelError, match=r"unknown flag --opt_levle; did you mean --opt_level\?"):
        context.set_context(graph_kernel_flags="--opt_levle=2")
    with pytest.raises(GraphKernelError, match=r"--opt_level=9: expected an integer in 0..3"):
        context.set_context(graph_kernel_flags="--opt_level=9")


def test_unknown_flag_lists_the_accepted_flags():
    with pytest.raises(GraphKernelError, match=r"unknown flag --dump_as_pdf; did you mean --dump_as_text\?; accepted: "
                                               r"--opt_level, --enable_expand_ops, .*--dump_as_html, --verify, --compile_mode$"):
        context.set_context(graph_kernel_flags="--dump_as_pdf")


def test_a_save_graphs_path_that_is_a_file_is_not_a_directory(tmp_path):
    (tmp_path / "dumps").write_text("a file")
    context.set_context(device_target="CPU", save_graphs=True, save_graphs_path=str(tmp_path / "dumps"))
    with pytest.raises(GraphKernelError, match=r"save_graphs_path '.*dumps' is not a directory \(a file of that "
                                               r"name exists\)"):
        NetBasicFuse().compile(Tensor(np.ones(3, np.float32)))


def test_reset_graph_id_exists():
    context.reset_graph_id()
    assert context.next_graph_id() == 0
    assert context.next_graph_id() == 1
