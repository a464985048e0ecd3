"""A MindSpore 2.x-style data-parallel training script: each rank trains on its half of every batch.

    mpiexec -n 2 python tests/mpi_scripts/mlp_dp.py --out DIR [--steps 4] --run NAME:key=value,... [--run ...]
            [--fail-rank R --fail-step S] [--hang-rank R]
    python tests/mpi_scripts/mlp_dp.py --out DIR --reference --run ...   one process over both halves: its loss is
                                                                  the mean of the halves', its gradient theirs

A run's keys (DEFAULTS): mean 1|0, mode graph|pynative, jit 1|0, cell fn|train|lossscale|model, target CPU|Ascend,
fusion 1|0, buckets (all_reduce_fusion_config splitting the 6 Parameters into this many), overflow_rank,
overflow_step, overflow_mode allfinite|saturation, profile 1 (a Profiler over the steps after the first,
written to DIR/NAME/profile<r>). Several runs train one after the other in one job.

Only its import lines name graphkernel: bench/mindspore_dist_check.py runs it under MindSpore 2.10's own
msrun with `mindspore` in those lines (tests/data/mindspore_dp_losses.json holds what it printed).

    --cell fn         ms.value_and_grad + nn.DistributedGradReducer + nn.Momentum (mean=True: the reducer
                      averages; mean=False: it sums and the script divides by the group's size itself)
    --cell train      nn.TrainOneStepCell under DATA_PARALLEL (its reducer made by the cell)
    --cell lossscale  nn.TrainOneStepWithLossScaleCell (DynamicLossScaleUpdateCell) under DATA_PARALLEL
    --cell model      Model.train over a NumpySlicesDataset sharded num_shards=N, shard_id=rank

Each rank writes DIR/NAME/rank<r>.json: its loss per step, a hash of its Parameters after each step, the
loss scales and overflow flags, the buckets and the compiled step's kernels (train cells on the
emulated device), and DIR/NAME/rank<r>.npz its Parameters at the end.
"""
import argparse
import hashlib
import json
import os
import sys
import time
import zlib

import numpy as np

import graphkernel as ms
from graphkernel import Tensor, nn, ops
from graphkernel.communication import get_group_size, get_rank, init

IN, HIDDEN, OUT, BATCH = 6, 16, 3, 8


