"""The fusion example's two nets (NetBasicFuse, NetCompositeFuse) through the user API: what each stage
holds, kernel counts, dumps."""
import re

import numpy as np
import pytest

from graphkernel import Tensor, context
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from tolerance import assert_close


class NetBasicFuse(Cell):
    def __init__(self):
        super().__init__()
        self.add = P.TensorAdd()
        self.mul = P.Mul()

    def construct(self, x):
        return self.add(self.mul(x, 2.0), 1.0)


class NetCompositeFuse(Cell):
    def __init__(self):
        super().__init__()
        self.add = P.TensorAdd()
        self.mul = P.Mul()
        self.pow = P.Pow()

    def construct(self, x):
        return self.pow(self.add(self.mul(x, 2.0), 1.0), 3.0)


def composite_ops(graph):
    return [[n.op for n in node.subgraph.nodes if n.op != "Const"] for node in graph.nodes if node.subgraph]


def top_ops(graph):
    return [n.op for n in graph.nodes if n.op != "Const"]


@pytest.fixture
def x():
    return Tensor(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32))


def test_net_basic_fuse_stages(cpu, x):
    context.set_context(enable_graph_kernel=True)
    compiled = NetBasicFuse().compile(x)
    assert top_ops(compiled.stages["validate"]) == ["Mul", "Add"]
    assert composite_ops(compiled.stages["fuse_basic"]) == [["Mul", "Add"]]
    assert top_ops(compiled.stages["fuse_basic"]) == ["Composite"]
    assert compiled.kernel_count == 1


def test_net_composite_fuse_stages(cpu, x):
    context.set_context(enable_graph_kernel=True)
    compiled = NetCompositeFuse().compile(x)
    assert composite_ops(compiled.stages["fuse_basic"]) == [["Mul", "Add"]]
    assert top_ops(compiled.stages["fuse_basic"]) == ["Composite", "Pow"]
    assert composite_ops(compiled.stages["composite"]) == [["Mul", "Add", "Pow"]]
    assert [k.name for k in compiled.kernels] == ["Fused_Mul_Add_Pow_0"]
    assert any("Pow is not an op of basic fusion" in str(r) for r in compiled.log)


@pytest.mark.parametrize("net", [NetBasicFuse, NetCompositeFuse])
def test_fusion_on_equals_fusion_off(cpu, x, net):
    context.set_context(enable_graph_kernel=True)
    fused = net()(x).asnumpy()
    context.set_context(enable_graph_kernel=False)
    unfused = net()(x).asnumpy()
    a = x.asnumpy()
    reference = (a * np.float32(2) + np.float32(1))
    if net is NetCompositeFuse:
        reference = reference ** np.float32(3)
    assert_close(fused, unfused)
    assert_close(fused, reference)


@pytest.mark.parametrize("flags, kernels", [
    ("", 1),
    ("--opt_level=0", 3),
    ("--disable_cluster_ops=Pow", 2),
    ("--composite_op_limit_size=2", 2),
    ("--disable_pass=composite.composite_fusion", 2),
])
def test_flags_change_kernel_counts(cpu, x, flags, kernels):
    context.set_context(enable_graph_kernel=True, graph_kernel_flags=flags)
    assert NetCompositeFuse().compile(x).kernel_count == kernels


def test_composite_dump_draws_the_fused_kernel_as_a_cluster(cpu, x, tmp_path):
    context.set_context(enable_graph_kernel=True, save_graphs=True, save_graphs_path=str(tmp_path))
    NetCompositeFuse().compile(x)
    basic = (tmp_path / "hwopt_d_fuse_basic_opt_end_graph_0.dot").read_text()
    final = (tmp_path / "hwopt_d_composite_opt_end_graph_0.dot").read_text()
    assert re.findall(r'label="(Fused_[A-Za-z_0-9]+)"', basic) == ["Fused_Mul_Add_0"]
    assert re.findall(r'label="(Fused_[A-Za-z_0-9]+)"', final) == ["Fused_Mul_Add_Pow_0"]
    assert final.count("subgraph cluster_") == 1
