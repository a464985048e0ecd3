"""Data parallelism's pieces in one process, no MPI needed: the auto-parallel context's rules, a process
that is a group by itself, the reducer's buckets, the communication schedule pass, collectives in the
compiled program (placement "comm", no copies, device subgraphs split), dataset shards against MindSpore
2.10's distributed sampler, Model.train under DATA_PARALLEL, checkpoints per rank, the timeout setting."""
from __future__ import annotations

import os

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Parameter, Tensor, context, nn, ops
from graphkernel.communication import engine as comm_engine
from graphkernel.communication import management
from graphkernel.communication.parallel_context import ParallelContextError
from graphkernel.compiler import compile_graph
from graphkernel.nn.wrap.grad_reducer import BUCKET_BYTES, split
from graphkernel.passes.comm_schedule import comm_schedule
from graphkernel.settings.options import CompileOptions
from graphkernel.train import NumpySlicesDataset
from graphkernel.train.dataset import DatasetError, GeneratorDataset
from ir import GraphBuilder
from ir.graph import TensorType
from ir.dtypes import DType
from ir.ops import placement
from ir.ops.host import device_regions
from tolerance import assert_close


@pytest.fixture(autouse=True)
def initialized():
    management.init()
    yield
    context.reset_auto_parallel_context()


def test_parallel_modes_device_num_and_the_top_level_names():
    assert ms.ParallelMode is context.ParallelMode and ms.set_auto_parallel_context is context.set_auto_parallel_context
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True, device_num=1)
    assert ms.get_auto_parallel_context("parallel_mode") == "data_parallel"
    for mode in ("semi_auto_parallel", "auto_parallel", "hybrid_parallel"):
        with pytest.raises(ParallelContextError, match=f"'{mode}' shards operators"):
            ms.set_auto_parallel_context(parallel_mode=mode)
    with pytest.raises(ParallelContextError, match=r"device_num 4: the data-parallel group has 1 rank"):
        ms.set_auto_parallel_context(device_num=4)
    with pytest.raises(ParallelContextError, match=r"can not be empty"):
        ms.set_auto_parallel_context(all_reduce_fusion_config=[])
    with pytest.raises(ParallelContextError, match=r"increasing"):
        ms.set_auto_parallel_context(all_reduce_fusion_config=[4, 2])
    ms.reset_auto_parallel_context()
    assert ms.get_auto_parallel_context("device_num") == 1 and ms.get_auto_parallel_context("global_rank") == 0


def test_a_process_alone_is_a_group_of_one():
    assert (management.get_rank(), management.get_group_size(), management.get_local_rank(),
            management.get_local_rank_size()) == (0, 1, 0, 1)
    assert management.get_world_rank_from_group_rank("hccl_world_group", 0) == 0
    management.init("mccl")
    assert management.GlobalComm.WORLD_COMM_GROUP == management.MCCL_WORLD_COMM_GROUP
    with pytest.raises(management.CommunicationError, match="backend_name 'gloo'"):
        management.init("gloo")
    with pytest.raises(management.CommunicationError, match="unknown group 'nope'"):
        management.get_rank("nope")
    with pytest.raises(management.CommunicationError, match="at least two different world ranks"):
        management.create_group("g", [0])
    with pytest.raises(management.CommunicationError, match="is the world group"):
        management.destroy_group("hccl_world_group")
    management.init("hccl")


def test_the_timeout_setting(monkeypatch):
    monkeypatch.setenv("GRAPHKERNEL_COMM_TIMEOUT", "12.5")
    assert comm_engine.timeout_from_env() == 12.5
    monkeypatch.delenv("GRAPHKERNEL_COMM_TIMEOUT")
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "90")
    assert comm_engine.timeout_from_env() == 90.0
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "soon")
    with pytest.raises(comm_engine.CommunicationError, match="HCCL_EXEC_TIMEOUT='soon'"):
        comm_engine.timeout_from_env()
    monkeypatch.delenv("HCCL_EXEC_TIMEOUT")
    assert comm_engine.timeout_from_env() == comm_engine.DEFAULT_TIMEOUT
    with pytest.raises(management.CommunicationError, match="positive number"):
        management.set_comm_timeout(0)


class _P:
    def __init__(self, *shape):
        self.shape = shape


