"""MatMul in every layout the training step uses, against numpy's contiguous float32 call.

    python bench/gemm_layouts.py [--rounds 7] [--out bench/results]

For each case, graphkernel's GEMM (kernels/matmul.py: BLAS at one thread, large products split in fixed
chunks over graphkernel's pool) on the case's layout (transposed operands are views, as the executor
passes them) against `np.matmul` on C-contiguous float32 operands of the same product with numpy's
own BLAS threads; both on the same thread count (the pool's), interleaved, medians of `--rounds`
rounds. float16 cases widen to float32 (float32 accumulation): they are compared with the float32
call plus the conversions (operands and result, timed apart). Target: every ratio <= 1.2. The load
average is printed beside the figures; nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ir import GraphBuilder  # noqa: E402
from kernels import threads  # noqa: E402
from kernels.matmul import gemm_fn, plan_chunks  # noqa: E402

# (name, op, shape of a, shape of b, transpose_a, transpose_b, dtype): BERT-large, batch 2, seq 128,
# 16 heads, and the masked-LM head over 40 masked positions and a 30522-word vocabulary
CASES = [
    ("FFN in", "MatMul", (256, 1024), (1024, 4096), False, False, "float32"),
    ("dense, weight transposed", "MatMul", (256, 1024), (4096, 1024), False, True, "float32"),
    ("weight gradient x^T dy", "MatMul", (256, 1024), (256, 4096), True, False, "float32"),
    ("input gradient dy W^T", "MatMul", (256, 4096), (1024, 4096), False, True, "float32"),
    ("both transposed", "MatMul", (1024, 256), (4096, 1024), True, True, "float32"),
    ("attention scores Q K^T", "BatchMatMul", (32, 128, 64), (32, 128, 64), False, True, "float32"),
    ("attention context P V", "BatchMatMul", (32, 128, 128), (32, 128, 64), False, False, "float32"),
    ("attention grad P^T dC", "BatchMatMul", (32, 128, 128), (32, 128, 64), True, False, "float32"),
    ("MLM head x W^T", "MatMul", (40, 1024), (30522, 1024), False, True, "float32"),
    ("MLM input grad dy W", "MatMul", (40, 30522), (30522, 1024), False, False, "float32"),
    ("MLM weight grad dy^T x", "MatMul", (40, 30522), (40, 1024), True, False, "float32"),
    ("FFN in, float16", "MatMul", (256, 1024), (1024, 4096), False, False, "float16"),
    ("dense weight transposed, float16", "MatMul", (256, 1024), (4096, 1024), False, True, "float16"),
]


def _node(op, shape_a, shape_b, ta, tb, dtype):
    b = GraphBuilder()
    x, y = b.input(shape_a, dtype), b.input(shape_b, dtype)
    return b.graph(b.op(op, x, y, transpose_a=ta, transpose_b=tb)).nodes[-1]


def _median(fn, seconds: float = 0.3, least: int = 3) -> float:
    fn()
    times, spent = [], 0.0
    while spent < seconds or len(times) < least:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        spent += times[-1]
    return statistics.median(times)


def measure(case, rounds: int) -> dict:
    name, op, shape_a, shape_b, ta, tb, dtype = case
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape_a).astype(dtype)
    b = rng.standard_normal(shape_b).astype(dtype)
    node = _node(op, shape_a, shape_b, ta, tb, dtype)
    fn = gemm_fn(node)
    out = np.empty(node.out.type.size, dtype)
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    # the same product on contiguous float32 operands
    xa = np.ascontiguousarray(np.swapaxes(a, -1, -2) if ta else a).astype(np.float32)
    xb = np.ascontiguousarray(np.swapaxes(b, -1, -2) if tb else b).astype(np.float32)
    ref_out = np.empty(np.broadcast_shapes(xa.shape[:-2], xb.shape[:-2]) + (xa.shape[-2], xb.shape[-1]), np.float32)

    def ours():
        with threads.blas_single_threaded():
            fn(flat_a, flat_b, out)

    def numpy_call():
        np.matmul(xa, xb, out=ref_out)
    conversions = 0.0
    numpy_call()
    if dtype == "float16":
        half_out = np.empty(ref_out.shape, np.float16)
        conversions = (_median(lambda: a.astype(np.float32)) + _median(lambda: b.astype(np.float32))
                       + _median(lambda: np.copyto(half_out, ref_out, casting="unsafe")))
    t_ours, t_np = [], []
    for r in range(rounds):
        pair = [(ours, t_ours), (numpy_call, t_np)]
        for f, into in (pair if r % 2 == 0 else pair[::-1]):
            into.append(_median(f))
    m, k = (shape_a[-1], shape_a[-2]) if ta else (shape_a[-2], shape_a[-1])
    n = shape_b[-2] if tb else shape_b[-1]
    batch = int(np.prod(node.out.shape[:-2]))
    ours_s, np_s = statistics.median(t_ours), statistics.median(t_np)
    return {"name": name, "dtype": dtype, "ours_ms": ours_s * 1e3, "numpy_ms": np_s * 1e3,
            "conversions_ms": conversions * 1e3, "ratio": ours_s / (np_s + conversions),
            "gflops": 2 * batch * m * n * k / ours_s / 1e9, "chunks": plan_chunks(batch, m, n, k)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", help="write the table as markdown into this folder")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    rows = [measure(c, args.rounds) for c in CASES]
    lines = [f"GEMM layouts, {threads.pool_threads()} threads, {time.strftime('%Y-%m-%d %H:%M')}; load average "
             f"{load[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end; medians of {args.rounds} interleaved "
             "rounds", "",
             "| case | dtype | ours ms | np.matmul contiguous f32 ms | + conversions ms | ratio | GFLOPS | chunks |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        axis, bounds = r["chunks"]
        lines.append(f"| {r['name']} | {r['dtype']} | {r['ours_ms']:.2f} | {r['numpy_ms']:.2f} | "
                     f"{r['conversions_ms']:.2f} | {r['ratio']:.2f} | {r['gflops']:.0f} | "
                     f"{axis if axis == 'none' else f'{len(bounds)} over {axis}'} |")
    worst = max(rows, key=lambda r: r["ratio"])
    lines += ["", f"Worst: {worst['name']} {worst['ratio']:.2f} (target <= 1.2 for every case)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, f"gemm_layouts_{time.strftime('%Y-%m-%d')}.md")
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
