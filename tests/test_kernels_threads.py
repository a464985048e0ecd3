"""kernels/threads.py, kernels/launch.py's ParallelLaunch and kernels/matmul.py: the pool owns the
process's cores, a launch's chunks go to whichever thread is free, and the bits never depend on the
thread count."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from ir import GraphBuilder
from kernels import DeviceConfig, lower, threads
from kernels.matmul import GEMM_PARALLEL_FLOPS, MAX_CHUNKS, gemm_fn, plan_chunks
from tests.kernel_graphs import random_array

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _report_threads(prefix: list[str], env: dict | None = None) -> int:
    code = "from kernels import threads, aicore; print(threads.allowed_threads(), aicore.host_threads())"
    out = subprocess.run(prefix + [sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO, env={**os.environ, **(env or {})}).stdout.split()
    assert out[0] == out[1], "the launch model and the pool disagree on the thread count"
    return int(out[0])


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_the_thread_count_follows_the_allowed_cores():
    env = {"NUMBA_NUM_THREADS": ""}
    assert _report_threads(["taskset", "-c", "0"], env) == 1
    assert _report_threads([], env) == len(os.sched_getaffinity(0))


def test_numba_num_threads_caps_the_pool():
    assert _report_threads([], {"NUMBA_NUM_THREADS": "1"}) == 1


def test_set_num_threads_checks_its_argument():
    with pytest.raises(ValueError, match="positive int"):
        threads.set_num_threads(0)


def test_every_chunk_runs_once_and_a_stalled_thread_holds_back_only_its_own():
    pool = threads.CorePool(3)
    try:
        ran, who = [], {}
        lock = threading.Lock()

        def task(k):
            if k == 0:
                time.sleep(0.3)     # a worker the OS does not run: its chunk takes long
            with lock:
                ran.append(k)
                who.setdefault(threading.get_ident(), []).append(k)
        pool.run(task, 40)
        assert sorted(ran) == list(range(40))
        slow = next(t for t, ks in who.items() if 0 in ks)
        assert who[slow] == [0], "the thread holding the slow chunk took no other: the rest went elsewhere"
    finally:
        pool.close()


def test_an_exception_in_a_chunk_reaches_the_caller_and_the_pool_goes_on():
    pool = threads.CorePool(2)
    try:
        def bad(k):
            if k == 3:
                raise ZeroDivisionError("chunk 3")
        with pytest.raises(ZeroDivisionError, match="chunk 3"):
            pool.run(bad, 8)
        done = []
        pool.run(done.append, 5)
        assert sorted(done) == list(range(5))
    finally:
        pool.close()


def test_a_busy_pool_runs_another_threads_launch_on_that_thread():
    pool = threads.CorePool(2)
    try:
        inside, release = threading.Event(), threading.Event()

        def holding(k):
            if k == 0:
                inside.set()
                release.wait(5)
        t = threading.Thread(target=pool.run, args=(holding, 2))
        t.start()
        assert inside.wait(5)
        mine = []
        pool.run(lambda k: mine.append(threading.get_ident()), 4)   # does not wait for the other launch
        assert mine == [threading.get_ident()] * 4
        release.set()
        t.join(5)
    finally:
        pool.close()


def _softmax_program(rows: int, cols: int, min_elements: int):
    b = GraphBuilder()
    x = b.input((rows, cols))
    m = b.op("ReduceMax", x, axis=(1,), keep_dims=True)
    e = b.op("Exp", b.op("Sub", x, m))
    g = b.graph(b.op("RealDiv", e, b.op("ReduceSum", e, axis=(1,), keep_dims=True)))
    from tests.kernel_graphs import fused
    return lower(fused(g), DeviceConfig(parallel_min_elements=min_elements))


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_a_launch_gives_the_same_bits_on_any_number_of_threads(n):
    """More workers than cores (7 on this machine) still complete, with the one-thread bits."""
    x = random_array((300, 257), seed=1)
    one = _softmax_program(300, 257, 1 << 40).run([x])[0].copy()
    saved = threads.set_num_threads(n)
    try:
        program = _softmax_program(300, 257, 0)
        assert program.steps[0].threads == min(n, threads.pool_threads(), program.kernels[0].block_dim)
        np.testing.assert_array_equal(program.run([x])[0], one)
    finally:
        threads.set_num_threads(saved)


@pytest.mark.parametrize("op,dtype", [("ReduceSum", "float32"), ("ReduceMax", "float16"), ("ReduceSum", "float16")])
def test_a_split_reduction_folds_its_partials_after_the_chunks(op, dtype):
    """The partials are the kernel's arguments, in the dtype it computes in (float32 for float16)."""
    b = GraphBuilder()
    x = b.input((3, 70000), dtype)
    g = b.graph(b.op(op, b.op("Mul", x, x), axis=(1,)))
    from tests.kernel_graphs import fused
    a = random_array((3, 70000), dtype, seed=2, low=-0.5, high=0.5)   # a float16 sum stays finite
    alone = lower(fused(g), DeviceConfig(parallel_min_elements=1 << 40))
    spread = lower(fused(g), DeviceConfig(parallel_min_elements=0))
    assert alone.kernels[0].variant == spread.kernels[0].variant == "split"
    np.testing.assert_array_equal(alone.run([a])[0], spread.run([a])[0])
    want = (a.astype(np.float64) ** 2)
    want = want.sum(1) if op == "ReduceSum" else want.max(1)
    np.testing.assert_allclose(alone.run([a])[0].astype(np.float64), want, rtol=1e-3 if dtype == "float16" else 1e-5)


