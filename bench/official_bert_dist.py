"""MindSpore's official BERT pre-training sources trained data-parallel by graphkernel over two ranks, with only
their import lines changed (bench/official_bert_check.py prepares them), against one process over both halves
and, when its Python is given, MindSpore 2.10's own msrun of the same sources.

    python bench/official_bert_dist.py SRC [--steps 6] [--target Ascend|CPU] [--mindspore-python PY]
                                           [--write tests/data/mindspore_dp_bert_losses.json]

The pinned run of official_bert_check.py (2 layers, hidden 128, 4 heads, seq 32, vocab 512, batch 4 with 20
masked positions, AdamWeightDecay with its decay groups and BertLearningRate, the loss-scale cell
BertTrainOneStepWithLossScaleCell with DynamicLossScaleUpdateCell), as run_pretrain.py sets a distributed
run up: init(), then parallel_mode DATA_PARALLEL, gradients_mean=True, device_num=get_group_size(), so the
cell takes its DistributedGradReducer(mean=False, degree=2) and divides by the degree itself. Rank r takes
rows 2r and 2r+1 of the batch. The one-process run trains a cell around the network that returns the mean
of its losses over rows 0-1 and rows 2-3 (a masked-LM loss is a per-rank mean: the mean of the two halves'
losses, not the whole batch's). Printed: per step the ranks' losses, their mean and the one process's, the
largest relative difference (target 1e-5) and whether the ranks' Parameters stayed bitwise identical; with
MindSpore, its ranks' losses beside ours (target 1e-5; 1.1e-6 on 2026-11-27 on the emulated device, fused).
Exit status 1 when a target is missed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import official_bert_check as single  # noqa: E402  (prepare, batch, initial_value, CONFIG, the schedule)


def digest(params) -> str:
    h = hashlib.sha256()
    for p in params:
        h.update(np.ascontiguousarray(p.asnumpy()).tobytes())
    return h.hexdigest()


def worker(framework: str, role: str, sources: str, out: str, steps: int, target: str) -> None:
    """One rank (role "rank", under mpiexec or msrun) or the one process over both halves ("reference")."""
    sys.path.insert(0, sources)
    if framework == "mindspore":
        import mindspore as ms
        from mindspore import Tensor, context, nn, ops
        from mindspore.communication import get_group_size, get_rank, init
        from mindspore.nn import AdamWeightDecay
        from mindspore.nn.wrap.loss_scale import DynamicLossScaleUpdateCell
        context.set_context(mode=context.GRAPH_MODE, device_target="CPU")
    else:
        sys.path.insert(0, REPO)
        import graphkernel as ms
        from graphkernel import Tensor, context, nn, ops
        from graphkernel.communication import get_group_size, get_rank, init
        from graphkernel.nn import AdamWeightDecay
        from graphkernel.nn.wrap.loss_scale import DynamicLossScaleUpdateCell
        context.set_context(mode=context.GRAPH_MODE, device_target=target, enable_graph_kernel=target == "Ascend")
    context.set_context(reserve_class_name_in_scope=False)
    ms.set_seed(0)
    rank, size = 0, 1
    if role == "rank":   # run_pretrain.py's distributed set-up
        init()
        rank, size = get_rank(), get_group_size()
        context.reset_auto_parallel_context()
        context.set_auto_parallel_context(parallel_mode=context.ParallelMode.DATA_PARALLEL, gradients_mean=True,
                                          device_num=size)
    from src import BertNetworkWithLoss, BertTrainOneStepWithLossScaleCell
    from src.bert_model import BertConfig
    from src.utils import BertLearningRate

    net = BertNetworkWithLoss(BertConfig(**single.CONFIG), True)
    params = net.trainable_params()
    for p in params:
        p.set_data(Tensor(single.initial_value(p.name, p.shape)))
    if role == "reference":
        class TwoHalves(nn.Cell):
            """The mean of the network's losses over rows 0-1 and 2-3: what two ranks train."""

            def __init__(self, inner):
                super().__init__(auto_prefix=False)
                self.inner = inner

            def construct(self, *inputs):
                first = self.inner(*[x[:2] for x in inputs])
                second = self.inner(*[x[2:] for x in inputs])
                return (first + second) / 2.0
        net = TwoHalves(net)
    lr = BertLearningRate(learning_rate=single.LR, end_learning_rate=single.END_LR, warmup_steps=single.WARMUP,
                          decay_steps=steps, power=single.POWER)
    decay = lambda x: "layernorm" not in x.name.lower() and "bias" not in x.name.lower()  # noqa: E731
    groups = [{"params": list(filter(decay, params)), "weight_decay": single.WEIGHT_DECAY},
              {"params": [p for p in params if not decay(p)], "weight_decay": 0.0}, {"order_params": params}]
    optimizer = AdamWeightDecay(groups, learning_rate=lr, eps=single.EPS)
    update = DynamicLossScaleUpdateCell(loss_scale_value=single.LOSS_SCALE, scale_factor=single.SCALE_FACTOR,
                                        scale_window=single.SCALE_WINDOW)
    train = BertTrainOneStepWithLossScaleCell(net, optimizer=optimizer, scale_update_cell=update)
    if framework == "mindspore":   # its IsFinite overflow check on the CPU (official_bert_check.py's module doc)
        train.gpu_target, train.ascend_910b_target = False, True
        train._ascend_check_overflow_mode, train.enable_allfinite = "INFNAN_MODE", False
    train.set_train()
    data = single.batch()
    if role == "rank":
        n = len(data[0]) // size
        data = [a[rank * n:(rank + 1) * n] for a in data]
    data = [Tensor(a) for a in data]
    record = {"rank": rank, "size": size, "losses": [], "scales": [], "digests": []}
    for _ in range(steps):
        loss, _, scale = train(*data)
        record["losses"].append(float(np.asarray(loss.asnumpy()).reshape(-1)[0]))
        record["scales"].append(float(np.asarray(scale.asnumpy()).reshape(-1)[0]))
        record["digests"].append(digest(params))
        print(f"rank {rank} loss {record['losses'][-1]:.7f}", flush=True)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{role}{rank}.json"), "w") as f:
        json.dump(record, f)


