"""One rank of `graphkernel bench --train --ranks N` (ranks_bench.py), or the single process it is compared with.

    mpiexec -n N python -m graphkernel.tools.bench.ranks_worker SHAPE_JSON STEPS WARMUP OUT_DIR
    python -m graphkernel.tools.bench.ranks_worker SHAPE_JSON STEPS WARMUP OUT_DIR      (one process)

The BERT-large encoder stack of `graphkernel bench --train` (train_model.py) as a TrainOneStepCell, fused,
on this rank's share of the batch: rank r of N takes samples [r*B/N, (r+1)*B/N) of the global batch B
(one process: all B) under DATA_PARALLEL with gradients_mean, so the mean of the ranks' losses is the
one process's loss (the loss is a mean over equal shares). Writes OUT_DIR/rank<r>.json:

    losses      the first WARMUP steps' losses (checked against the one process by ranks_bench.py)
    step_s      the STEPS timed steps' seconds
    buckets     the reducer's buckets: (name, Parameters, bytes)
    comm        per timed step: the seconds the communicator spent in the buckets' AllReduce, the seconds
                the main thread waited for them (the part the backward did not hide)
    blocking_s  the same buckets reduced one after another with nothing to overlap (a blocking AllReduce
                of each after the backward), per step: what the overlap is measured against
    bandwidth   a 64 MB float32 AllReduce's seconds (median of 5) and its bus bandwidth, 2(N-1)/N x bytes / s
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np

from graphkernel import Tensor, context
from graphkernel.communication import get_group_size, get_rank, init, management
from graphkernel.communication.parallel_context import ParallelMode, set_auto_parallel_context
from graphkernel.tools.bench.train_model import Shape, make_inputs, make_weights, train_step

PROBE_BYTES = 64 * 2 ** 20


def _share(inputs: dict, rank: int, size: int) -> list[Tensor]:
    out = []
    for name in ("x", "mask", "target"):
        a = inputs[name]
        n = a.shape[0] // size
        out.append(Tensor(np.ascontiguousarray(a[rank * n:(rank + 1) * n])))
    return out


def _blocking(comm, buckets, repeats: int) -> float:
    """Seconds to reduce every bucket in turn, blocking, per step (median over `repeats`)."""
    bufs = [np.ones(nbytes // 4, np.float32) for _, _, nbytes in buckets]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for b in bufs:
            comm.all_reduce(b, "sum", management.HCCL_WORLD_COMM_GROUP)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _bandwidth(comm, size: int) -> dict:
    buf = np.ones(PROBE_BYTES // 4, np.float32)
    times = []
    for _ in range(6):
        t0 = time.perf_counter()
        comm.all_reduce(buf, "sum", management.HCCL_WORLD_COMM_GROUP)
        times.append(time.perf_counter() - t0)
    seconds = statistics.median(times[1:])
    return {"bytes": PROBE_BYTES, "seconds": seconds, "bus_GBps": 2 * (size - 1) / size * PROBE_BYTES / seconds / 1e9}


def main(argv=None) -> int:
    shape_json, steps, warmup, out = (argv or sys.argv[1:])[:4]
    steps, warmup = int(steps), int(warmup)
    shape = Shape(**json.loads(shape_json))
    init()
    rank, size = get_rank(), get_group_size()
    if shape.batch % size:
        raise SystemExit(f"the global batch {shape.batch} does not split over {size} ranks")
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    if size > 1:
        set_auto_parallel_context(parallel_mode=ParallelMode.DATA_PARALLEL, gradients_mean=True)
    local = Shape(**dict(shape.asdict(), batch=shape.batch // size))
    cell = train_step(local, make_weights(shape))
    data = _share(make_inputs(shape), rank, size)
    losses = [float(np.asarray(cell(*data).asnumpy()).reshape(-1)[0]) for _ in range(warmup)]
    comm = management.engine()
    seen = len(comm.timeline()) if comm else 0
    step_s, per_step = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        np.asarray(cell(*data).asnumpy())
        step_s.append(time.perf_counter() - t0)
        if comm:
            jobs = [j for j in comm.timeline()[seen:] if j.bucket]
            seen = len(comm.timeline())
            per_step.append({"allreduce_s": sum(j.finished - j.started for j in jobs),
                             "waited_s": sum(j.waited[1] - j.waited[0] for j in jobs if j.waited),
                             "buckets": len(jobs)})
    reducer = getattr(cell, "grad_reducer", None)
    buckets = reducer.bucket_sizes() if hasattr(reducer, "bucket_sizes") else []
    record = {"rank": rank, "size": size, "losses": losses, "step_s": step_s, "buckets": buckets, "comm": per_step,
              "threads": {k: os.environ.get(k) for k in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS")}}
    if comm:
        record["blocking_s"] = _blocking(comm, buckets, max(3, steps))
        record["bandwidth"] = _bandwidth(comm, size)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
