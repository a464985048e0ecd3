"""graphkernel.tools.debug.compare and `graphkernel run MODEL --check`: every kernel run alone on the reference's
values of its inputs and compared with the numpy reference.

Normal graphs (elementwise chains in float32 and float16 with a bool output, Softmax/LayerNorm with
Parameters, MatMuls, host ops and copies, an ONNX model with a shape input): one row per kernel, all
within tolerance. A kernel made wrong on purpose (the Sub emitter adds; a fresh kernel cache directory):
exactly that kernel is first_bad, those before and after it agree. A kernel that scribbles on its inputs
changes no Parameter, no user array and no other kernel's inputs. The CLI exits 0 with the table, 1
naming the wrong kernel. The tolerance rule and the ulp distance on their own.
"""
import doctest
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import onnx
from onnx import TensorProto, helper, numpy_helper

import graphkernel.tools.debug
import graphkernel.onnx
import kernels.emitters
import tolerance as test_tolerance
from graphkernel import Parameter, Tensor, context
from graphkernel import dtype as mstype
from graphkernel.tools.cli import main
from graphkernel.tools.debug import CompareError, compare
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.settings.tolerance import ATOL, RTOL, measure, ulp_distance
from ir.errors import GraphKernelError, IRError
from ir.interpret import reference_values
from kernels import DeviceConfig, InputMismatchError, lower
from ir import GraphBuilder
from kernel_graphs import fused

ROOT = Path(__file__).resolve().parents[1]
FUSION = pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])


def data(shape, k=0, dtype=np.float32):
    return (np.random.default_rng(k).standard_normal(shape) * 0.5).astype(dtype)


# --- cells -----------------------------------------------------------------------------------------

class Chain(Cell):
    def construct(self, x, y):
        z = P.Tanh()((x * 2.0 + 1.0) ** 3.0 - y)
        return P.Exp()(z) * y, P.Greater()(z, y)


class Half(Cell):
    def construct(self, x):
        h = P.Cast()(x, mstype.float16)
        return P.Sqrt()(P.Abs()(h * 3.0 - 1.0)) + h


class Norms(Cell):
    def __init__(self):
        super().__init__()
        self.softmax = P.Softmax()
        self.layer_norm = P.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1)
        self.gamma = Parameter(data((32,), 1) + 1.0, "gamma")
        self.beta = Parameter(data((32,), 2), "beta")

    def construct(self, x):
        y, _, _ = self.layer_norm(x * 0.5 + 0.25, self.gamma, self.beta)
        return self.softmax(y), P.ReduceSum()(y, axis=0)


class TwoMatMuls(Cell):
    """k0 {Mul, Add}, k1 MatMul, k2 {Sub, Exp}, k3 MatMul, k4 Mul when fused; one kernel per op unfused."""

    def __init__(self):
        super().__init__()
        self.w = Parameter(data((16, 16), 3), "w")
        self.matmul = P.MatMul()

    def construct(self, x):
        h = self.matmul(x * 2.0 + 1.0, self.w)
        e = P.Exp()(P.Sub()(h, x))
        return self.matmul(e, self.w) * 3.0


class Hosted(Cell):
    def __init__(self):
        super().__init__()
        self.sort = P.PyFunc(lambda a: np.sort(a, axis=-1), [mstype.float32], [(4, 8)], [mstype.float32],
                             [(4, 8)])

    def construct(self, x):
        return P.Exp()(self.sort(x * 3.0 + 1.0)) * 0.5


def kernel_ops(compiled):
    return [k.op_types for k in compiled.kernels]


def check_all_agree(cell, *inputs):
    result = compare(cell, *inputs)
    compiled = cell.compile(*[Tensor(a) if isinstance(a, np.ndarray) else a for a in inputs])
    assert [r.ops for r in result.rows] == kernel_ops(compiled)
    assert [r.index for r in result.rows] == list(range(len(compiled.kernels)))
    bad = [(r.name, r.max_abs, r.max_ulp) for r in result.rows if not r.ok]
    assert bad == [] and result.first_bad is None and result.ok
    table = result.table().splitlines()
    assert len(table) == len(result.rows) + 3    # title, header, one line per kernel, summary
    assert table[-1] == "every kernel within tolerance"
    for row, line in zip(result.rows, table[2:-1]):
        assert line.split()[:2] == [str(row.index), row.name] and " ok" in line
    return result


