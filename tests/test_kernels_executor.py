"""The executor: buffers, outputs, inputs, threads, memory, opaque ops, fallbacks, dumps, profiler."""
import gc
import os
import resource
import shutil
import subprocess
import threading

import numpy as np
import pytest

import kernels
from ir.dot import to_dot
from kernels import DeviceConfig, InputMismatchError, KernelBuildWarning, kernel_graph_dot, lower
from ir import GraphBuilder
from tests.kernel_graphs import fused, random_array, reference
from tests.tolerance import assert_close

CFG = DeviceConfig()


@pytest.fixture(scope="module")
def chain():
    """x -> (x*2+1)**3 -> Exp -> sum over rows: three kernels unfused, with temporaries."""
    b = GraphBuilder()
    x = b.input((4, 8))
    y = b.op("Pow", b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0)), b.const(3.0))
    z = b.op("ReduceSum", b.op("Exp", b.op("Mul", y, b.const(0.01))), axis=(1,))
    g = b.graph(z, y)
    return g, lower(g, CFG)


def test_chain_matches_reference_and_reuses_temps(chain):
    g, program = chain
    a = random_array((4, 8))
    for got, want in zip(program.run([a]), reference(g, [a])):
        assert_close(got, want, rtol_scale=3)
    assert len(program.kernels) == 6
    biggest = max(v.type.nbytes for n in g.nodes for v in n.outputs)
    assert program.temp_bytes <= 2 * biggest  # liveness packs 4 temporaries into 2 blocks


def test_fusion_does_not_raise_peak_memory(chain):
    g, unfused = chain
    fused_program = lower(fused(g), CFG)
    assert len(fused_program.kernels) == 1 and fused_program.temp_bytes == 0
    assert fused_program.peak_bytes <= unfused.peak_bytes


def test_inputs_never_modified(chain):
    _, program = chain
    a = random_array((4, 8))
    keep = a.copy()
    program.run([a])
    assert_close(a, keep, bitwise=True)


def test_output_kept_by_caller_is_not_overwritten(chain):
    _, program = chain
    a, c = random_array((4, 8), seed=1), random_array((4, 8), seed=2)
    first = program.run([a])
    kept = [o.copy() for o in first]
    second = program.run([c])
    for f, k in zip(first, kept):
        assert_close(f, k, bitwise=True)
    assert all(s is not f for s, f in zip(second, first))


def test_output_buffer_reused_once_released(chain):
    _, program = chain
    a = random_array((4, 8))
    out = program.run([a])[1]
    address = out.ctypes.data
    del out
    assert program.run([a])[1].ctypes.data == address
    view = program.run([a])[1][0]  # a view keeps the buffer alive too
    assert program.run([a])[1].ctypes.data != view.ctypes.data


def test_noncontiguous_and_readonly_inputs(chain):
    g, program = chain
    big = random_array((8, 8))
    a = big[::2]
    ro = random_array((4, 8))
    ro.setflags(write=False)
    for arr in (a, ro):
        assert_close(program.run([arr])[1], reference(g, [np.ascontiguousarray(arr)])[1])


def test_wrong_input_is_a_clear_error(chain):
    _, program = chain
    with pytest.raises(InputMismatchError, match=r"float32\[4, 8\]"):
        program.run([np.zeros((4, 9), np.float32)])
    with pytest.raises(InputMismatchError, match="float64"):
        program.run([np.zeros((4, 8), np.float64)])
    with pytest.raises(InputMismatchError, match="takes 1 inputs"):
        program.run([])


def test_four_threads_share_one_program(chain):
    g, program = chain
    inputs = [random_array((4, 8), seed=s) for s in range(4)]
    wants = [reference(g, [a]) for a in inputs]
    errors = []

    def work(k):
        try:
            for _ in range(200):
                outs = program.run([inputs[k]])
                for got, want in zip(outs, wants[k]):
                    assert_close(got, want, rtol_scale=3)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_thousand_calls_do_not_grow_memory():
    b = GraphBuilder()
    x = b.input((256, 256))
    g = b.graph(b.op("Exp", b.op("Mul", x, b.const(0.5))))
    program = lower(g, CFG)
    a = random_array((256, 256))
    for _ in range(20):
        program.run([a])
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(1000):
        program.run([a])
    gc.collect()
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib * 1024 < 4 * a.nbytes, f"RSS grew by {grown_kib} KiB"


def test_opaque_and_view_ops():
    b = GraphBuilder()
    x, w = b.input((2, 3, 4)), b.input((2, 4, 5))
    m = b.op("BatchMatMul", x, w)
    r = b.op("Reshape", m, shape=(6, 5))
    t = b.op("Transpose", r, perm=(1, 0))
    mm = b.op("MatMul", t, b.op("Reshape", x, shape=(6, 4)))
    sm = b.op("Softmax", mm)  # an unexpanded composite op: the numpy reference
    g = b.graph(sm, r, x)
    arrays = [random_array((2, 3, 4)), random_array((2, 4, 5), seed=1)]
    program = lower(g, CFG)
    outs = program.run(arrays)
    for got, want in zip(outs, reference(g, arrays)):
        assert_close(got, want, rtol_scale=3)
    assert outs[2] is not arrays[0]
    variants = {k.name: k.variant for k in program.kernels}
    assert variants["Softmax"] == "reference" and variants["BatchMatMul"] == "numpy"