def test_buckets_by_split_points_or_by_size_last_parameters_first():
    params = [_P(4, 4)] * 6
    assert split(params, [2, 4]) == [[4, 5], [2, 3], [0, 1]]
    assert split(params, [3, 99]) == [[3, 4, 5], [0, 1, 2]]
    big = BUCKET_BYTES // 4 // 3           # three of these fill a bucket
    params = [_P(big)] * 7 + [_P(2)]
    assert split(params) == [[5, 6, 7], [2, 3, 4], [0, 1]]


def test_the_reducer_of_a_group_of_one_gives_the_gradients_back():
    params = [Parameter(np.ones((2, 3), np.float32), name="w"), Parameter(np.ones(3, np.float32), name="b")]
    reducer = nn.DistributedGradReducer(params, mean=True)
    grads = (Tensor(np.full((2, 3), 2.0, np.float32)), Tensor(np.ones(3, np.float32)))
    assert reducer(grads) == grads and reducer.reduces is False
    assert [n for _, n, _ in reducer.bucket_sizes()] == [2]
    halved = nn.DistributedGradReducer(params, mean=True, degree=2)(grads)   # degree given: times 1/degree
    assert_close(halved[0].asnumpy(), np.ones((2, 3), np.float32))
    with pytest.raises(nn.TrainCellError, match="2 gradients for 1 Parameters"):
        nn.DistributedGradReducer(params[:1])(grads)
    with pytest.raises(nn.TrainCellError, match="degree must be a positive int"):
        nn.DistributedGradReducer(params, degree=0)


def _bucketed_graph():
    """x -> g1 -> g2, a bucket of g1 and one of g2 traced at the end, the update reading both."""
    f = TensorType((4,), DType.float32)
    b = GraphBuilder(f)
    (x,) = b.inputs
    g1 = b.op("Mul", x, b.scalar(2.0, x))
    g2 = b.op("Exp", g1)
    g3 = b.op("Mul", g2, g2)
    t1 = b.op("AllReduceStart", g1, bucket="b0")
    t2 = b.op("AllReduceStart", g2, g3, bucket="b1")
    (r1,) = b.ops("AllReduceWait", t1, bucket="b0", shapes=[(4,)], dtypes=["float32"])
    r2, r3 = b.ops("AllReduceWait", t2, bucket="b1", shapes=[(4,), (4,)], dtypes=["float32"] * 2)
    u1 = b.op("Add", r1, x)
    u2 = b.op("Add", r2, r3)
    return b.graph(u1, u2)


def test_the_schedule_starts_a_bucket_after_its_last_gradient_and_waits_before_its_first_reader():
    graph = comm_schedule(_bucketed_graph(), CompileOptions())
    ops_ = [n.op for n in graph.nodes if n.op != "Const"]
    assert ops_ == ["Mul", "AllReduceStart", "Exp", "Mul", "AllReduceStart", "AllReduceWait", "Add",
                    "AllReduceWait", "Add"]
    assert comm_schedule(graph, CompileOptions()).key() == graph.key()


@pytest.mark.parametrize("fused", [False, True])
def test_collectives_in_a_compiled_program_split_it_without_copies(fused):
    graph = _bucketed_graph()
    x = np.arange(4, dtype=np.float32)
    opts = CompileOptions(enable_graph_kernel=fused)
    compiled = compile_graph(graph, opts, eager=True)
    targets = [k.target for k in compiled.kernels]
    assert targets.count("comm") == 4 and "copy" not in targets and "host" not in targets
    assert [placement(n) for n in compiled.graph.nodes if n.op.startswith("AllReduce")] == ["comm"] * 4
    assert len(set(device_regions(compiled.graph).values())) >= 2, "a collective splits the device program"
    want = compile_graph(graph, CompileOptions(device_target="CPU"), eager=True).run_arrays([x])
    for got, ref in zip(compiled.run_arrays([x]), want):
        assert_close(got, ref)


def test_the_kernel_graph_dump_draws_collectives_outside_the_device_subgraphs(tmp_path):
    context.set_context(save_graphs=True, save_graphs_path=str(tmp_path), enable_graph_kernel=True)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.reduce = ops.AllReduce()

        def construct(self, x):
            return ops.exp(self.reduce(x * 2.0)) + 1.0

    Net()(Tensor(np.ones((2, 2), np.float32)))
    dot = (tmp_path / "kernel_graph_0.dot").read_text()
    assert "cluster_device_0" in dot and "cluster_device_1" in dot and "plum" in dot and "AllReduce" in dot


