"""Resource limits (issue 9): declared shapes against the memory limit, zero-size tensors, host functions
that raise, and graphs too big or too deep for recursive or quadratic code.

    max_device_memory     the context key, GRAPHKERNEL_MAX_DEVICE_MEMORY, the machine's memory by default
    shapes over it        a traced op, an input, an IR-text graph, ONNX (ConstantOfShape, Expand, Range,
                          initializers, declared inputs), the executor's per-call buffers: each a
                          ResourceLimitError naming the value, before anything is allocated
    zero-size tensors     through elementwise ops and reductions on the numba kernels, fused and unfused
    a raising PyFunc      names the op; the next call runs normally
    big graphs            a 10,000-deep chain and a 20,000-node graph through trace, passes and lowering
                          (100,000 nodes with --runslow)
"""

import sys
import warnings

import numpy as np
import pytest

from graphkernel import Tensor, context
from graphkernel import dtype as mstype
from graphkernel.compiler import compile_graph, options_from_context
from graphkernel.context import max_device_memory
from graphkernel.settings.limits import ENV, machine_memory
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from ir import parse_graph
from ir.errors import ExecutionError, GraphKernelError, ShapeError
from ir.limits import ResourceLimitError, reference_peak_bytes
from kernels import DeviceConfig, KernelBuildWarning, lower
from kernels.executor import Storage, plan_arena
from fuzz_helpers import bounded
from kernel_graphs import fused
from tolerance import assert_close

TARGETS = pytest.mark.parametrize("target", ["CPU", "Ascend"])


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# --- the setting --------------------------------------------------------------------------------------

