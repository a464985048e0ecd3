"""A generated kernel's launch: the choices its sizes decide, its build, and the call that runs it.

    choose_launch(spec, sizes, core_num) -> (variant, block_dim, tile, lanes)
        variant     elementwise | rows | columns | split (reductions, by the kept and reduced sizes)
        block_dim   blocks of the AI Core grid (aicore.block_dim_for; 1 for a float16 ReduceSum)
        tile        elements an elementwise block walks at a time (a segment), a split kernel's chunk;
                    for rows and columns the units whose live data fit the UB (the plan shows it;
                    their kernels walk a block's units one by one, the same order)
    threads_for(spec, sizes, block_dim, min_elements) -> threads
        one thread below min_elements weighted points (work_weight), else min(block_dim, the
        pool's threads: kernels/threads.py)
    build_kernel(spec, variant, sig, cfg[, background]) -> Built
        the one build sequence of every generated kernel: render the source, fetch the compiled
        kernel from the cache (or build it), write the source with --dump_as_text; in the background
        (--compile_mode=background) a kernel missing from the cache is left to the builder
        (kernels/background.py) and comes back pending, its launches on a stand-in meanwhile
    launch_of(fn, block_dim, threads, extra, split) -> (callable, its scalar arguments)
        how the executor calls it: one thread calls the kernel once over every block,
        `fn(*arrays, *extra, 0, block_dim[, 1])`; several threads call a ParallelLaunch, which runs
        the blocks in chunks on kernels.threads' pool (a split kernel folds its partials after)

The kernel is the same compiled function whatever the thread count: a block computes the same bits
on any thread, so a launch's results do not depend on the threads it runs on.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ir.filenames import path_in, safe_filename
from ir.ops import Cost, Pattern, get
from kernels import aicore, threads
from kernels.background import builder as background_builder
from kernels.cache import fetch_kernel, lookup_kernel
from kernels.codegen import render
from kernels.emitters import EMITTERS, Operands, math_functions
from kernels.layout import KernelSpec, const_value
from kernels.reduction import split_supported

SPLIT_MAX_UNITS = 64        # a reduction over fewer units than this may split its rows into chunks
COLUMN_LANES = 128          # columns per unit of a column reduction (one accumulator each)
COLUMN_MIN = 16             # a narrower kept last axis reduces by rows: its units share cache lines
CHUNKS_PER_THREAD = 4       # a parallel launch's blocks are cut into this many chunks per thread: a
                            # thread the OS does not run holds back at most one chunk of the launch


# --- choices from sizes ------------------------------------------------------------------------
def choose_launch(spec: KernelSpec, sizes: tuple[int, ...], core_num: int) -> tuple[str, int, int, int]:
    """(variant, block_dim, tile, lanes) of a kernel at these sizes. The tile keeps a tile's live
    data, inputs, outputs and one temporary per op, inside the UB."""
    variant, block_dim, tile = _launch(spec, sizes, core_num)
    if aicore.runs_single_core(spec.op_in_dtypes):
        block_dim = 1
    return variant, block_dim, tile, _lanes(variant)


def _live_bytes(spec: KernelSpec) -> int:
    """UB bytes one element of a tile keeps live: its inputs, outputs and one temporary per op."""
    return sum(d.itemsize for d, _ in spec.inputs + spec.outputs) + 4 * len(spec.op_names)


def ub_bytes(spec: KernelSpec, sizes: tuple[int, ...], variant: str, tile: int) -> int:
    """The UB bytes one tile of a launch budgets (what choose_launch fits into aicore.UB_BYTES; a single
    reduced row larger than the UB goes over it)."""
    reduced = math.prod(d for d, r in zip(sizes, spec.reduce_axes) if r)
    elements = {"rows": tile * reduced, "columns": tile * reduced * COLUMN_LANES}.get(variant, tile)
    return elements * _live_bytes(spec)


def _launch(spec: KernelSpec, sizes: tuple[int, ...], core_num: int) -> tuple[str, int, int]:
    live = _live_bytes(spec)
    if not spec.has_reduce:
        total = math.prod(sizes)
        return "elementwise", aicore.block_dim_for(total, core_num), aicore.tile_elements(live)
    kept = math.prod(d for d, r in zip(sizes, spec.reduce_axes) if not r)
    reduced = math.prod(d for d, r in zip(sizes, spec.reduce_axes) if r)
    inner = max(a for a, r in enumerate(spec.reduce_axes) if r)
    chunk = aicore.REDUCE_CHUNK_ELEMENTS
    if split_supported(spec) and sizes[inner] >= 2 * chunk and kept < SPLIT_MAX_UNITS:
        chunks = kept * -(-sizes[inner] // chunk)
        return "split", aicore.block_dim_for(chunks, core_num, elements_per_item=chunk), chunk
    if not spec.reduce_axes[-1] and sizes[-1] >= COLUMN_MIN:  # the last axis is kept: column tiles
        units = (kept // sizes[-1]) * -(-sizes[-1] // COLUMN_LANES)
        work = reduced * COLUMN_LANES
        return ("columns", aicore.block_dim_for(units, core_num, elements_per_item=work),
                max(1, aicore.tile_elements(live) // max(1, work)))   # a zero-size reduced axis: no work
    block_dim = aicore.block_dim_for(kept, core_num, elements_per_item=reduced)
    return "rows", block_dim, max(1, aicore.tile_elements(live) // max(1, reduced))


def _lanes(variant: str) -> int:
    """The `lanes` argument: columns per unit of a column reduction (rows and split kernels accumulate
    in kernels.lanes' fixed 64 lanes; elementwise kernels take none)."""
    return COLUMN_LANES if variant == "columns" else 1


def work_weight(spec: KernelSpec) -> float:
    """aicore.work_weight of a kernel: its passes over the data, and the transcendentals and divides
    it computes per point (a value computed once per row after a reduction does not count)."""
    consts = {n: const_value(node) for n, node in enumerate(spec.nodes) if node.op == "Const"}
    per_point = [_point_cost(node, consts) for node in spec.nodes
                 if not (node.reduced and spec.has_reduce and node.phase >= 1)
                 and node.op != "Const" and get(node.op).pattern != Pattern.REDUCE]
    return aicore.work_weight(spec.num_passes, per_point.count(Cost.TRANSCENDENTAL), per_point.count(Cost.DIVIDE))


def _point_cost(node, consts: dict) -> Cost:
    """The op's cost class, but a transcendental whose emitted expression calls no function (Pow by a
    small integer: multiplications) costs as arithmetic."""
    cost = get(node.op).cost
    if cost != Cost.TRANSCENDENTAL or node.op not in EMITTERS:
        return cost
    args = [f"a{k}" for k in range(len(node.args))]
    operand_consts = tuple(consts.get(ref[1]) if ref[0] == "v" else None for ref in node.args)
    expr = EMITTERS[node.op](Operands(args, node.in_dtypes, node.dtypes, dict(node.attrs), operand_consts))
    return cost if ("math." in expr or "**" in expr or any(f"{fn}(" in expr for fn in math_functions())) \
        else Cost.ARITH


def threads_for(spec: KernelSpec, points: int, block_dim: int, min_elements: int) -> int:
    """Threads a launch of `block_dim` blocks over `points` iteration points runs on (aicore.launch_threads,
    the points weighed by work_weight)."""
    return aicore.launch_threads(block_dim, points, min_elements, work_weight(spec))


# --- the build -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Built:
    name: str           # the kernel's name: its structure and a hash of its source
    source: str
    fn: object          # the compiled kernel (a numba dispatcher)
    origin: str         # the cache's answer: "compiled", "disk" or "memory"; "pending": building
    job: object = None  # the background build (kernels/background.py) when pending; fn is None then


def build_kernel(spec, variant: str, sig: tuple, cache_mode: str, cache_dir: str | None,
                 source_dir: str | None, background: bool = False) -> Built:
    """Render the kernel of `spec` in `variant`, fetch it from the kernel cache or build it for `sig`,
    and write its source into `source_dir` (--dump_as_text) when given. With `background`, a kernel
    missing from the cache (memory and disk) is not built here: it comes back pending (origin
    "pending", `job` set, no `fn`), its build queued on kernels/background.py's builder and shared
    with every program asking for it."""
    name, source = render(spec, variant)
    if source_dir:
        write_source(source_dir, name, source)
    if not background:
        fn, origin = fetch_kernel(name, name, source, sig, cache_mode, cache_dir)
        return Built(name, source, fn, origin)
    builder = background_builder()
    job = builder.job_of(name, cache_dir)
    if job is not None and job.state == "ready":
        return Built(name, source, job.dispatcher, "memory")
    if job is None or job.state == "failed":
        found = lookup_kernel(name, name, source, sig, cache_mode, cache_dir)
        if found is not None:
            return Built(name, source, found[0], found[1])
    job = builder.submit(name, source, sig, cache_mode, cache_dir)
    return Built(name, source, None, "pending", job)


def write_source(directory: str, name: str, source: str) -> None:
    """The kernel's source as `directory/<name>.py` (--dump_as_text), the name made safe and the
    path checked to stay inside `directory` (ir.filenames)."""
    os.makedirs(directory, exist_ok=True)
    path = path_in(directory, safe_filename(name) + ".py")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(source)


# --- the call ------------------------------------------------------------------------------------
class ParallelLaunch:
    """A kernel launched over the pool's threads: called as the kernel is, without the block range,
    `launch(*arrays, *scalars)`, it runs the blocks in `chunks` contiguous chunks, one kernel call each,
    on kernels.threads.pool(); a split kernel (`fold`) then folds its partials in one more call."""

    def __init__(self, fn, block_dim: int, chunks: int, fold: bool):
        self.fn, self.fold = fn, fold
        self.bounds = [(k * block_dim // chunks, (k + 1) * block_dim // chunks) for k in range(chunks)]

    def __call__(self, *args):
        fn, bounds = self.fn, self.bounds
        if self.fold:
            threads.pool().run(lambda k: fn(*args, *bounds[k], 0), len(bounds))
            fn(*args, 0, 0, 1)
        else:
            threads.pool().run(lambda k: fn(*args, *bounds[k]), len(bounds))


def launch_of(fn, block_dim: int, n_threads: int, extra: tuple, fold: bool) -> tuple[object, tuple]:
    """(the callable a step calls, its scalar arguments after the arrays): the kernel itself over every
    block on one thread, or a ParallelLaunch over the pool."""
    if n_threads <= 1 or block_dim <= 1:
        return fn, extra + (0, block_dim) + ((1,) if fold else ())
    chunks = min(block_dim, n_threads * CHUNKS_PER_THREAD)
    return ParallelLaunch(fn, block_dim, chunks, fold), extra
