"""A composite has one name everywhere: its node's `Fused_<ops>_<n>` in the stage dump (the
.dot cluster's title), the fusion log, CompiledGraph.kernels, the kernel graph dump, the profiler's
name and op_type columns, the data dump's files and graphkernel.tools.debug.compare's rows. The compiled
kernel it runs, shared by every composite of the same structure, is named by its structure hash in a
column of its own (`kernel`)."""
import csv
import os
import re

import numpy as np
import pytest

from graphkernel import Profiler, Tensor, context
from graphkernel.tools import debug
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.observation.profiler import KERNEL_COLUMNS
from ir.filenames import safe_filename


class TwinComposites(Cell):
    """exp(x*2+1) @ w, then exp(h*2+1): two composites of one structure around a MatMul."""

    def __init__(self):
        super().__init__()
        self.matmul = P.MatMul()

    def construct(self, x, w):
        h = self.matmul(P.Exp()(x * 2.0 + 1.0), w)
        return P.Exp()(h * 2.0 + 1.0)


def arrays():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((4, 8)).astype(np.float32) / 4, rng.standard_normal((8, 8)).astype(np.float32) / 4]


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("target", ["Ascend", "CPU"])
def test_one_compiled_graph_names_each_composite_alike_everywhere(tmp_path, target):
    context.set_context(device_target=target, enable_graph_kernel=True, save_graphs=True,
                        save_graphs_path=str(tmp_path / "graphs"), graph_kernel_flags="--dump_as_text",
                        enable_dump=True, dump_path=str(tmp_path / "dump"))
    net, (x, w) = TwinComposites(), arrays()
    compiled = net.compile(Tensor(x), Tensor(w))
    names = [n.name for n in compiled.graph.nodes if n.op == "Composite"]
    assert names == ["Fused_Mul_Add_Exp_0", "Fused_Mul_Add_Exp_1"]

    # the stage dump: one cluster titled with each name
    dot = (tmp_path / "graphs" / "hwopt_d_composite_opt_end_graph_0.dot").read_text()
    assert re.findall(r'label="(Fused_[^"]*)"', dot) == names
    # the fusion log: the accepted decisions name the composite they built, in memory and in the file
    built = [record.composites for record in compiled.log if record.accepted]
    assert built and set(built) == {(name,) for name in names}
    log_text = (tmp_path / "graphs" / "fusion_log_0.ir").read_text()
    assert all(f"-> {name}: " in log_text for name in names)
    # the kernel table: the composites by name; on the emulated AI Core one generated kernel for both
    table = [k for k in compiled.kernels if k.op_types == ("Mul", "Add", "Exp")]
    assert [k.name for k in table] == names
    if target == "Ascend":
        (kernel,) = {k.kernel for k in table}
        assert kernel.startswith("Fused_Mul_Add_Exp_") and kernel not in names
        graph_dot = (tmp_path / "graphs" / "kernel_graph_0.dot").read_text()
        assert all(f'"{name}\\nMul+Add+Exp\\nkernel {kernel}\\n' in graph_dot for name in names)
    else:
        kernel = ""
        assert {k.kernel for k in table} == {""}

    prof = Profiler(output_path=str(tmp_path / "prof"))
    net(Tensor(x), Tensor(w))
    rows = prof.analyse(print_table=False)
    # the profiler: name and op_type are the composite's name, kernel the compiled kernel
    fused_rows = sorted((r for r in rows if r["name"].startswith("Fused_")), key=lambda r: r["name"])
    assert [(r["name"], r["op_type"], r["kernel"]) for r in fused_rows] == [(n, n, kernel) for n in names]
    header = list(read_csv(tmp_path / "prof" / "profiler" / "kernel_details.csv")[0])
    assert header == list(KERNEL_COLUMNS) and header[5] == "kernel"
    matmul = next(r for r in rows if r["op_type"] == "MatMul")
    assert matmul["name"] == "Default/MatMul-op3" and matmul["kernel"] == ""
    # the data dump: files named after the composites; kernels.csv beside them
    dumped = read_csv(tmp_path / "dump" / "graph_0" / "kernels.csv")
    assert [(r["name"], r["kernel"]) for r in dumped if r["name"].startswith("Fused_")] == [
        (n, kernel) for n in names]
    files = os.listdir(tmp_path / "dump" / "graph_0" / "step_0")
    for name in names:
        assert any(safe_filename(name, hash_changes=False) in f for f in files)

    if target == "Ascend":   # graphkernel.tools.debug.compare runs the emulated AI Core's kernels
        context.set_context(enable_dump=False, save_graphs=False)
        result = debug.compare(net, x, w)
        assert [(r.name, r.kernel) for r in result.rows if r.ops == ("Mul", "Add", "Exp")] == [
            (n, kernel) for n in names]
        assert all(name in result.table() for name in names)


def test_a_primitive_launch_is_its_node_by_name_and_its_op_by_op_type(tmp_path):
    context.set_context(device_target="Ascend")
    x, w = arrays()
    net = TwinComposites()
    compiled = net.compile(Tensor(x), Tensor(w))
    first = compiled.kernels[0]
    assert (first.name, first.op_types) == ("Default/Mul-op0", ("Mul",))
    assert first.kernel.startswith("Mul_") and first.kernel != first.name
    prof = Profiler(output_path=str(tmp_path))
    net(Tensor(x), Tensor(w))
    rows = {r["name"]: r for r in prof.analyse(print_table=False)}
    assert (rows["Default/Mul-op0"]["op_type"], rows["Default/Mul-op0"]["kernel"]) == ("Mul", first.kernel)