def test_the_limit_defaults_to_the_machines_memory(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert context.get_context("max_device_memory") is None
    assert max_device_memory() == machine_memory() > 2 ** 26


@pytest.mark.parametrize("value,nbytes", [("3.5GB", int(3.5 * 2 ** 30)), ("512MB", 512 * 2 ** 20),
                                          ("64kb", 64 * 1024), ("1024", 1024), (4096, 4096)])
def test_the_context_key_takes_sizes_as_mindspore_writes_them(value, nbytes):
    context.set_context(max_device_memory=value)
    assert context.get_context("max_device_memory") == nbytes == max_device_memory()


@pytest.mark.parametrize("value", ["lots", "0", -5, 1.5, True, "2 PB"])
def test_a_bad_size_is_an_error_naming_the_key(value):
    with pytest.raises(context.ContextError, match="max_device_memory"):
        context.set_context(max_device_memory=value)


def test_the_environment_variable_applies_when_the_key_is_unset(monkeypatch):
    monkeypatch.setenv(ENV, "2MB")
    assert max_device_memory() == 2 ** 21
    context.set_context(max_device_memory="1MB")
    assert max_device_memory() == 2 ** 20
    context.reset_context()
    monkeypatch.setenv(ENV, "much")
    with pytest.raises(GraphKernelError, match=ENV):
        max_device_memory()


# --- shapes over the limit ----------------------------------------------------------------------------

class Spread(Cell):
    """A one-element input broadcast to a shape of 10^13 elements (40 TB of float32)."""

    def __init__(self, shape=(100000, 100000, 1000)):
        super().__init__()
        self.spread = P.BroadcastTo(shape)

    def construct(self, x):
        return self.spread(x) * 2.0


@TARGETS
def test_a_traced_op_over_the_limit_fails_naming_op_shape_bytes_and_limit(target):
    context.set_context(device_target=target)
    with pytest.raises(ResourceLimitError) as info:
        Spread()(Tensor(np.ones((1,), np.float32)))
    message = str(info.value)
    for part in ("BroadcastTo (Default/BroadcastTo-op0)", "f32[100000,100000,1000]",
                 "10000000000000 elements", "40000000000000 bytes", f"limit of {machine_memory()} bytes",
                 "max_device_memory"):
        assert part in message
    assert isinstance(info.value, MemoryError) and isinstance(info.value, GraphKernelError)


def test_a_shape_whose_int64_product_wraps_around_is_still_caught(cpu):
    """(2**32, 2**32) has 2**64 elements, which numpy's int64 product wraps to 0: a BroadcastTo to it passes
    shape inference and the limit catches it; a Reshape of 0 elements to it is refused at inference, whose
    element counts are exact Python products (math.prod, which keeps symbolic sizes too: ir/symbolic.py)."""
    class Wide(Cell):
        def construct(self, x):
            return P.BroadcastTo((2 ** 32, 2 ** 32))(x) + 1.0

    class Wrap(Cell):
        def construct(self, x):
            return P.Reshape()(x, (2 ** 32, 2 ** 32)) + 1.0

    with pytest.raises(ResourceLimitError, match="18446744073709551616 elements"):
        Wide()(Tensor(np.ones((1,), np.float32)))
    with pytest.raises(ShapeError, match=r"cannot reshape \(0,\) \(0 elements\) to \(4294967296, 4294967296\)"):
        Wrap()(Tensor(np.ones((0,), np.float32)))


def test_an_input_over_a_small_limit_fails_naming_it(cpu):
    context.set_context(max_device_memory="1KB")

    class Double(Cell):
        def construct(self, x):
            return x * 2.0

    with pytest.raises(ResourceLimitError, match=r"Input \(x\): f32\[1000\] \(1000 elements\) needs 4000 bytes"):
        Double()(Tensor(np.ones((1000,), np.float32)))
    context.set_context(max_device_memory="4KB")
    assert_close(Double()(Tensor(np.ones((1000,), np.float32))).asnumpy(), np.full(1000, 2, np.float32))


def test_an_ir_text_graph_over_the_limit_fails_before_the_pipeline(cpu):
    graph = parse_graph('graph(%0: f32[1]) {\n'
                        '  %1 = BroadcastTo(%0) {shape=[1000000, 1000000]} : f32[1000000,1000000]\n'
                        '  return %1\n}')
    with pytest.raises(ResourceLimitError, match=r"BroadcastTo: f32\[1000000,1000000\]"):
        compile_graph(graph, options_from_context())


def test_one_calls_buffers_together_over_the_limit_fail_at_lowering():
    """Each tensor (4000 bytes) fits a 10000-byte limit; a call's temporaries and output do not."""
    graph = parse_graph('graph(%0: f32[1000]) {\n'
                        '  %1 = Exp(%0) : f32[1000]\n  %2 = Exp(%1) : f32[1000]\n'
                        '  %3 = Add(%1, %2) : f32[1000]\n  return %3\n}')
    with pytest.raises(ResourceLimitError, match="one call of this program .* needs 12000 bytes"):
        lower(graph, DeviceConfig(max_device_memory=10000))
    program = lower(graph, DeviceConfig(max_device_memory=12000))
    x = f32(1000)
    assert_close(program.run([x])[0], np.exp(x) + np.exp(np.exp(x)))


def test_one_reference_call_over_the_limit_fails_at_compile(cpu):
    """The same graph on the numpy reference: %1, %2 and %3 are alive at once at the Add (12000 bytes)."""
    graph = parse_graph('graph(%0: f32[1000]) {\n'
                        '  %1 = Exp(%0) : f32[1000]\n  %2 = Exp(%1) : f32[1000]\n'
                        '  %3 = Add(%1, %2) : f32[1000]\n  return %3\n}')
    assert reference_peak_bytes(graph) == 12000
    context.set_context(max_device_memory=11999)
    with pytest.raises(ResourceLimitError, match=r"one call of this graph on the numpy reference \(the values "
                                                 r"alive at once\) needs 12000 bytes"):
        compile_graph(graph, options_from_context())
    context.set_context(max_device_memory=12000)
    x = f32(1000)
    assert_close(compile_graph(graph, options_from_context()).run_arrays([x])[0], np.exp(x) + np.exp(np.exp(x)))


def test_the_reference_peak_frees_values_after_their_last_use():
    """A chain keeps two values alive at a time however long it is; a composite peaks inside."""
    chain = parse_graph('graph(%0: f32[1000]) {\n' + "".join(
        f"  %{i + 1} = Neg(%{i}) : f32[1000]\n" for i in range(10)) + '  return %10\n}')
    assert reference_peak_bytes(chain) == 8000
    assert reference_peak_bytes(fused(chain)) == 8000


def test_a_lowered_value_over_the_limit_names_its_node():
    graph = parse_graph('graph(%0: f32[1000]) {\n  %1 = Exp(%0) : f32[1000]\n  return %1\n}')
    with pytest.raises(ResourceLimitError, match=r"Exp: f32\[1000\] \(1000 elements\) needs 4000 bytes"):
        lower(graph, DeviceConfig(max_device_memory=3999))


# --- ONNX ---------------------------------------------------------------------------------------------

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import graphkernel.onnx as gx  # noqa: E402
from graphkernel.onnx.types import to_array  # noqa: E402

HUGE = [10 ** 6, 10 ** 6]   # 10^12 elements: 4 TB of float32


def onnx_model(nodes, inputs, initializers=()):
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
    graph = helper.make_graph(nodes, "limits", inputs, [out], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


X1 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


ONNX_CASES = {
    "ConstantOfShape": (onnx_model([helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill"),
                                    helper.make_node("Add", ["x", "c"], ["y"])], [X1], [ints("s", HUGE)]),
                        r"ConstantOfShape node 'fill' .*: its result: f32\[1000000,1000000\]"),
    "Expand": (onnx_model([helper.make_node("Expand", ["x", "s"], ["y"], name="grow")], [X1], [ints("s", HUGE)]),
               r"Expand node 'grow' .*BroadcastTo .*: f32\[1000000,1000000\]"),
    "Expand of a constant": (
        onnx_model([helper.make_node("Expand", ["k", "s"], ["e"], name="grow"),
                    helper.make_node("Add", ["x", "e"], ["y"])], [X1],
                   [ints("s", HUGE), numpy_helper.from_array(np.ones(1, np.float32), "k")]),
        r"Expand node 'grow' .*: f32\[1000000,1000000\]"),
    "Range": (onnx_model([helper.make_node("Range", ["a", "b", "d"], ["r"], name="count"),
                          helper.make_node("Cast", ["r"], ["f"], to=TensorProto.FLOAT),
                          helper.make_node("Add", ["x", "f"], ["y"])], [X1],
                         [ints("a", 0), ints("b", 10 ** 13), ints("d", 1)]),
              r"Range node 'count' .*: its result: i64\[10000000000000\]"),
    "declared input": (onnx_model([helper.make_node("Relu", ["x"], ["y"])],
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, HUGE)]),
                       r"input 'x': f32\[1000000,1000000\]"),
}