# --- GEMMs ----------------------------------------------------------------------------------------
def test_gemm_chunks_depend_on_the_shape_only():
    assert plan_chunks(1, 8, 8, 8) == ("none", [(0, 0)])
    axis, bounds = plan_chunks(1, 256, 4096, 1024)
    assert axis == "n" and 1 < len(bounds) <= MAX_CHUNKS and bounds[0][0] == 0 and bounds[-1][1] == 4096
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert plan_chunks(1, 30522, 40, 1024)[0] == "m"
    assert plan_chunks(32, 128, 128, 64)[0] == "batch"
    assert 2 * 256 * 4096 * 1024 >= GEMM_PARALLEL_FLOPS


def _gemm_node(shape_a, shape_b, ta=False, tb=False, op="MatMul", dtype="float32"):
    b = GraphBuilder()
    x, y = b.input(shape_a, dtype), b.input(shape_b, dtype)
    out = b.op(op, x, y, transpose_a=ta, transpose_b=tb)
    return b.graph(out).nodes[-1]


CASES = {"n-panels": ((256, 512), (512, 1536), False, False, "MatMul"),
         "m-panels, b transposed": ((2048, 96), (128, 96), False, True, "MatMul"),
         "a transposed": ((512, 256), (512, 1024), True, False, "MatMul"),
         "batched": ((16, 128, 64), (16, 64, 128), False, False, "BatchMatMul"),
         "batched, broadcast weight": ((8, 128, 256), (1, 256, 512), False, False, "BatchMatMul")}


@pytest.mark.parametrize("case", list(CASES))
def test_gemm_bits_are_the_same_for_every_thread_count(case):
    shape_a, shape_b, ta, tb, op = CASES[case]
    node = _gemm_node(shape_a, shape_b, ta, tb, op)
    fn = gemm_fn(node)
    assert fn.chunks > 1, "the case reaches the parallel path"
    a, b = random_array(shape_a, seed=3), random_array(shape_b, seed=4)
    results = []
    saved = threads.set_num_threads(None)
    try:
        for n in (1, 2, 3):
            threads.set_num_threads(n)
            out = np.empty(node.out.type.size, np.float32)
            with threads.blas_single_threaded():
                fn(a.reshape(-1), b.reshape(-1), out)
            results.append(out)
    finally:
        threads.set_num_threads(saved)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    x = np.swapaxes(a, -1, -2) if ta else a
    y = np.swapaxes(b, -1, -2) if tb else b
    want = np.matmul(x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_allclose(results[0].reshape(want.shape), want, rtol=2e-5, atol=1e-4)


def test_float16_gemm_accumulates_in_float32():
    node = _gemm_node((256, 512), (512, 1536), dtype="float16")
    fn = gemm_fn(node)
    a = random_array((256, 512), seed=5).astype(np.float16)
    b = random_array((512, 1536), seed=6).astype(np.float16)
    out, wide = np.empty(256 * 1536, np.float16), np.empty(256 * 1536, np.float32)
    with threads.blas_single_threaded():
        fn(a.reshape(-1), b.reshape(-1), out)
        # the float32 product of the widened operands, the same chunks, rounded once
        gemm_fn(_gemm_node((256, 512), (512, 1536)))(a.astype(np.float32).reshape(-1),
                                                      b.astype(np.float32).reshape(-1), wide)
    np.testing.assert_array_equal(out, wide.astype(np.float16))


def test_blas_is_single_threaded_while_a_program_runs_and_restored_after():
    from threadpoolctl import threadpool_info
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    seen = []
    with threads.blas_single_threaded():
        with threads.blas_single_threaded():   # nested: one setting
            seen = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert seen == [1] * len(before) and after == before


def test_blas_libraries_are_looked_up_again_after_an_import(monkeypatch):
    """A BLAS a later import loads (scipy's, torch's) is held at one thread too: the lookup runs again
    once sys.modules has grown, and not while it has not."""
    import types

    import threadpoolctl
    calls = []
    real = threadpoolctl.ThreadpoolController

    class Counting(real):
        def __init__(self):
            calls.append(1)
            super().__init__()
    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", Counting)
    monkeypatch.setattr(threads, "_blas_controllers", (-1, []))
    threads._controllers()
    threads._controllers()
    assert len(calls) == 1
    monkeypatch.setitem(sys.modules, "graphkernel_test_new_module", types.ModuleType("graphkernel_test_new_module"))
    threads._controllers()
    assert len(calls) == 2