class MLP(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(IN, HIDDEN)
        self.act = nn.Tanh()
        self.fc2 = nn.Dense(HIDDEN, HIDDEN)
        self.fc3 = nn.Dense(HIDDEN, OUT)

    def construct(self, x):
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


def initial(name, shape):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


def batches(steps):
    rng = np.random.default_rng(3)
    for _ in range(steps):
        x = rng.standard_normal((BATCH, IN)).astype(np.float32)
        y = rng.standard_normal((BATCH, OUT)).astype(np.float32)
        yield x, y


def digest(params):
    h = hashlib.sha256()
    for p in params:
        h.update(np.ascontiguousarray(p.asnumpy()).tobytes())
    return h.hexdigest()


DEFAULTS = {"mean": 1, "mode": "graph", "jit": 1, "cell": "fn", "target": "CPU", "fusion": 1, "buckets": 0,
            "overflow_rank": -1, "overflow_step": -1, "overflow_mode": "allfinite", "profile": 0}


def parse_run(text):
    """`NAME:key=value,key=value`: one training of the job (DEFAULTS for the keys not given)."""
    name, _, rest = text.partition(":")
    run = dict(DEFAULTS, name=name)
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        run[key] = value if isinstance(DEFAULTS[key], str) else int(value)
    return run


def train(run, args):
    """One training of `run` for args.steps steps; writes OUT/NAME/rank<r>.json and .npz."""
    ms.set_context(mode=ms.GRAPH_MODE if run["mode"] == "graph" else ms.PYNATIVE_MODE, device_target=run["target"])
    if run["target"] != "CPU":
        ms.set_context(enable_graph_kernel=bool(run["fusion"]))
    if args.reference:
        rank, size, parts = 0, 1, 2
    else:
        rank, size, parts = get_rank(), get_group_size(), get_group_size()
        ms.reset_auto_parallel_context()
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=bool(run["mean"]))
        if run["buckets"] >= 2:   # Parameters 0-1, 2-3, ...: one bucket each
            ms.set_auto_parallel_context(all_reduce_fusion_config=[2 * k for k in range(1, run["buckets"])])
    net = MLP()
    for p in net.trainable_params():
        p.set_data(Tensor(initial(p.name, p.shape)))
    loss_fn = nn.MSELoss()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    params = net.trainable_params()
    record = {"rank": rank, "size": size, "losses": [], "digests": [], "overflow": [], "scale": [], "kernels": [],
              "buckets": []}

    def forward(x, y):
        return loss_fn(net(x), y)

    if run["cell"] == "fn":
        if args.reference:
            def both(x, y):   # the mean of the halves' losses: its gradient is the mean of theirs
                n = BATCH // parts
                return (forward(x[:n], y[:n]) + forward(x[n:], y[n:])) / 2.0
            grad_fn = ms.value_and_grad(both, None, optimizer.parameters)
        else:
            grad_fn = ms.value_and_grad(forward, None, optimizer.parameters)
            reducer = nn.DistributedGradReducer(optimizer.parameters, mean=bool(run["mean"]))

        def train_step(x, y):
            loss, grads = grad_fn(x, y)
            if not args.reference:
                grads = reducer(grads)
                if not run["mean"]:   # the script divides itself
                    grads = tuple(g / float(size) for g in grads)
            optimizer(grads)
            return loss
        step = ms.jit(train_step) if run["jit"] else train_step
    elif run["cell"] == "model":   # Model.train over the rank's shard of the whole data set
        return train_model(run, args, net, loss_fn, optimizer, params, record, rank, size)
    else:
        with_loss = nn.WithLossCell(net, loss_fn)
        if run["cell"] == "train":
            cell = nn.TrainOneStepCell(with_loss, optimizer)
        else:
            update = nn.DynamicLossScaleUpdateCell(loss_scale_value=2.0 ** 16, scale_factor=2, scale_window=1000)
            cell = nn.TrainOneStepWithLossScaleCell(with_loss, optimizer, scale_sense=update)
            if run["overflow_mode"] == "saturation":
                cell._ascend_check_overflow_mode = "SATURATION_MODE"
        cell.set_train()
        if hasattr(cell.grad_reducer, "bucket_sizes"):
            record["buckets"] = cell.grad_reducer.bucket_sizes()

        def step(x, y):
            return cell(x, y)

    profiler = None
    for k, (x, y) in enumerate(batches(args.steps)):
        if k == 1 and run["profile"]:   # the steps after the first (which compiles)
            profiler = ms.Profiler(output_path=os.path.join(args.out, run["name"], f"profile{rank}"))
        if k == args.fail_step and rank == args.fail_rank:
            raise RuntimeError(f"rank {rank} fails at step {k} on purpose at {time.time():.3f}")
        if rank == args.hang_rank and k == 1:
            time.sleep(3600)   # never reaches the step's collectives
        if not args.reference:
            n = BATCH // size
            x, y = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
        if k == run["overflow_step"] and rank == run["overflow_rank"]:
            y = y * np.float32(1e38)   # the loss overflows on this rank only
        out = step(Tensor(x), Tensor(y))
        if k == 0 and run["cell"] != "fn" and run["target"] != "CPU" and hasattr(cell, "compile"):
            compiled = cell.compile(Tensor(x), Tensor(y))
            record["kernels"] = [[kernel.name, list(kernel.op_types), kernel.target, kernel.phase]
                                 for kernel in compiled.kernels]
        if isinstance(out, tuple):
            loss, overflow, scale = out
            record["overflow"].append(bool(np.asarray(overflow.asnumpy()).reshape(-1)[0]))
            record["scale"].append(float(np.asarray(scale.asnumpy()).reshape(-1)[0]))
        else:
            loss = out
        record["losses"].append(float(np.asarray(loss.asnumpy()).reshape(-1)[0]))
        record["digests"].append(digest(params))
        print(f"{run['name']}: rank {rank} step {k} loss {record['losses'][-1]:.8f}", flush=True)
    if profiler is not None:
        profiler.analyse(print_table=False)
    write(run, args, record, params, rank)


def train_model(run, args, net, loss_fn, optimizer, params, record, rank, size):
    """Model.train for one epoch over every batch at once: rank r's shard (rows r, r+N, ...) in batches of
    BATCH/N; the one process (--reference) over all the rows in batches of BATCH (with equal halves and a
    mean loss, the same gradient)."""
    xs, ys = zip(*batches(args.steps))
    data = (np.concatenate(xs), np.concatenate(ys))
    if args.reference:
        dataset = ms.dataset.NumpySlicesDataset(data, shuffle=False).batch(BATCH)
    else:
        dataset = ms.dataset.NumpySlicesDataset(data, shuffle=False, num_shards=size, shard_id=rank).batch(BATCH // size)

    class Record(ms.train.Callback):
        def step_end(self, run_context):
            out = run_context.original_args().net_outputs
            record["losses"].append(float(np.asarray(out.asnumpy()).reshape(-1)[0]))
            record["digests"].append(digest(params))

    ckpt = ms.train.ModelCheckpoint(prefix="mlp", directory=os.path.join(args.out, run["name"], "ckpt"))
    ms.Model(net, loss_fn, optimizer).train(1, dataset, callbacks=[Record(), ckpt])
    record["checkpoint"] = os.path.relpath(ckpt.latest_ckpt_file_name, args.out)
    write(run, args, record, params, rank)


def write(run, args, record, params, rank):
    out_dir = os.path.join(args.out, run["name"])
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **{p.name: p.asnumpy() for p in params})


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--run", action="append", default=[], help="NAME:key=value,... (DEFAULTS); repeatable")
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--fail-rank", type=int, default=-1)
    ap.add_argument("--fail-step", type=int, default=-1)
    ap.add_argument("--hang-rank", type=int, default=-1)
    args = ap.parse_args(argv)
    runs = [parse_run(text) for text in args.run or ["default:"]]
    ms.set_context(device_target=runs[0]["target"])   # before init(): MindSpore picks its backend by it
    if not args.reference:
        init()
    for run in runs:
        train(run, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
