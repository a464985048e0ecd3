"""graph_kernel_flags MindSpore 2.x users pass: a real MindSpore flag, op or pass that means nothing here
warns (naming it, saying it has no effect); a name MindSpore does not know either is an error; boolean
values parse as MindSpore's (true/on/1, false/off/0, any case).

Checked against MindSpore 2.10 (MS_DEV_GRAPH_KERNEL_FLAGS on the CPU): it logs a warning for an unknown
flag and runs on; it accepts --kernel_generator=AKG, --enable_auto_tensor_inplace and
--enable_expand_ops=<any name> silently, and warns on a --disable_pass it does not have. Here a name known to
neither MindSpore nor graphkernel is an error (a misspelt flag would silently change nothing).
"""
import re
import warnings

import numpy as np
import pytest

from graphkernel import GraphKernelError, Tensor, context
from graphkernel.settings.flags import FlagWarning, parse_flags
from graphkernel.nn import Cell
from graphkernel.ops import operations as P


@pytest.mark.parametrize("flag, named", [
    ("--kernel_generator=AKG", "--kernel_generator"),
    ("--enable_auto_tensor_inplace", "--enable_auto_tensor_inplace"),
    ("--disable_pass=cluster.graph_kernel_splitter", "--disable_pass=cluster.graph_kernel_splitter"),
    ("--enable_cluster_ops=AdamApplyOne", "--enable_cluster_ops=AdamApplyOne"),
    ("--enable_cluster_ops=MatMul", "--enable_cluster_ops=MatMul (MatMul is OPAQUE"),
    ("--enable_expand_ops=AdamApplyOne", "--enable_expand_ops=AdamApplyOne"),
    ("--enable_expand_ops=Add", "--enable_expand_ops=Add"),
])
def test_mindspore_flags_without_meaning_here_warn(flag, named):
    with pytest.warns(FlagWarning, match=rf"graph_kernel_flags: {re.escape(named)}.* has no effect here"):
        context.set_context(graph_kernel_flags=flag)
    assert context.get_context("graph_kernel_flags") == flag


def test_a_warned_flag_changes_nothing(cpu):
    x = Tensor(np.ones((2, 3), np.float32))

    class MulAdd(Cell):
        def construct(self, x):
            return P.Add()(P.Mul()(x, 2.0), 1.0)

    context.set_context(enable_graph_kernel=True)
    plain = MulAdd().compile(x)
    with pytest.warns(FlagWarning):
        context.set_context(graph_kernel_flags="--kernel_generator=AKG --enable_expand_ops=Add,GeLU")
    with pytest.warns(FlagWarning):
        flagged = MulAdd().compile(x)
    assert [k.op_types for k in flagged.kernels] == [k.op_types for k in plain.kernels] == [("Mul", "Add")]
    assert flagged.options.flags.enable_expand_ops == frozenset({"GeLU"})   # the name that applies stays


@pytest.mark.parametrize("flag, message", [
    ("--kernel_generater=AKG", r"unknown flag --kernel_generater"),
    ("--enable_expand_ops=NotAnOp", r"--enable_expand_ops=NotAnOp: not a composite op"),
    ("--disable_pass=xyz.abc", r"--disable_pass=xyz.abc: not a stage.pass"),
])
def test_names_neither_knows_are_errors(flag, message):
    with pytest.raises(GraphKernelError, match=message):
        context.set_context(graph_kernel_flags=flag)


@pytest.mark.parametrize("raw, value", [("true", True), ("True", True), ("ON", True), ("on", True), ("1", True),
                                        ("false", False), ("FALSE", False), ("Off", False), ("0", False)])
def test_boolean_values_parse_as_mindspore(raw, value):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_flags(f"--dump_as_text={raw}", read_env=False).dump_as_text is value
    assert parse_flags("--dump_as_text", read_env=False).dump_as_text is True
    with pytest.raises(GraphKernelError, match="--dump_as_text=yes: expected true or false"):
        parse_flags("--dump_as_text=yes", read_env=False)


class SliceSquare(Cell):
    def construct(self, x):
        y = P.StridedSlice()(x * 2.0, (0, 1), (4, 7), (1, 2))
        return P.Square()(y + 1.0)


def ops_after_expand(compiled):
    return {n.op for n in compiled.stages["expand"].nodes}


def test_composite_ops_in_the_cluster_flags_have_mindspores_meaning(two_settings):
    """MindSpore clusters an op the cluster flags enable into fused kernels and keeps one they disable out
    of them; a composite op fuses here through its expansion, so enabled it is expanded, disabled it stays
    one op of its own, outside every composite."""
    x = Tensor(np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8))
    context.set_context(device_target="CPU")
    want = SliceSquare()(x).asnumpy()
    context.set_context(mode=two_settings[0], device_target=two_settings[1], enable_graph_kernel=two_settings[2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # accepted without a warning
        context.set_context(graph_kernel_flags="--enable_cluster_ops=StridedSlice,Square")
    np.testing.assert_allclose(SliceSquare()(x).asnumpy(), want, rtol=1e-6)
    if two_settings[0] == context.GRAPH_MODE:
        assert not {"StridedSlice", "Square"} & ops_after_expand(SliceSquare().compile(x))
    context.set_context(graph_kernel_flags="--disable_cluster_ops=StridedSlice,Square")
    np.testing.assert_allclose(SliceSquare()(x).asnumpy(), want, rtol=1e-6)
    if two_settings[0] == context.GRAPH_MODE:
        compiled = SliceSquare().compile(x)
        assert {"StridedSlice", "Square"} <= ops_after_expand(compiled)
        fused = [n for n in compiled.graph.nodes if n.subgraph is not None]
        assert not any(m.op in ("StridedSlice", "Square") for n in fused for m in n.subgraph.nodes)


def test_cluster_ops_flags_decide_whether_a_composite_expands(cpu):
    """--disable_cluster_ops keeps a composite (BatchNorm, expanded by default) one op of its own;
    --enable_cluster_ops_only naming it expands it again; the numbers stay."""
    class Norm(Cell):
        def __init__(self):
            super().__init__()
            self.bn = P.BatchNorm(is_training=True)

        def construct(self, x, s, b, m, v):
            return self.bn(x, s, b, m, v)[0]

    args = [Tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))] + \
        [Tensor(np.ones(3, np.float32)), Tensor(np.zeros(3, np.float32)), Tensor(np.zeros(3, np.float32)),
         Tensor(np.ones(3, np.float32))]
    context.set_context(enable_graph_kernel=True, graph_kernel_flags="--disable_cluster_ops=BatchNorm")
    want = Norm()(*args).asnumpy()
    assert "BatchNorm" in ops_after_expand(Norm().compile(*args))
    context.set_context(graph_kernel_flags="--enable_cluster_ops_only=BatchNorm,Mul,Sub,Add,RealDiv,ReduceSum,Rsqrt")
    compiled = Norm().compile(*args)
    assert "BatchNorm" not in ops_after_expand(compiled)
    np.testing.assert_allclose(Norm()(*args).asnumpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("flags, named", [
    ("--enable_cluster_ops=Softmax --disable_expand_ops=Softmax", "--enable_cluster_ops=Softmax with --disable_expand"),
    ("--disable_cluster_ops=GeLU --enable_expand_ops=GeLU", "--disable_cluster_ops=GeLU with --enable_expand"),
])
def test_a_cluster_flag_an_expand_flag_contradicts_warns(flags, named):
    with pytest.warns(FlagWarning, match=named):
        context.set_context(graph_kernel_flags=flags)