def _run(cmd, env=None, cwd=None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed ({done.returncode}):\n{(done.stdout + done.stderr)[-6000:]}")


def _load(out: str, name: str) -> dict:
    with open(os.path.join(out, name)) as f:
        return json.load(f)


def relative(a, b) -> float:
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def compare(src: str, steps: int, target: str, mindspore_python: str | None, write: str | None) -> int:
    return run_all(src, steps, target, mindspore_python, write)[0]


def run_all(src: str, steps: int, target: str, mindspore_python: str | None, write: str | None) -> tuple[int, dict]:
    """(exit status, {"ranks": [rank 0's record, rank 1's], "reference": ..., "mindspore": [...] or None})."""
    sys.path.insert(0, REPO)   # here, not at the top: a MindSpore rank runs this file without graphkernel
    from graphkernel.communication import mpiexec
    from graphkernel.communication.launcher import without_launcher
    work = tempfile.mkdtemp(prefix="official_bert_dist_")
    try:
        for framework in ("graphkernel", "mindspore"):
            single.prepare(src, os.path.join(work, framework), framework)
        out = os.path.join(work, "out")
        me = [os.path.abspath(__file__), "--framework", "graphkernel", "--sources", os.path.join(work, "graphkernel"),
              "--out", out, "--steps", str(steps), "--target", target]
        env = without_launcher()
        env["PYTHONPATH"] = REPO
        launcher = mpiexec.find()   # MPICH's or Open MPI's; Open MPI's guard against root is not lifted here
        if launcher.refusal(env):
            raise SystemExit(launcher.refusal(env))
        _run([sys.executable, *me, "--role", "reference"], env=env, cwd=work)
        _run(launcher.command(2, [sys.executable, *me, "--role", "rank"]), env=env, cwd=work)
        ref, ranks = _load(out, "reference0.json"), [_load(out, f"rank{r}.json") for r in (0, 1)]
        theirs = None
        if mindspore_python:
            bin_dir = os.path.dirname(mindspore_python)
            ms_out = os.path.join(work, "ms_out")
            ms_env = dict(env, PATH=bin_dir + os.pathsep + env.get("PATH", ""), PYTHONPATH="")
            _run([os.path.join(bin_dir, "msrun"), "--worker_num=2", "--local_worker_num=2", "--master_port=8133",
                  f"--log_dir={os.path.join(work, 'ms_logs')}", "--join=True", os.path.abspath(__file__),
                  "--framework", "mindspore", "--sources", os.path.join(work, "mindspore"), "--out", ms_out, "--steps", str(steps),
                  "--role", "rank"], env=ms_env, cwd=work)
            theirs = [_load(ms_out, f"rank{r}.json") for r in (0, 1)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mean = [(a + b) / 2 for a, b in zip(ranks[0]["losses"], ranks[1]["losses"])]
    print(f"official BERT, 2 ranks on {target}, {steps} steps (loss-scale cell, AdamWeightDecay)")
    header = "   step      rank 0      rank 1        mean  one process" + ("   MS rank 0   MS rank 1" if theirs else "")
    print(header)
    for i in range(steps):
        row = (f"   {i + 1:4d}{ranks[0]['losses'][i]:12.6f}{ranks[1]['losses'][i]:12.6f}{mean[i]:12.6f}"
               f"{ref['losses'][i]:13.6f}")
        if theirs:
            row += f"{theirs[0]['losses'][i]:12.6f}{theirs[1]['losses'][i]:12.6f}"
        print(row)
    to_ref = relative(mean, ref["losses"])
    same = ranks[0]["digests"] == ranks[1]["digests"]
    print(f"   mean of the ranks / one process: {to_ref:.2e} relative (target 1e-5); the ranks' Parameters "
          f"{'bitwise identical after every step' if same else 'DIFFER'}; loss scales {ranks[0]['scales']}")
    failed = to_ref > 1e-5 or not same or ranks[0]["scales"] != ref["scales"]
    if theirs:
        to_ms = max(relative(ranks[r]["losses"], theirs[r]["losses"]) for r in (0, 1))
        print(f"   ours / MindSpore 2.10's ranks: {to_ms:.2e} relative (target 1e-5)")
        failed |= to_ms > 1e-5
        if write:
            with open(write, "w") as f:
                json.dump({"mindspore_python": "MindSpore 2.10 msrun, mccl on the CPU", "steps": steps,
                           "rank0": theirs[0]["losses"], "rank1": theirs[1]["losses"],
                           "command": "python bench/official_bert_dist.py SRC --mindspore-python PY --write ..."},
                          f, indent=1)
                f.write("\n")
            print(f"   wrote {write}")
    return (1 if failed else 0), {"ranks": ranks, "reference": ref, "mindspore": theirs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", help="the folder official/nlp/Bert/src of MindSpore's models")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--target", default="Ascend", choices=("Ascend", "CPU"))
    ap.add_argument("--mindspore-python", help="a Python with mindspore 2.10 (its msrun beside it)")
    ap.add_argument("--write", help="with --mindspore-python: write MindSpore's ranks' losses here")
    # a worker's flags; none may be a prefix of one of MindSpore msrun's (its argparse takes abbreviations)
    ap.add_argument("--framework", choices=("graphkernel", "mindspore"), help=argparse.SUPPRESS)
    ap.add_argument("--role", choices=("rank", "reference"), help=argparse.SUPPRESS)
    ap.add_argument("--sources", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.framework:
        worker(args.framework, args.role, args.sources, args.out, args.steps, args.target)
        return 0
    if not args.src:
        ap.error("SRC (official/nlp/Bert/src) is required")
    return compare(args.src, args.steps, args.target, args.mindspore_python, args.write)


if __name__ == "__main__":
    sys.exit(main())