# --- (1) normal graphs: every kernel within tolerance ----------------------------------------------

@FUSION
def test_elementwise_chains_float32_float16_and_bool(fusion):
    context.set_context(enable_graph_kernel=fusion)
    x, y = data((64, 32), 1), data((64, 32), 2)
    result = check_all_agree(Chain(), Tensor(x), Tensor(y))
    assert {d for r in result.rows for d in r.dtypes} == {"float32", "bool"}
    result = check_all_agree(Half(), Tensor(x))
    assert "float16" in {d for r in result.rows for d in r.dtypes}
    assert all(r.max_ulp == 0 for r in result.rows)   # float16 kernels round op by op as numpy does


@FUSION
def test_softmax_layer_norm_and_matmuls(fusion):
    context.set_context(enable_graph_kernel=fusion)
    result = check_all_agree(Norms(), Tensor(data((16, 32), 4)))
    assert any("ReduceSum" in r.ops for r in result.rows)
    result = check_all_agree(TwoMatMuls(), Tensor(data((16, 16), 5)))
    matmuls = [r for r in result.rows if r.ops == ("MatMul",)]
    assert len(matmuls) == 2 and all(r.variant == "numpy" for r in matmuls)
    assert len(result.rows) == (5 if fusion else 7)


def test_host_ops_and_copies_are_rows(capsys):
    context.set_context(enable_graph_kernel=True, mix_compile_mode=True)
    result = check_all_agree(Hosted(), Tensor(data((4, 8), 6)))
    assert {"host", "copy", "device"} <= {r.target for r in result.rows}
    assert capsys.readouterr().out == ""
    assert compare(Hosted(), Tensor(data((4, 8), 6)), verbose=True).table() + "\n" == capsys.readouterr().out


def test_onnx_model_with_a_shape_input():
    shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Reshape", ["sq", "shape"], ["r"]),
         helper.make_node("Softmax", ["r"], ["y"], axis=-1)], "reshape_softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]), shape],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8])])
    cell = graphkernel.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    context.set_context(enable_graph_kernel=True)
    check_all_agree(cell, Tensor(data((4, 6), 7)), Tensor(np.array([3, 8], np.int64)))


def test_docstring_example():
    results = doctest.testmod(graphkernel.tools.debug, optionflags=doctest.ELLIPSIS)
    assert results.attempted > 5 and results.failed == 0


def test_reference_values_inside_composites_and_run_step_on_copies():
    """The two pieces compare stands on: ir.reference_values reaches values inside a composite;
    Program.run_step launches one step on copies of its inputs and checks them."""
    b = GraphBuilder()
    x = b.input((4, 8))
    inner = b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0))
    plain = b.graph(b.op("Exp", inner))
    g = fused(plain)
    sub_value = g.nodes[0].subgraph.nodes[-2].out          # the Add inside the composite
    a = data((4, 8), 11)
    values = reference_values(g, [a], [sub_value, g.outputs[0], g.inputs[0]])
    test_tolerance.assert_close(values[sub_value], a * np.float32(2) + np.float32(1), bitwise=True)
    assert not values[g.outputs[0]].flags.writeable and not values[g.inputs[0]].flags.writeable
    with pytest.raises(IRError, match="not computed"):
        reference_values(g, [a], [GraphBuilder().input((2,))])
    program = lower(plain, DeviceConfig())
    step = next(k for k, s in enumerate(program.steps) if s.info.op_types == ("Exp",))
    arg = values[sub_value].copy()
    before = arg.copy()
    (out,) = program.run_step(step, [arg])
    test_tolerance.assert_close(out, np.exp(before), rtol_scale=3)
    assert out.shape == (4, 8) and np.array_equal(arg, before)
    with pytest.raises(InputMismatchError, match="float64"):
        program.run_step(step, [arg.astype(np.float64)])
    with pytest.raises(InputMismatchError, match="takes 1 inputs"):
        program.run_step(step, [arg, arg])