def test_dataset_shards_are_mindspores():
    """MindSpore 2.10's NumpySlicesDataset(shuffle=False, num_shards=k, shard_id=s) over 0..n-1, printed."""
    mindspore = {(10, 3): [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]], (7, 4): [[0, 4], [1, 5], [2, 6], [3, 0]],
                 (5, 4): [[0, 4], [1, 0], [2, 1], [3, 2]], (3, 4): [[0], [1], [2], [0]],
                 (10, 2): [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]}
    for (n, k), shards in mindspore.items():
        for s, want in enumerate(shards):
            ds = NumpySlicesDataset(np.arange(n).reshape(n, 1), shuffle=False, num_shards=k, shard_id=s)
            assert [int(r[0][0]) for r in ds] == want and ds.get_dataset_size() == len(want)
            source = GeneratorDataset([(np.array([i]),) for i in range(n)], shuffle=False, num_shards=k, shard_id=s)
            assert [int(r[0][0]) for r in source] == want


def test_shuffled_shards_interleave_one_order_per_epoch():
    ms.set_seed(5)
    shards = [NumpySlicesDataset(np.arange(12), num_shards=3, shard_id=s) for s in range(3)]
    for _ in range(2):   # every epoch a new order, the same on every shard
        rows = [[int(r[0]) for r in ds] for ds in shards]
        assert sorted(sum(rows, [])) == list(range(12))
        assert all(len(r) == 4 for r in rows)


def test_shard_arguments_are_checked():
    with pytest.raises(DatasetError, match="given together"):
        NumpySlicesDataset(np.arange(4), num_shards=2)
    with pytest.raises(DatasetError, match=r"shard_id 2 must be in \[0, num_shards=2\)"):
        NumpySlicesDataset(np.arange(4), num_shards=2, shard_id=2)
    with pytest.raises(DatasetError, match="random-accessible"):
        GeneratorDataset(lambda: iter([(np.zeros(1),)]), num_shards=2, shard_id=0)


def test_model_train_under_data_parallel_in_a_group_of_one(tmp_path):
    """The train cell takes its reducer (the identity here), the callbacks see the mode, checkpoints go
    where they would on one device (rank_<r>/ folders only in a job of several ranks)."""
    context.set_context(device_target="CPU")   # the reference: nothing to compile
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    net = nn.Dense(3, 2, weight_init="ones", bias_init="zeros")
    model = ms.Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.1, 0.9))
    data = NumpySlicesDataset((np.ones((8, 3), np.float32), np.zeros((8, 2), np.float32)), shuffle=False,
                              num_shards=1, shard_id=0).batch(4)
    seen = []

    class Spy(ms.train.Callback):
        def step_end(self, run_context):
            seen.append(run_context.original_args().parallel_mode)

    ckpt = ms.train.ModelCheckpoint(directory=str(tmp_path))
    model.train(1, data, callbacks=[Spy(), ckpt])
    assert model._train_network.reducer_flag and seen == ["data_parallel"] * 2
    assert os.path.dirname(ckpt.latest_ckpt_file_name) == str(tmp_path)


def test_the_ranks_bench_summary_and_its_flag(capsys):
    from graphkernel.tools.bench import ranks_bench
    from graphkernel.tools.cli import main
    assert main(["bench", "--ranks", "2"]) == 2 and "--ranks goes with --train" in capsys.readouterr().err
    results = {"mode": "tiny", "ranks": 2, "cores": 2, "label": "BERT encoder x1", "loadavg_end": [1.0, 1.0, 1.0],
               "losses_rel": 1e-7, "speedup": 1.5,
               "one_process": {"threads": 2, "step_s": 0.3, "samples_per_s": 2 / 0.3},
               "ranks_run": {"threads_each": 1, "step_s": 0.2, "samples_per_s": 10.0, "allreduce_s": 0.05,
                             "waited_s": 0.01, "blocking_s": 0.04, "hidden_share": 0.75,
                             "buckets": [["r0b0", 4, 2 ** 20], ["r0b1", 4, 2 ** 20]],
                             "bandwidth": {"bytes": 64 * 2 ** 20, "seconds": 0.08, "bus_GBps": 0.84}}}
    text = ranks_bench.summary(results)
    assert "| 2 ranks | 1 each | 200.0 ms | 10.00 |" in text and "hid 75% of it" in text
    assert "2 bucket(s), 2 MB a step" in text and "bus bandwidth 0.84 GB/s" in text
