"""deterministic ("ON"/"OFF", MindSpore 2.x's spelling; 1/0, seed 004's): the same bits for any number of
BLAS and graphkernel threads, MatMul included. OpenBLAS's float32 products change with its thread count:
the emulated device cuts GEMMs into fixed chunks, each on one BLAS thread (kernels/matmul.py), whatever the
setting; with it on, the numpy reference runs its MatMuls on one BLAS thread. `ms.set_deterministic(bool)` sets it;
the spellings accepted and refused are MindSpore 2.10's."""
import hashlib
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import graphkernel as ms
from graphkernel import GraphKernelError, Tensor, context
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from kernels import threads as pool
from kernels.threads import blas_single_threaded as one_blas_thread
from threadpoolctl import threadpool_info


def blas_threads() -> int | None:
    """The BLAS thread count now (None: no BLAS library threadpoolctl knows)."""
    counts = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    return counts[0] if counts else None


class Products(Cell):   # the generated kernels never depend on threads (tests/test_kernels_determinism.py)
    def __init__(self):
        super().__init__()
        self.mm, self.bmm = P.MatMul(transpose_b=True), P.BatchMatMul()

    def construct(self, x, w, q, k):
        return self.mm(x, w), self.bmm(q, k)


def bits(threads: int) -> str:
    """The result bits of Products with OpenBLAS and graphkernel's pool set to `threads` threads (float32
    products of these sizes differ in their last bits between 1 and 2 BLAS threads when nothing holds them)."""
    rng = np.random.default_rng(0)
    args = [Tensor(rng.standard_normal(s).astype(np.float32))
            for s in ((256, 1024), (1024, 1024), (4, 128, 128), (4, 128, 128))]
    saved = pool.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads, user_api="blas"):
            y, s = Products()(*args)
    finally:
        pool.set_num_threads(saved)
    return hashlib.sha256(y.asnumpy().tobytes() + s.asnumpy().tobytes()).hexdigest()


@pytest.mark.parametrize("target", ["Ascend", "CPU"])
def test_on_gives_the_same_bits_for_one_and_two_blas_threads(target):
    context.set_context(device_target=target, deterministic="ON")
    assert bits(1) == bits(2)


def test_the_device_gives_the_same_bits_for_one_and_two_threads_with_it_off():
    context.set_context(device_target="Ascend", deterministic="OFF")
    assert bits(1) == bits(2)


def test_a_matmul_runs_on_one_blas_thread_and_the_count_comes_back(two_settings):
    seen = []
    before = blas_threads()

    def spy(x):
        seen.append(blas_threads())
        return x

    class Net(Cell):
        def construct(self, a, b):
            return P.MatMul()(a, b) + 1.0

    a = Tensor(np.ones((8, 8), np.float32))
    context.set_context(deterministic="ON")
    real = np.matmul
    np.matmul = lambda *args, **kw: spy(real(*args, **kw))
    try:
        out = Net()(a, a)
    finally:
        np.matmul = real
    np.testing.assert_array_equal(out.asnumpy(), np.full((8, 8), 9, np.float32))
    assert seen and set(seen) == {1}
    assert blas_threads() == before


def test_one_blas_thread_nests_and_is_shared_by_threads():
    before = blas_threads()
    if before is None:
        pytest.skip("no BLAS library that threadpoolctl knows is loaded")
    inside = []

    def worker():
        with one_blas_thread():
            inside.append(blas_threads())

    with one_blas_thread():
        with one_blas_thread():
            assert blas_threads() == 1
        assert blas_threads() == 1
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert blas_threads() == 1
    assert inside == [1] and blas_threads() == before


@pytest.mark.parametrize("value, stored", [("ON", "ON"), ("OFF", "OFF"), (1, 1), (0, 0)])
def test_spellings(value, stored):
    context.set_context(deterministic=value)
    assert context.get_context("deterministic") == stored


@pytest.mark.parametrize("value", ["on", True, 2, None])
def test_refused_spellings_name_the_accepted_ones(value):
    # MindSpore 2.10: "must be one of ['ON', 'OFF'], but got on" (a ValueError), TypeError for non-strings
    with pytest.raises(GraphKernelError, match=r"deterministic=.*accepted: 'ON' or 'OFF'"):
        context.set_context(deterministic=value)


def test_set_deterministic():
    ms.set_deterministic(True)
    assert ms.get_context("deterministic") == "ON"
    ms.set_deterministic(False)
    assert ms.get_context("deterministic") == "OFF"
    for bad in ("ON", 1):   # MindSpore 2.10: "The parameter 'deterministic' must be <class 'bool'>"
        with pytest.raises(GraphKernelError, match="must be a bool"):
            ms.set_deterministic(bad)


def test_the_setting_is_part_of_the_compile_key(cpu):
    class Net(Cell):
        def construct(self, a):
            return P.MatMul()(a, a)

    net, a = Net(), Tensor(np.eye(4, dtype=np.float32))
    net(a)
    context.set_context(deterministic="ON")
    net(a)
    assert net.trace_count == 2
    assert net.compile(a).options.deterministic == 1
