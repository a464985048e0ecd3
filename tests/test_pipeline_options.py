"""The pipeline's stages and dumps, and the options that steer it: graph_kernel_flags (and
MS_DEV_GRAPH_KERNEL_FLAGS), fusion_switch_file, save_graphs_path, --dump_as_text."""
import json
import os

import numpy as np
import pytest

from graphkernel import GraphKernelError, Tensor, context, device
from graphkernel.compiler import compile_graph, options_from_context
from ir.builder import GraphBuilder
from ir.dtypes import DType
from ir.graph import TensorType
from graphkernel.tools.demo import NetCompositeFuse
from graphkernel.nn import Cell
from graphkernel.ops import operations as P


@pytest.fixture
def x():
    return Tensor(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32))


class TwoBranches(Cell):
    """exp(x) and tanh(x): two independent composites reading the same input."""

    def construct(self, x):
        return P.Exp()(x) * 2.0, P.Tanh()(x) + 1.0


def stems(compiled):
    """The stage dumps written (the compile record, last, apart; MindSpore's verbose_ir_files beside them
    left out: tests/test_mindspore_dumps.py)."""
    names = [os.path.basename(f) for f in compiled.dump_files if "verbose_ir_files" not in f]
    assert names[-1] == f"compile_{compiled.graph_id}.json"
    return names[:-1]


def test_stage_dumps_follow_the_stage_table(cpu, x, tmp_path):
    context.set_context(save_graphs=True, save_graphs_path=str(tmp_path / "off"))
    assert stems(NetCompositeFuse().compile(x)) == [
        "6_validate.dot", "hwopt_d_expand_end_graph_0.dot", "hwopt_d_simplify_end_graph_0.dot"]
    context.set_context(enable_graph_kernel=True, save_graphs_path=str(tmp_path / "on"))
    assert stems(NetCompositeFuse().compile(x)) == [
        "6_validate_1.dot", "hwopt_d_expand_end_graph_1.dot", "hwopt_d_simplify_end_graph_1.dot",
        "hwopt_d_fuse_basic_opt_end_graph_1.dot", "hwopt_d_composite_opt_end_graph_1.dot"]


def test_device_target_adds_the_kernel_graph_dump(x, tmp_path):
    context.set_context(enable_graph_kernel=True, save_graphs=True, save_graphs_path=str(tmp_path))
    compiled = NetCompositeFuse().compile(x)
    assert stems(compiled)[-1] == "kernel_graph_0.dot"
    text = (tmp_path / "kernel_graph_0.dot").read_text()
    assert "block_dim=1" in text and "Fused_Mul_Add_Pow" in text


def test_dumps_are_deterministic(cpu, x, tmp_path):
    context.set_context(enable_graph_kernel=True, save_graphs=True)
    for run in ("a", "b"):
        context.reset_graph_id()
        context.set_context(save_graphs_path=str(tmp_path / run))
        NetCompositeFuse().compile(x)
    for path in (tmp_path / "a").rglob("*"):
        if path.is_file():
            other = tmp_path / "b" / path.relative_to(tmp_path / "a")
            assert path.read_bytes() == other.read_bytes(), path


