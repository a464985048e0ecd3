"""The places MindSpore 2.x writes its graph-kernel dumps, written beside ours: with save_graphs,
`verbose_ir_files/graph_kernel/NNNN_<pass>_<graph id>.ir` after each graph-kernel stage (MindSpore 2.10
on the CPU wrote 0007_stage1_cluster_3_graph_kernel_expander_0132.ir, ...); with --dump_as_text,
`graph_kernel_dump/graph_kernel_cluster_<graph id>.txt`, each composite's source nodes as MindSpore
lists them ("Source nodes of <composite> = ...")."""
import os

import numpy as np

from graphkernel import Tensor, context, ops
from graphkernel.nn import Cell


class NetCompositeFuse(Cell):
    def construct(self, x):
        return ops.pow(x * 2.0 + 1.0, 3.0)


def test_mindspore_layout_beside_ours(tmp_path):
    context.reset_graph_id()
    context.set_context(device_target="CPU", enable_graph_kernel=True, save_graphs=True, save_graphs_path=str(tmp_path),
                        graph_kernel_flags="--dump_as_text")
    compiled = NetCompositeFuse().compile(Tensor(np.ones((4, 4), np.float32)))
    ir_dir = tmp_path / "verbose_ir_files" / "graph_kernel"
    names = sorted(os.listdir(ir_dir))
    assert names == ["0000_stage1_cluster_graph_kernel_expander_0000.ir",
                     "0001_stage2_highlevelopt1_arithmetic_simplify_0000.ir",
                     "0002_stage1_cluster_graph_kernel_cluster_0000.ir",
                     "0003_stage3_split_graph_kernel_splitter_0000.ir"]
    assert (ir_dir / names[-1]).read_text() == (tmp_path / "hwopt_d_composite_opt_end_graph_0.ir").read_text()
    cluster = (tmp_path / "graph_kernel_dump" / "graph_kernel_cluster_0.txt").read_text()
    (composite,) = [n for n in compiled.graph.nodes if n.subgraph is not None]
    assert cluster.startswith(f"Source nodes of {composite.name} = ")
    for op in ("Mul", "Add", "Pow"):
        assert f" = {op}(" in cluster
    assert cluster.rstrip().endswith("=======================")
    assert str(ir_dir / names[0]) in compiled.dump_files
    assert (tmp_path / "6_validate.dot").exists()   # ours stay where they were


def test_without_dump_as_text_no_cluster_dump_and_without_save_graphs_nothing(tmp_path):
    context.set_context(device_target="CPU", enable_graph_kernel=True, save_graphs=True,
                        save_graphs_path=str(tmp_path / "a"))
    NetCompositeFuse()(Tensor(np.ones((2, 2), np.float32)))
    assert sorted(os.listdir(tmp_path / "a" / "verbose_ir_files" / "graph_kernel"))
    assert not (tmp_path / "a" / "graph_kernel_dump").exists()
    context.set_context(save_graphs=False, save_graphs_path=str(tmp_path / "b"), graph_kernel_flags="--dump_as_text")
    NetCompositeFuse()(Tensor(np.ones((2, 2), np.float32)))
    assert not (tmp_path / "b").exists()
