"""Every collective primitive on every rank of an MPI job, in GRAPH_MODE (compiled: on the numpy reference and
on the emulated device) and PYNATIVE_MODE, and their gradients; rank r's input is inputs(r). Each rank
writes OUT/rank<r>.npz (results by name) and OUT/rank<r>.json (ranks, groups); tests/test_dist_collectives.py
checks them against numpy.

    mpiexec -n 2 python tests/mpi_scripts/collectives.py OUT [TARGET ...]
"""
import gc
import json
import os
import sys
import weakref

import numpy as np

import graphkernel as ms
from graphkernel import Tensor, nn, ops
from graphkernel.communication import management
from graphkernel.communication import (create_group, destroy_group, get_group_size, get_local_rank,
                                       get_local_rank_size, get_process_group_ranks, get_rank, init)
from graphkernel.ops import operations as P


def inputs(rank):
    x = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.5) * (rank + 1) + 0.25 * rank   # no zero (prod)
    return x, (x * 0.25 + 1).astype(np.float16)


class Collectives(nn.Cell):
    def __init__(self, group=None):
        super().__init__()
        self.sum = P.AllReduce(group=group)
        self.max = P.AllReduce(ops.ReduceOp.MAX, group)
        self.min = P.AllReduce(ops.ReduceOp.MIN, group)
        self.prod = P.AllReduce(ops.ReduceOp.PROD, group)
        self.gather = P.AllGather(group)
        self.scatter = P.ReduceScatter(ops.ReduceOp.SUM, group)
        self.broadcast = P.Broadcast(1, group)
        self.barrier = ops.Barrier(group)

    def construct(self, x, h):
        self.barrier()
        (b,) = self.broadcast((x * 1.0,))
        return (self.sum(x * 2.0), self.max(x), self.min(x), self.prod(x * 0.5), self.gather(x + 1.0),
                self.scatter(x), b, self.sum(h))


NAMES = ("sum", "max", "min", "prod", "gather", "scatter", "broadcast", "sum_f16")


class Loss(nn.Cell):
    """sum(AllReduce_op(x) * w): its gradient in x is MindSpore's rule of op."""

    def __init__(self, op):
        super().__init__()
        self.reduce = P.AllReduce(op)

    def construct(self, x, w):
        return ops.ReduceSum()(self.reduce(x) * w)


def released():
    """Whether a collective's arrays are the caller's alone once it returns (the communicator's timeline of
    finished collectives keeps their times, not their arrays)."""
    x = np.ones(1 << 18, np.float32)
    out = management.engine().all_reduce(x, "sum", management.HCCL_WORLD_COMM_GROUP)
    refs = [weakref.ref(a) for a in (x, out, out.base) if a is not None]
    del x, out
    gc.collect()
    return all(r() is None for r in refs)


def main():
    out, targets = sys.argv[1], sys.argv[2:] or ["CPU"]
    init()
    rank = get_rank()
    x, h = inputs(rank)
    results = {}
    for target in targets:
        for mode, label in ((ms.GRAPH_MODE, "graph"), (ms.PYNATIVE_MODE, "pynative")):
            ms.set_context(mode=mode, device_target=target, enable_graph_kernel=target == "Ascend")
            for name, value in zip(NAMES, Collectives()(Tensor(x), Tensor(h))):
                results[f"{target}/{label}/{name}"] = value.asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE, device_target=targets[0])
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3) * (rank + 1)
    for op in ("sum", "max", "min", "prod"):
        grad = ops.GradOperation(get_all=True)(Loss(op))(Tensor(x), Tensor(w))
        results[f"grad/{op}"] = grad[0].asnumpy()
    params = [ms.Parameter(np.full(3, rank + 1.0, np.float32), name="pb.w"),
              ms.Parameter(np.full((2, 2), 10.0 * (rank + 1), np.float32), name="pb.b")]
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, parameter_broadcast=True)
    nn.DistributedGradReducer(params)   # parameter_broadcast: rank 0's values everywhere
    ms.reset_auto_parallel_context()
    results["parameter_broadcast/w"], results["parameter_broadcast/b"] = params[0].asnumpy(), params[1].asnumpy()
    create_group("pair", [0, 1])
    results["group/sum"] = Collectives("pair")(Tensor(x), Tensor(h))[0].asnumpy()
    info = {"rank": rank, "size": get_group_size(), "local_rank": get_local_rank(), "local_size": get_local_rank_size(),
            "pair_rank": get_rank("pair"), "pair_size": get_group_size("pair"), "pair": get_process_group_ranks("pair"),
            "released": released()}
    destroy_group("pair")
    os.makedirs(out, exist_ok=True)
    np.savez(os.path.join(out, f"rank{rank}.npz"), **results)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(info, f)


if __name__ == "__main__":
    main()