@pytest.mark.parametrize("case", list(ONNX_CASES))
def test_an_onnx_model_declaring_a_huge_tensor_fails_before_allocating(case, cpu):
    model, message = ONNX_CASES[case]
    with pytest.raises(ResourceLimitError, match=message):
        cell = gx.load(model)
        cell(*cell.random_inputs())


def test_an_initializer_over_the_limit_is_refused_before_its_data_is_read():
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=HUGE, raw_data=b"\0" * 8)
    with pytest.raises(ResourceLimitError, match=r"initializer 'w': f32\[1000000,1000000\]"):
        to_array(tensor, "initializer 'w'")


# --- zero-size tensors --------------------------------------------------------------------------------

def test_a_zero_size_temporary_gets_an_empty_block():
    storages = [Storage("temp", np.dtype(np.float32), 0), Storage("temp", np.dtype(np.float32), 3)]
    from kernels.executor import Step
    steps = [Step(None, None, (), (0,)), Step(None, None, (0,), (1,))]
    blocks, placed = plan_arena(steps, storages)
    assert placed[0][1] == 0 and placed[1][1] == 12
    raw = [np.empty(n, np.uint8) for n in blocks]
    assert raw[placed[0][0]][:0].view(np.float32).shape == (0,)


class ZeroSize(Cell):
    """Elementwise work on an empty tensor; sums over the empty axis (zeros) and the other one (empty);
    a max over the non-empty axis (an empty result)."""

    def __init__(self, max_axis):
        super().__init__()
        self.sum = P.ReduceSum()
        self.max = P.ReduceMax(keep_dims=True)
        self.max_axis = max_axis

    def construct(self, x):
        y = P.Exp()(x * 2.0 + 1.0)
        return self.sum(y, 1), y * 3.0, self.sum(y, 0), self.max(y - 1.0, self.max_axis)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("shape", [(3, 0), (0, 5)])
def test_zero_size_tensors_flow_through_elementwise_ops_and_reductions(shape, fusion):
    context.set_context(device_target="Ascend", enable_graph_kernel=fusion)
    x = f32(*shape)
    max_axis = 0 if shape[1] == 0 else 1
    y = np.exp(x * np.float32(2) + np.float32(1))
    want = (y.sum(1), y * np.float32(3), y.sum(0), (y - np.float32(1)).max(max_axis, keepdims=True))
    compiled = ZeroSize(max_axis).compile(Tensor(x))
    assert compiled.program is not None and all(k.target == "device" for k in compiled.kernels)
    for got, expected in zip(compiled(Tensor(x)), want):
        assert_close(got.asnumpy(), expected)


# --- a host function that raises ----------------------------------------------------------------------

