"""MatMul and BatchMatMul: numpy's BLAS, split over the pool's threads in fixed chunks.

    gemm_fn(node) -> fn(a, b, out)      flat buffers in, the product written into `out`

A GEMM of at least GEMM_PARALLEL_FLOPS is cut into chunks that do not depend on the thread count:
    batched         groups of whole matrices of the batch
    one matrix      column panels of the output (N) when N >= M, else row panels (M): the operand
                    that is not cut is the one every chunk packs again, so the smaller one is
Each chunk is one np.matmul call into its slice of the output (BLAS takes strided panels as they
are), run on kernels.threads' pool, while the program holds BLAS at one thread
(threads.blas_single_threaded): every chunk is computed by one BLAS thread, the same way whichever
thread of the pool takes it, so the product's bits do not depend on how many threads there are.
float16 and bfloat16 operands are widened to float32 (float32 accumulation, one rounding at the end:
the reference's semantics).
"""
from __future__ import annotations

import math

import numpy as np

from ir.dtypes import HALF_NP
from ir.graph import Node
from kernels import threads

GEMM_PARALLEL_FLOPS = 1 << 24   # 16 MFLOP, ~0.1 ms on one thread: below it a GEMM is one call
MAX_CHUNKS = 16                 # chunks of a large GEMM (a fixed count: the bits never depend on threads)
PANEL_ALIGN = 64                # panel widths are multiples of this many columns (or rows)


def plan_chunks(batch: int, m: int, n: int, k: int) -> tuple[str, list[tuple[int, int]]]:
    """(axis, [(start, stop), ...]) of the chunks of a product of `batch` (m x k) @ (k x n) matrices:
    axis "batch", "n" or "m"; one chunk ("none") below GEMM_PARALLEL_FLOPS."""
    flops = 2 * batch * m * n * k
    if flops < GEMM_PARALLEL_FLOPS:
        return "none", [(0, 0)]
    if batch > 1:
        axis, length, align = "batch", batch, 1
    elif n >= m:
        axis, length, align = "n", n, PANEL_ALIGN
    else:
        axis, length, align = "m", m, PANEL_ALIGN
    count = min(MAX_CHUNKS, max(1, flops // GEMM_PARALLEL_FLOPS), max(1, length // align))
    width = -(-length // count)
    width = -(-width // align) * align
    bounds = [(s, min(s + width, length)) for s in range(0, length, width)]
    return (axis, bounds) if len(bounds) > 1 else ("none", [(0, 0)])


def gemm_fn(node: Node, shapes=None):
    """The executor's call for a MatMul/BatchMatMul node: fn(a, b, out) over flat buffers; `shapes` (a,
    b, out), the node's own when not given (a graph of symbolic sizes gives them per plan:
    kernels/plan.py), choose its chunks."""
    ta, tb = node.attr("transpose_a"), node.attr("transpose_b")
    shape_a, shape_b, out_shape = (tuple(s) for s in shapes) if shapes is not None else (
        node.inputs[0].shape, node.inputs[1].shape, tuple(node.out.shape))
    m, k = (shape_a[-1], shape_a[-2]) if ta else (shape_a[-2], shape_a[-1])
    n = shape_b[-2] if tb else shape_b[-1]
    batch = math.prod(out_shape[:-2])
    axis, bounds = plan_chunks(batch, m, n, k)
    half = node.out.dtype.np in HALF_NP

    def operands(a, b):
        x, y = a.reshape(shape_a), b.reshape(shape_b)
        x, y = np.swapaxes(x, -1, -2) if ta else x, np.swapaxes(y, -1, -2) if tb else y
        if half:   # float32 accumulation, one rounding: the reference's semantics
            x, y = x.astype(np.float32), y.astype(np.float32)
        batch_shape = out_shape[:-2]
        return np.broadcast_to(x, batch_shape + x.shape[-2:]), np.broadcast_to(y, batch_shape + y.shape[-2:])

    def matmul(a, b, out):
        x, y = operands(a, b)
        # inf and NaN propagate as IEEE says, silently, as in every kernel (a loss scale's overflow steps)
        with np.errstate(over="ignore", invalid="ignore"):
            if half:
                wide = np.empty(out_shape, np.float32)
                run_chunks(x, y, wide, batch, axis, bounds)
                np.copyto(out.reshape(out_shape), wide, casting="unsafe")
            else:
                run_chunks(x, y, out.reshape(out_shape), batch, axis, bounds)
    matmul.chunks = len(bounds)
    return matmul


def run_chunks(x: np.ndarray, y: np.ndarray, out: np.ndarray, batch: int, axis: str, bounds: list) -> None:
    """out = x @ y (x, y broadcast to out's batch shape), over the chunks of a plan_chunks plan."""
    if axis == "none":
        np.matmul(x, y, out=out)
        return
    if axis == "batch":
        xs, ys, outs = (v.reshape((batch,) + v.shape[-2:]) for v in (x, y, out))

        def task(c):
            part = slice(*bounds[c])
            np.matmul(xs[part], ys[part], out=outs[part])
    elif axis == "n":
        def task(c):
            part = slice(*bounds[c])
            np.matmul(x, y[..., part], out=out[..., part])
    else:
        def task(c):
            part = slice(*bounds[c])
            np.matmul(x[..., part, :], y, out=out[..., part, :])
    threads.pool().run(task, len(bounds))


def matmul_into(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    """out = x @ y for 2-D or batched operands of one batch shape (views are fine), chunked over the pool
    as gemm_fn's products are; for the other BLAS kernels (kernels/conv.py)."""
    batch = math.prod(out.shape[:-2])
    m, k, n = x.shape[-2], x.shape[-1], y.shape[-1]
    axis, bounds = plan_chunks(batch, m, n, k)
    if axis == "batch":
        x, y = np.broadcast_to(x, out.shape[:-2] + x.shape[-2:]), np.broadcast_to(y, out.shape[:-2] + y.shape[-2:])
    run_chunks(x, y, out, batch, axis, bounds)


def matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x @ y into a new array (matmul_into)."""
    out = np.empty(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1]),
                   np.result_type(x, y))
    matmul_into(x, y, out)
    return out
