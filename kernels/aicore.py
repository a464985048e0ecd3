"""The emulated Ascend AI Core: the device model the lowering and the cost model share.

    core_num AI Cores (default 32)  -> a launch has block_dim blocks, 1 <= block_dim <= core_num,
                                        run in chunks on the process's threads (kernels/threads.py)
    unified buffer (UB) 256 KiB/core -> each block walks its share in tiles that fit the UB
                                        together with the tile's live temporaries
    32-byte alignment               -> tile lengths are multiples of 32 bytes

The timing figures are those of this CPU backend on the project's 2-core VM, measured by
`bench/calibrate.py` (each figure's date and conditions beside it below; docs/benchmarks.md describes
the machine and the copy bandwidth the benchmarks measure): the cost model predicts kernel time from
them, so fusion decisions follow what this machine really does.
"""
from __future__ import annotations

from kernels import threads

DEFAULT_CORE_NUM = 32
UB_BYTES = 256 * 1024
ALIGN_BYTES = 32

# --- timing figures of the backend (seconds, bytes/second, operations/second) ---
# bench/calibrate.py on this machine, 2026-11-23 (2 threads, idle), rounded; the earlier figures of
# 2026-11-22 were taken under load, with libm's exp and numba's reduction loops
LAUNCH_SECONDS = 0.25e-6           # a sequential kernel call from the executor
PARALLEL_LAUNCH_SECONDS = 50e-6    # extra for a launch over the pool: waking the sleeping workers and
                                   # joining (kernels/threads.py); only launches whose weighted points
                                   # (work_weight) reach PARALLEL_MIN_ELEMENTS pay it
BANDWIDTH_CACHED = 120e9           # bytes/s when the working set fits the 32 MB L3
BANDWIDTH_DRAM = 35e9              # bytes/s beyond it
CACHE_BYTES = 32 * 1024 * 1024
OPS_PER_SECOND_PER_THREAD = 140e9  # vectorized float32 elementwise operations per thread
TRANSCENDENTAL_COST = 100          # an exp/tanh/erf/log (kernels.mathfn) counts as this many operations
MIN_ELEMENTS_PER_BLOCK = 32 * 1024  # below this a block is not worth a block of its own
PARALLEL_MIN_ELEMENTS = 1 << 20     # a launch over fewer weighted iteration points runs its blocks in
                                    # turn on one thread: waking the other threads costs microseconds on
                                    # an idle machine and a scheduler tick (4 ms) when they were
                                    # descheduled (a machine busier than its cores: then every parallel
                                    # launch, heavy mid-size ones as much as the 1M-point ones, waits)
TRANSCENDENTAL_WEIGHT = 3           # work_weight: an exp/log/tanh/erf per point, in passes
DIVIDE_WEIGHT = 0.5                 # ... a divide or square root per point
REDUCE_CHUNK_ELEMENTS = 16 * 1024   # a long reduced row is cut into chunks of this many elements;
                                    # fixed, never derived from block_dim, so results are bitwise stable
FLOAT16_OP_COST = 3                # a float16 primitive: widen the bits, compute, round back
DIVIDE_COST = 4                    # a vectorized divide or square root
SINGLE_THREAD_BANDWIDTH_SHARE = 0.9  # the share of the bandwidth figures one thread reaches alone


def host_threads() -> int:
    """Threads a parallel launch runs on (kernels.threads: the cores the process is allowed)."""
    return threads.pool_threads()


def launch_threads(block_dim: int, elements: int, min_elements: int = PARALLEL_MIN_ELEMENTS,
                   weight: float = 1.0) -> int:
    """Host threads a launch of `block_dim` blocks over `elements` iteration points runs on: the
    blocks are spread over the pool's threads only when there is enough work to share, the
    points weighed by what one costs (`work_weight`): a Softmax row costs several copies' worth."""
    if block_dim <= 1 or elements * weight < min_elements:
        return 1
    return max(1, min(block_dim, host_threads()))


def work_weight(passes: int, transcendentals: int, divides: int) -> float:
    """What one iteration point of a kernel costs, in points of a one-pass elementwise kernel (a copy):
    a sweep over the data per pass, an exp/tanh/erf/log per point (kernels.mathfn, ~30 vector
    instructions per 8 lanes) about three, a divide half of one (one thread, rows in cache: a copy
    0.16 ns per element, exp 0.5, Softmax(128) 1.4). A 256x1024 Softmax is then worth the thread
    wake-up (~12 us with sleeping workers) and an x*2+1 of that size is not."""
    return float(passes + TRANSCENDENTAL_WEIGHT * transcendentals + DIVIDE_WEIGHT * divides)


def bandwidth(working_set_bytes: int) -> float:
    return BANDWIDTH_CACHED if working_set_bytes <= CACHE_BYTES else BANDWIDTH_DRAM


def block_dim_for(parallel_items: int, core_num: int = DEFAULT_CORE_NUM, *, single_core: bool = False,
                  elements_per_item: int = 1) -> int:
    """Blocks for a launch over `parallel_items` independent items (rows, or elements).

    `single_core` forces one block: a float16 ReduceSum runs like that on the
    real AI Core, and so it does here.
    """
    if single_core or parallel_items <= 1:
        return 1
    by_work = (parallel_items * elements_per_item) // MIN_ELEMENTS_PER_BLOCK
    return max(1, min(core_num, parallel_items, by_work))


def runs_single_core(reductions) -> bool:
    """Whether a kernel holding these (op, input dtype name) reductions runs with block_dim 1: a float16
    ReduceSum does on the AI Core. The lowering and the cost model both ask here."""
    return any(op == "ReduceSum" and dtype == "float16" for op, dtype in reductions)


def align_elements(n: int, itemsize: int) -> int:
    """n rounded down to a whole number of 32-byte units (at least one unit)."""
    unit = max(1, ALIGN_BYTES // itemsize)
    return max(unit, n - n % unit)


def tile_elements(bytes_per_element: int) -> int:
    """Elements per UB tile when every element needs `bytes_per_element` of live UB storage
    (the tile's inputs, outputs and temporaries together)."""
    return align_elements(UB_BYTES // max(1, bytes_per_element), 4)


def block_range(total: int, block_dim: int, block: int) -> tuple[int, int]:
    """[start, stop) of the items block `block` of `block_dim` covers: contiguous, balanced, exact."""
    base, extra = divmod(total, block_dim)
    start = block * base + min(block, extra)
    return start, start + base + (1 if block < extra else 0)