class FlakyHost(Cell):
    """A PyFunc between device work that raises on its first call only."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.f = P.PyFunc(self.sort_rows, [mstype.float32], [(4, 8)], [mstype.float32], [(4, 8)])

    def sort_rows(self, a):
        self.calls += 1
        if self.calls == 1:
            raise ZeroDivisionError("first call")
        return np.sort(a, axis=-1)

    def construct(self, x):
        return P.Exp()(self.f(x * 2.0)) + 1.0


@TARGETS
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_raising_pyfunc_names_its_op_and_the_next_call_runs(target, fusion):
    context.set_context(device_target=target, enable_graph_kernel=fusion, mix_compile_mode=True)
    net, x = FlakyHost(), f32(4, 8)
    with pytest.raises(ExecutionError) as info:
        net(Tensor(x))
    assert "PyFunc (Default/PyFunc-op1)" in str(info.value) and "ZeroDivisionError: first call" in str(info.value)
    cause = info.value
    while cause.__cause__ is not None:
        cause = cause.__cause__
    assert isinstance(cause, ZeroDivisionError)
    assert_close(net(Tensor(x)).asnumpy(), np.exp(np.sort(x * np.float32(2), axis=-1)) + np.float32(1))
    assert net.trace_count == 1


# --- big graphs ---------------------------------------------------------------------------------------
# Deeper than Python's recursion limit (1000) and too big for a pass that walks the graph per node or
# per candidate: each compiles through trace, every pass and the lowering in seconds. GRAPH_SECONDS is
# no speed target: it turns a pass gone quadratic (hours on these graphs) into a failure, not a hang.
GRAPH_SECONDS = 300

class Chain(Cell):
    """`length` elementwise ops in a row: x*0.5, +1.0, x*0.5, +1.0, ..."""

    def __init__(self, length):
        super().__init__()
        self.length = length
        self.mul, self.add = P.Mul(), P.Add()

    def construct(self, x):
        for i in range(self.length):
            x = self.add(x, 1.0) if i % 2 else self.mul(x, 0.5)
        return x


def chain_reference(x, length):
    """The chain in numpy float32, op by op: the kernels round each op the same way (no FMA)."""
    half, one = np.float32(0.5), np.float32(1.0)
    for i in range(length):
        x = x + one if i % 2 else x * half
    return x


@pytest.fixture(scope="module")
def deep_chain():
    return Chain(10000), f32(4, 8, seed=3)


@pytest.mark.grid
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@TARGETS
def test_a_10000_deep_chain_compiles_and_runs(deep_chain, target, fusion):
    net, x = deep_chain
    context.set_context(device_target=target, enable_graph_kernel=fusion)
    with bounded(GRAPH_SECONDS, "compiling a 10,000-deep chain"):
        compiled = net.compile(Tensor(x))
    limit = 200   # composite_op_limit_size
    assert compiled.kernel_count == (10000 // limit if fusion else 10000)
    if fusion:
        assert max(len(k.op_types) for k in compiled.kernels) == limit
    assert_close(compiled(Tensor(x)).asnumpy(), chain_reference(x, 10000), bitwise=True)


class ChainSum(Chain):
    def construct(self, x):
        return P.ReduceSum()(super().construct(x), (1,))


@pytest.mark.parametrize("net", ["chain", "chain then a sum"])
def test_a_kernel_as_deep_as_pythons_recursion_limit_is_one_kernel(net):
    """Flags raised to a chain as deep as sys.getrecursionlimit() (reduce_fuse_depth goes to 1000):
    the chain is one composite, and its kernel is generated without recursing once per op (it failed
    to build with a RecursionError and ran as single-op kernels)."""
    limit = sys.getrecursionlimit()
    length, cell, flags = (limit + 500, Chain, f"--composite_op_limit_size={limit + 500}") if net == "chain" else \
        (990, ChainSum, "--composite_op_limit_size=1000 --reduce_fuse_depth=1000")
    context.set_context(device_target="Ascend", enable_graph_kernel=True, graph_kernel_flags=flags)
    x = f32(4, 8, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelBuildWarning)
        compiled = cell(length).compile(Tensor(x))
        got = compiled(Tensor(x)).asnumpy()
    assert compiled.kernel_count == 1 and len(compiled.kernels[0].op_types) == length + (net != "chain")
    want = chain_reference(x, length)
    if net == "chain":
        assert_close(got, want, bitwise=True)
    else:
        assert_close(got, want.sum(1))


# 100,000 nodes take ~50 s (docs/security.md; 20,000 take ~10 s): slow, run by
# --runslow; a twin a fifth its size runs without it.
@pytest.mark.parametrize("nodes", [pytest.param(20000, marks=pytest.mark.twin),
                                   pytest.param(100000, marks=pytest.mark.slow)])
def test_a_big_graph_compiles_fused_on_the_kernels(nodes):
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    x = f32(4, 8, seed=4)
    with bounded(GRAPH_SECONDS, f"compiling a {nodes:,}-node graph"):
        compiled = Chain(nodes).compile(Tensor(x))
    kernels = nodes // 200   # composite_op_limit_size
    assert compiled.kernel_count == kernels and len(compiled.graph.nodes) == kernels
    assert_close(compiled(Tensor(x)).asnumpy(), chain_reference(x, nodes), bitwise=True)
