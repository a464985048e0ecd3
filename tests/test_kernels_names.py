"""kernels/names.py: one namer per kernel, so two roles never share a name, and the two kernels that
broke when they did (a constant named like a column offset, a scratch row named like an input load)."""
import numpy as np
import pytest

from kernels import DeviceConfig, lower
from kernels.names import FIXED, KEYED, NameClash, Names
from ir import GraphBuilder
from tests.kernel_graphs import fused, random_array, reference
from tests.tolerance import assert_close

pytestmark = pytest.mark.filterwarnings("error::kernels.KernelBuildWarning")


def test_keyed_names_spell_role_and_key():
    names = Names()
    assert names("acc", 3) == "acc_3"
    assert names("s", "out", 1, 2) == "s_out_1_2"
    assert names("cst", 0) != "c0"   # the constant the column offset once overwrote


def test_names_of_different_roles_or_keys_differ():
    names = Names()
    issued = {names(role, *key) for role in KEYED for key in [(0,), (1,), (10,), ("in", 0), ("in", 10), ("out", 1)]}
    assert len(issued) == len(KEYED) * 6
    assert not issued & set(FIXED)


@pytest.mark.parametrize("role,key", [("acc", ()), ("nosuchrole", (1,)), ("start", (1,)), ("v", ("a_b",)),
                                      ("v", ("",))])
def test_a_name_outside_the_rules_is_refused(role, key):
    with pytest.raises(NameClash):
        Names()(role, *key)


def test_a_keyed_name_that_is_a_global_is_refused():
    with pytest.raises(NameClash, match="global"):
        Names({"acc_1"})("acc", 1)


def test_check_refuses_a_name_nobody_issued():
    names = Names()
    acc = names("acc", 0)
    good = f"def K(block_dim, tile, width):\n    {acc} = np.empty(64, np.float32)\n    start = 0\n"
    names.check(good, "K")
    with pytest.raises(NameClash, match="x0"):
        names.check(good + "    x0 = start\n", "K")


def test_column_reduction_of_a_chain_with_constants():
    """ReduceSum(x * 2 - 0.817, axis 0): the constant of node 0 and the column offset were both `c0`."""
    b = GraphBuilder()
    x = b.input((64, 128))
    y = b.op("ReduceSum", b.op("Sub", b.op("Mul", x, b.const(2.0)), b.const(0.817)), axis=(0,), keep_dims=True)
    graph = fused(b.graph(y))
    arrays = [random_array((64, 128))]
    program = lower(graph, DeviceConfig())
    assert [k.variant for k in program.kernels] == ["columns"]
    assert_close(program.run(arrays)[0], reference(graph, arrays)[0])
    assert_close(program.run(arrays)[0], lower(b.graph(y), DeviceConfig()).run(arrays)[0])


def test_scratch_row_of_a_computed_operand_beside_an_input_load():
    """Add(x, b) -> ReduceSum(axis 1) -> Sub(r, x): the scratch row of node 1 and the load of input 1
    were both `x1`, and numba refused the kernel."""
    b = GraphBuilder()
    x, bias = b.input((2, 3, 4)), b.input((4,))
    r = b.op("ReduceSum", b.op("Add", x, bias), axis=(1,), keep_dims=True)
    graph = fused(b.graph(b.op("Sub", r, x)))
    arrays = [random_array((2, 3, 4)), random_array((4,), seed=1)]
    program = lower(graph, DeviceConfig())
    assert [k.op_types for k in program.kernels] == [("Add", "ReduceSum", "Sub")]
    assert_close(program.run(arrays)[0], reference(graph, arrays)[0])
    assert np.isfinite(program.run(arrays)[0]).all()


CHAIN_OPS = ["Neg", "Abs", "Tanh", "Exp", "Sin", "Cos", "Atan", "Floor", "Ceil", "Sign", "Erf", "Reciprocal",
             "Add", "Mul", "Maximum", "Minimum", "Sqrt"]   # binary ones take a constant


def _chains_cut_at_80():
    """Chains of distinct ops (rotations and prefixes of CHAIN_OPS) whose "Fused_<ops>" name the kernel
    stem's 80-character cut meets: on an "_", exactly at its end, and inside an op name."""
    found = {}
    for start in range(len(CHAIN_OPS)):
        ops = CHAIN_OPS[start:] + CHAIN_OPS[:start]
        for n in range(2, len(ops) + 1):
            full = "Fused_" + "_".join(ops[:n])
            where = ("underscore" if full[:80].endswith("_") else "exact" if len(full) == 80
                     else "inside" if len(full) > 80 else None)
            if where:
                found.setdefault(where, ops[:n])
    return found


CHAINS = _chains_cut_at_80()


def test_chains_reach_every_cut():
    assert set(CHAINS) == {"underscore", "exact", "inside"}


@pytest.mark.grid
@pytest.mark.parametrize("where", sorted(CHAINS))
def test_a_long_composite_whose_name_is_cut_builds(where):
    """A kernel stem cut at 80 characters on a "_" made `..._Equal__<hash>`, a dunder name the source check
    refuses: the composite failed to build and fell back (found by the gradient property test)."""
    ops = CHAINS[where]
    b = GraphBuilder()
    x = b.input((4, 8))
    y = x
    for op in ops:
        y = b.op(op, y, b.const(0.5)) if op in ("Add", "Mul", "Maximum", "Minimum") else b.op(op, y)
    graph = fused(b.graph(y))
    arrays = [random_array((4, 8), low=0.1, high=0.9)]
    program = lower(graph, DeviceConfig())   # a KernelBuildWarning is an error under the tests
    assert [k.op_types for k in program.kernels] == [tuple(ops)]
    assert "__" not in program.kernels[0].kernel
    assert_close(program.run(arrays)[0], reference(graph, arrays)[0])