# --- (2) a kernel made wrong on purpose --------------------------------------------------------------

@pytest.fixture
def wrong_sub(monkeypatch, tmp_path):
    """The Sub emitter adds; kernels are built into a fresh cache directory (none is reused)."""
    context.set_context(op_compiler_cache_dir=str(tmp_path / "kernel-cache"))
    monkeypatch.setitem(kernels.emitters.EMITTERS, "Sub", lambda o: f"({o.args[0]} + {o.args[1]})")


@FUSION
def test_a_wrong_kernel_is_named_and_only_it(wrong_sub, fusion):
    context.set_context(enable_graph_kernel=fusion)
    cell, x = TwoMatMuls(), data((16, 16), 8)
    compiled = cell.compile(Tensor(x))
    guilty = next(i for i, ops in enumerate(kernel_ops(compiled)) if "Sub" in ops)
    assert 0 < guilty < len(compiled.kernels) - 1        # kernels before and after it
    result = compare(cell, x)
    bad = result.first_bad
    assert bad is not None and bad.index == guilty and "Sub" in bad.ops
    node = compiled.program.steps[guilty].values_out[0].node
    assert bad.name == node.name and (bad.name.startswith("Fused_") if fusion else "Sub-op" in bad.name)
    assert bad.max_abs > 0.1 and bad.max_ulp > 1000
    assert [r.ok for r in result.rows] == [r.index != guilty for r in result.rows]  # later ones agree too
    assert not result.ok and f"first disagreeing kernel #{guilty} {bad.name}" in result.table()
    assert "BAD" in result.table().splitlines()[2 + guilty]


# --- (3) Parameters and the caller's arrays are never written ------------------------------------------

def test_parameters_and_inputs_unchanged_even_by_a_kernel_that_writes_its_inputs(monkeypatch):
    context.set_context(enable_graph_kernel=True)
    cell, x = TwoMatMuls(), data((16, 16), 9)
    w_pointer, w_before = cell.w.data_ptr(), cell.w.asnumpy()
    x_before = x.copy()
    compiled = cell.compile(Tensor(x))
    first = next(s for s in compiled.program.steps if s.info.op_types == ("MatMul",))
    real = first.fn

    def scribbling_matmul(a, b, out):
        real(a, b, out)
        a[:] = np.nan       # after computing: its result is right, its inputs are ruined
        b[:] = np.nan
    monkeypatch.setattr(first, "fn", scribbling_matmul)
    result = compare(cell, x)
    assert result.first_bad is None    # the second MatMul reads w too: it got its own copy
    assert cell.w.data_ptr() == w_pointer and np.array_equal(cell.w.asnumpy(), w_before)
    assert np.array_equal(x, x_before)
    monkeypatch.undo()
    out = cell(Tensor(x)).asnumpy()     # the program's own buffers were not touched either
    context.set_context(device_target="CPU")
    test_tolerance.assert_close(out, cell(Tensor(x)).asnumpy(), rtol_scale=10)


# --- errors a user can cause ----------------------------------------------------------------------------

def test_errors_are_clear():
    x = Tensor(data((16, 16)))
    with pytest.raises(CompareError, match="takes a Cell"):
        compare(lambda v: v, x)
    with pytest.raises(CompareError, match="input 0 is a str"):
        compare(TwoMatMuls(), "x")
    with pytest.raises(GraphKernelError, match="MatMul"):
        compare(TwoMatMuls(), Tensor(data((16, 5))))           # shapes the construct cannot take
    with pytest.raises(GraphKernelError):
        compare(TwoMatMuls(), x, x)                            # one input too many
    context.set_context(device_target="CPU")
    with pytest.raises(CompareError, match="device_target='Ascend'"):
        compare(TwoMatMuls(), x)


# --- (4) the CLI ----------------------------------------------------------------------------------------