def test_constant_and_duplicate_outputs():
    b = GraphBuilder()
    x = b.input((3,))
    c = b.const([1.0, 2.0, 3.0])
    y = b.op("Add", x, c)
    g = b.graph(y, y, c)
    a = random_array((3,))
    outs = lower(g, CFG).run([a])
    assert outs[0] is not outs[1]
    assert_close(outs[1], a + np.float32([1, 2, 3]))
    assert_close(outs[2], np.float32([1, 2, 3]))


def test_build_failure_inlines_composite(monkeypatch):
    b = GraphBuilder()
    x = b.input((4, 4))
    g = fused(b.graph(b.op("Tanh", b.op("Mul", x, b.const(3.0)))), name="Fused_Mul_Tanh_7")
    real = kernels.emitters.EMITTERS["Tanh"]
    calls = []

    def broken_when_fused(o):
        calls.append(1)
        return real(o) if o.args[0].startswith("ld_") else "undefined_function_xyz(" + o.args[0] + ")"
    monkeypatch.setitem(kernels.emitters.EMITTERS, "Tanh", broken_when_fused)
    a = random_array((4, 4))
    with pytest.warns(KernelBuildWarning, match="Fused_Mul_Tanh_7"):
        program = lower(g, DeviceConfig(cache_mode="disable"))
    assert [k.op_types for k in program.kernels] == [("Mul",), ("Tanh",)]
    assert_close(program.run([a])[0], reference(g, [a])[0], rtol_scale=3)


def test_single_op_build_failure_uses_reference(monkeypatch):
    monkeypatch.setitem(kernels.emitters.EMITTERS, "Neg", lambda o: "undefined_function_xyz()")
    b = GraphBuilder()
    x = b.input((5,))
    g = b.graph(b.op("Neg", x))
    with pytest.warns(KernelBuildWarning, match="Neg"):
        program = lower(g, DeviceConfig(cache_mode="disable"))
    a = random_array((5,))
    assert_close(program.run([a])[0], -a, bitwise=True)
    assert program.kernels[0].variant == "reference"


def test_kernel_graph_dot_and_sources(chain, tmp_path):
    g, _ = chain
    program = lower(g, DeviceConfig(source_dir=str(tmp_path)))
    text = kernel_graph_dot(program, "kernel_graph_0")
    assert text == kernel_graph_dot(program, "kernel_graph_0")
    assert text.count("block_dim=") == len(program.kernels)
    assert text.count(" -> ") >= len(program.kernels)
    if shutil.which("dot"):
        (tmp_path / "kg.dot").write_text(text)
        subprocess.run(["dot", "-Tsvg", str(tmp_path / "kg.dot"), "-o", os.devnull], check=True)
        (tmp_path / "kg.dot").unlink()
    written = sorted(os.listdir(tmp_path))
    assert written == sorted({f"{k.kernel}.py" for k in program.kernels if k.source})
    assert "def " in (tmp_path / written[0]).read_text()


def test_kernel_graph_is_drawn_in_the_stage_dumps_style(chain):
    """Same fonts for nodes, edges and the title, the title on top: the kernel graph sits beside the stage
    dumps (and in one report page) without looking like another tool's."""
    g, _ = chain
    kernel_graph = kernel_graph_dot(lower(g, DeviceConfig()), "kernel_graph_0").splitlines()
    stage = to_dot(g, "kernel_graph_0").splitlines()
    assert kernel_graph[1:6] == stage[1:6]
    assert '  edge [fontname="Helvetica", fontsize=10];' in kernel_graph and any("labelloc=t" in ln for ln in kernel_graph)


def test_profiler_records_each_kernel(chain):
    _, program = chain

    class Recorder:
        def __init__(self):
            self.rows = []

        def record(self, info, seconds):
            self.rows.append((info.name, seconds))
    program.profiler = rec = Recorder()
    try:
        program.run([random_array((4, 8))])
    finally:
        program.profiler = None
    assert [r[0] for r in rec.rows] == [k.name for k in program.kernels]
    assert all(s >= 0 for _, s in rec.rows)


def test_seed_net_is_one_kernel_per_launch():
    b = GraphBuilder()
    x = b.input((4, 4))
    g = fused(b.graph(b.op("Pow", b.op("Add", b.op("Mul", x, b.const(2.0)), b.const(1.0)), b.const(3.0))))
    program = lower(g, CFG)
    (info,) = program.kernels
    assert info.name == "Fused_Mul_Add_Pow_0" and info.kernel.startswith("Fused_Mul_Add_Pow_")
    assert info.kernel != info.name and info.block_dim == 1 and info.target == "device"