def test_unwritable_save_graphs_path_is_named(cpu, x, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    context.set_context(save_graphs=True, save_graphs_path=str(blocker / "dumps"))
    with pytest.raises(GraphKernelError, match=r"save_graphs_path '.*a_file/dumps' cannot be created"):
        NetCompositeFuse().compile(x)


def test_a_compile_does_what_its_options_say_and_reads_no_context(x, tmp_path, monkeypatch):
    """CompileOptions describe a whole compile: built from one context, they decide the fusion, the stage
    dumps, the data dump and overflow check, and the kernel cache, whatever the context holds when the
    compile and the run take place; neither reads it (tests/test_imports.py checks the sources too)."""
    first, later = tmp_path / "first", tmp_path / "later"
    context.set_context(enable_graph_kernel=True, save_graphs=True, save_graphs_path=str(first / "graphs"),
                        enable_dump=True, enable_dump_debug=True, dump_path=str(first / "data"), dump_step="0",
                        op_compiler_cache_mode="disable", op_compiler_cache_dir=str(first / "cache"))
    opts = options_from_context()
    context.set_context(enable_graph_kernel=False, save_graphs=False, save_graphs_path=str(later / "graphs"),
                        enable_dump=False, enable_dump_debug=False, dump_path=str(later / "data"),
                        op_compiler_cache_mode="enable", op_compiler_cache_dir=str(later / "cache"))
    b = GraphBuilder(TensorType((4, 4), DType.float32))
    graph = b.graph(b.op("Pow", b.op("Add", b.op("Mul", b.inputs[0], b.scalar(2.0, b.inputs[0])),
                                     b.scalar(1.0, b.inputs[0])), b.scalar(3.0, b.inputs[0])))
    configs = []
    lower = device.lower
    monkeypatch.setattr(device, "lower", lambda g, cfg, progress: configs.append(cfg) or lower(g, cfg, progress))

    def locked(*args):
        raise AssertionError("the compile read the context")
    for name in ("get_context", "compile_settings", "compile_settings_id", "max_device_memory"):
        monkeypatch.setattr(context, name, locked)
    compiled = compile_graph(graph, opts)
    compiled.run_arrays([x.asnumpy()])
    monkeypatch.undo()
    assert compiled.kernel_count == 1    # fused, as the first context said
    assert (first / "graphs" / f"kernel_graph_{compiled.graph_id}.dot").exists()
    assert (first / "data" / f"graph_{compiled.graph_id}" / "step_0").is_dir()
    assert [type(s).__name__ for s in compiled.observation.sinks] == ["DataDump", "OverflowCheck"]
    assert [(c.cache_mode, c.cache_dir) for c in configs] == [("disable", str(first / "cache"))]
    assert not [p for p in later.rglob("*") if p.is_file()]   # set_context made dump_path; nothing went there


def test_dump_as_text_writes_ir_and_a_fusion_log_with_reasons(cpu, x, tmp_path):
    context.set_context(enable_graph_kernel=True, save_graphs=True, save_graphs_path=str(tmp_path),
                        graph_kernel_flags="--dump_as_text")
    compiled = NetCompositeFuse().compile(x)
    assert (tmp_path / "hwopt_d_composite_opt_end_graph_0.ir").read_text().startswith("graph(")
    log = (tmp_path / "fusion_log_0.ir").read_text().splitlines()
    assert log[0] == "[switch] graph-kernel fusion on: set_context(enable_graph_kernel=True)"
    log = log[1:]
    assert len(log) == len(compiled.log) >= 2
    assert any(line.startswith("[fuse_basic] refuse") and "Pow is not an op of basic fusion" in line
               for line in log)
    assert all(": " in line and line.split(": ", 1)[1] for line in log)   # every decision has a reason
    assert any(line.startswith("[composite] fuse") and "saved_us=" in line for line in log)


def test_env_flags_are_read_after_the_context_flags(cpu, x, monkeypatch):
    context.set_context(enable_graph_kernel=True, graph_kernel_flags="--opt_level=2")
    net = NetCompositeFuse()
    assert net.compile(x).kernel_count == 1
    monkeypatch.setenv("MS_DEV_GRAPH_KERNEL_FLAGS", "--opt_level=0")
    context.set_context(graph_kernel_flags="--opt_level=2")   # settings are read again: net recompiles
    assert net.compile(x).kernel_count == 3
    monkeypatch.setenv("MS_DEV_GRAPH_KERNEL_FLAGS", "--opt_levl=0")
    with pytest.raises(GraphKernelError, match=r"MS_DEV_GRAPH_KERNEL_FLAGS: unknown flag --opt_levl; did "
                                                r"you mean --opt_level\?"):
        NetCompositeFuse().compile(x)


def test_enable_and_disable_pass_by_stage_name(cpu, x):
    context.set_context(enable_graph_kernel=True)
    assert TwoBranches().compile(x).kernel_count == 2
    context.set_context(graph_kernel_flags="--enable_pass=composite.parallel_fusion")
    assert TwoBranches().compile(x).kernel_count == 1
    context.set_context(graph_kernel_flags="--disable_pass=fuse_basic.basic_fusion")
    compiled = NetCompositeFuse().compile(x)
    assert "fuse_basic" in compiled.stages
    assert not any(n.subgraph for n in compiled.stages["fuse_basic"].nodes)
    assert compiled.kernel_count == 1    # composite fusion still fuses Mul, Add, Pow


def test_enable_pass_opens_a_pass_below_its_opt_level(cpu, x):
    context.set_context(enable_graph_kernel=True, graph_kernel_flags="--opt_level=0")
    assert NetCompositeFuse().compile(x).kernel_count == 3
    context.set_context(graph_kernel_flags="--opt_level=0 --enable_pass=fuse_basic.basic_fusion")
    compiled = NetCompositeFuse().compile(x)
    assert compiled.kernel_count == 2 and "fuse_basic" in compiled.stages   # {Mul, Add} and Pow


@pytest.mark.parametrize("flags, message", [
    ("--disable_cluster_ops=pow", r"--disable_cluster_ops=pow: not an op \(did you mean Pow\?\)"),
    ("--enable_expand_ops=Bogus", r"--enable_expand_ops=Bogus: not a composite op the expanders rewrite; "
                                  r"accepted: .*ArgMaxWithValue, .*BiasAdd, BiasAddGrad"),
    ("--disable_pass=composite.composite_fusoin", r"--disable_pass=composite.composite_fusoin: not a stage.pass "
                                                  r"of the pipeline \(did you mean composite.composite_fusion\?\)"),
    ("--enable_pass=recompute", r"--enable_pass=recompute: not a stage.pass .*composite.recompute"),
])
def test_list_flags_name_only_ops_and_passes_that_exist(flags, message):
    with pytest.raises(GraphKernelError, match=r"set_context\(graph_kernel_flags=...\): graph_kernel_flags: "
                                                + message):
        context.set_context(graph_kernel_flags=flags)


def test_expand_flags_apply_with_fusion_off(cpu, x):
    class Soft(Cell):
        def construct(self, x):
            return P.Softmax()(x)
    assert [n.op for n in Soft().compile(x).graph.nodes if n.op != "Const"] != ["Softmax"]
    context.set_context(graph_kernel_flags="--disable_expand_ops=Softmax")
    assert [n.op for n in Soft().compile(x).graph.nodes if n.op != "Const"] == ["Softmax"]


def write_switch(tmp_path, doc) -> str:
    path = tmp_path / "fusion_switch.cfg"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_fusion_switch_turns_passes_off(cpu, x, tmp_path):
    context.set_context(enable_graph_kernel=True, fusion_switch_file=write_switch(
        tmp_path, {"Switch": {"GraphFusion": {"composite_fusion": "off"}}}))
    assert NetCompositeFuse().compile(x).kernel_count == 2
    context.set_context(fusion_switch_file=write_switch(
        tmp_path, {"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}))
    assert NetCompositeFuse().compile(x).kernel_count == 3


def test_fusion_switch_cann_pass_we_lack_warns(cpu, tmp_path):
    path = write_switch(tmp_path, {"Switch": {"GraphFusion": {"RequantFusionPass": "on"},
                                              "UBFusion": {"TbePool2dQuantFusionPass": "on"}}})
    with pytest.warns(UserWarning) as record:
        context.set_context(fusion_switch_file=path)
    messages = sorted(str(w.message).split(": ", 1)[1] for w in record)
    assert messages == ["GraphFusion.RequantFusionPass is not a graphkernel pass (ignored)",
                        "UBFusion.TbePool2dQuantFusionPass is not a graphkernel pass (ignored)"]


def test_fusion_switch_suggests_the_pass_a_misspelt_name_meant(tmp_path):
    path = write_switch(tmp_path, {"Switch": {"GraphFusion": {"composite_fusoin": "off"}}})
    with pytest.warns(UserWarning, match=r"GraphFusion.composite_fusoin is not a graphkernel pass \(ignored; "
                                         r"did you mean GraphFusion.composite_fusion\?\)"):
        context.set_context(fusion_switch_file=path)


def test_fusion_switch_all_off_leaves_the_precision_mode_alone(cpu, x, tmp_path):
    context.set_context(precision_mode="force_fp16", fusion_switch_file=write_switch(
        tmp_path, {"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}))
    compiled = NetCompositeFuse().compile(x)
    assert any(n.op == "Cast" for n in compiled.graph.nodes)


@pytest.mark.parametrize("doc, message", [
    ('{"Switch": {"GraphFusion": {', r"not valid JSON: .* at line 1"),
    ({"Switch": {"VectorFusion": {}}}, r"unknown group 'VectorFusion'; accepted: GraphFusion, UBFusion"),
    ({"Switch": {"GraphFusion": {"cse": "maybe"}}}, r"Switch.GraphFusion.cse is 'maybe'; accepted"),
    ({"switch": {}}, r"unknown key 'switch'; expected \{\"Switch\": \{\"GraphFusion\": \{...\}, "
                     r"\"UBFusion\": \{...\}\}\}$"),
    ({"Switch": []}, r"Switch must be an object"),
])
def test_fusion_switch_bad_files_are_named(tmp_path, doc, message):
    path = write_switch(tmp_path, doc)
    with pytest.raises(GraphKernelError, match=message):
        context.set_context(fusion_switch_file=path)
    with pytest.raises(GraphKernelError, match="cannot read it"):
        context.set_context(fusion_switch_file=str(tmp_path / "missing.cfg"))