def onnx_model(path):
    """x -> MatMul(w) -> Sub(., x) -> Tanh -> MatMul(w) -> Mul(., x): fused, the Sub is kernel #1."""
    w = numpy_helper.from_array(data((8, 8), 10), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Sub", ["h", "x"], ["d"]),
             helper.make_node("Tanh", ["d"], ["t"]), helper.make_node("MatMul", ["t", "w"], ["m"]),
             helper.make_node("Mul", ["m", "x"], ["y"])]
    graph = helper.make_graph(nodes, "sub_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_cli_check_passes_with_the_table(tmp_path):
    path = onnx_model(tmp_path / "m.onnx")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-m", "graphkernel", "run", str(path), "--check", "--repeat", "1"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    count = int(next(ln for ln in lines if ln.startswith("kernels (")).split("(")[1].split(")")[0])
    title = lines.index(next(ln for ln in lines if "compared with the numpy reference" in ln))
    rows = lines[title + 2: title + 2 + count]
    assert [r.split()[0] for r in rows] == [str(k) for k in range(count)] and count >= 3
    assert all(r.split()[-2:-1] == ["ok"] or r.split()[-1] == "ok" for r in rows)
    assert lines[title + 2 + count] == "every kernel within tolerance"


def test_cli_check_exits_1_naming_the_wrong_kernel(wrong_sub, tmp_path, capsys):
    path = onnx_model(tmp_path / "m.onnx")
    status = main(["run", str(path), "--check", "--repeat", "1"])
    out, err = capsys.readouterr()
    assert status == 1
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("graphkernel: check failed: kernel #1 Fused_Sub_Tanh_") and "disagrees" in err
    bad_rows = [ln for ln in out.splitlines() if " BAD " in ln]
    assert len(bad_rows) == 1 and bad_rows[0].split()[:2] == ["1", err.split()[5]]


def test_cli_check_on_the_cpu_target_is_a_usage_error(tmp_path, capsys):
    path = onnx_model(tmp_path / "m.onnx")
    assert main(["run", str(path), "--check", "--device-target", "CPU"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--check" in err


# --- the tolerance rule and the ulp distance -----------------------------------------------------------

def test_tolerance_numbers_are_the_tests():
    assert RTOL == test_tolerance.RTOL and ATOL == test_tolerance.ATOL


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ulp_distance_counts_floats_between(dtype):
    one = dtype(1)
    up = np.nextafter(one, dtype(2))
    tiny = np.nextafter(dtype(0), dtype(1))
    a = np.array([one, up, dtype(-0.0), tiny, -tiny, np.nan, np.inf, -one], dtype)
    e = np.array([one, one, dtype(0.0), -tiny, tiny, np.nan, np.inf, one], dtype)
    bits = {2: 0x3C00, 4: 0x3F800000, 8: 0x3FF0000000000000}[np.dtype(dtype).itemsize]
    assert ulp_distance(a, e).tolist() == [0, 1, 0, 2, 2, 0, 0, 2 * bits]


def test_measure_follows_the_rule():
    f = np.float32
    e = np.array([100.0, 0.0, -3.0], f)
    assert measure(e, e).ok and measure(e, e).max_ulp == 0
    limit = 1e-5 * 100 + 1e-6 * 100    # rtol |e| + atol max(1, max|e|)
    just_in = np.array([100.0 + 0.9 * limit, 0.0, -3.0], f)
    just_out = np.array([100.0 + 1.5 * limit, 0.0, -3.0], f)
    assert measure(just_in, e).ok and not measure(just_out, e).ok
    zero_err = measure(np.array([100.0, 5e-5, -3.0], f), e)        # absolute tolerance at a zero
    assert zero_err.ok and zero_err.max_rel == 0.0 and zero_err.max_abs == pytest.approx(5e-5)
    assert not measure(np.array([np.nan], f), np.array([1.0], f)).ok
    assert not measure(np.array([-np.inf], f), np.array([np.inf], f)).ok
    assert measure(np.array([np.nan, np.inf], f), np.array([np.nan, np.inf], f)).ok
    ints = measure(np.array([1, 2], np.int32), np.array([1, 3], np.int32))
    assert not ints.ok and ints.max_abs == 1 and ints.max_ulp is None
    assert measure(np.array([True]), np.array([True])).ok
    h = np.float16
    assert measure(np.array([1.001], h), np.array([1.0], h)).ok     # 1 ulp of float16 at 1 is ~1e-3
    assert not measure(np.array([1.01], h), np.array([1.0], h)).ok
