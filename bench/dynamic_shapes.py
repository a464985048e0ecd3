"""Dynamic shapes on MindSpore's official BERT pre-training sources: one compile for every sequence length.

    python bench/dynamic_shapes.py SRC [--seqs 20,23,...] [--repeat 5] [--json OUT.json] [--small]

SRC is the folder `official/nlp/Bert/src` of MindSpore's public models collection (fetched by nobody
here; bench/official_bert_check.py copies it with only its import lines changed, and so does this). The
network is the small pinned configuration of that tool (2 layers, hidden 128, 4 heads, batch 4, 20
masked positions, the loss-scale train cell, AdamWeightDecay), fusion on, on the emulated device. One
train cell declares its inputs with `set_inputs` (`[None, None]` ids, mask and token types: batch and
sequence length dynamic); it is measured against a static compile of each sequence length:

    compiles        traces of the dynamic train cell over the whole run (target: 1)
    new shape       per sequence length, its first call (a new plan: kernels/plan.py) against the median of
                    its later calls (target: within 1.5x; no compile, no kernel built)
    step            per sequence length, the dynamic cell's median step against a static cell compiled for
                    that shape, both warm, calls interleaved (target: within 1.1x)
    changing        a run whose sequence length changes every step, the dynamic cell's median step against
                    the static cells' medians at the same lengths

The first step at the first length, from the same weights, is checked dynamic against static (the
whole-run comparison is tests/test_dynamic_shapes.py's). Timings are ratios within one
run, printed with the load average: run it on a quiet machine. `--small` is a quick try (three lengths,
two repeats).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, REPO)
import official_bert_check as obc  # noqa: E402  (bench/: the sources' copy, the pinned config, the weights)

SEQS = (20, 23, 26, 28, 29, 31, 32)      # config seq_length 32: position ids go up to 32
SMALL_SEQS = (24, 29, 32)


def batch(seq: int, size: int = obc.BATCH, seed: int = 22) -> list[np.ndarray]:
    """A pre-training batch of sequence length `seq` (at least MASKED): obc.batch's, lengths seq-8..seq."""
    rng = np.random.default_rng(seed + seq)
    vocab = obc.CONFIG["vocab_size"]
    lengths = rng.integers(max(obc.MASKED, seq - 8), seq + 1, size)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
    ids = (rng.integers(1, vocab, (size, seq)) * mask).astype(np.int32)
    types = ((np.arange(seq)[None, :] >= lengths[:, None] // 2) * mask).astype(np.int32)
    nsp = rng.integers(0, 2, (size, 1)).astype(np.int32)
    positions = np.stack([np.sort(rng.choice(int(n), obc.MASKED, replace=False)) for n in lengths]).astype(np.int32)
    masked_ids = rng.integers(1, vocab, (size, obc.MASKED)).astype(np.int32)
    weights = np.ones((size, obc.MASKED), np.float32)
    return [ids, mask, types, nsp, positions, masked_ids, weights]


def build(ms, steps: int):
    """The loss-scale train cell of official_bert_check.run, from the same initial weights."""
    from graphkernel import Tensor
    from graphkernel.nn import AdamWeightDecay
    from graphkernel.nn.wrap.loss_scale import DynamicLossScaleUpdateCell
    from src import BertNetworkWithLoss, BertTrainOneStepWithLossScaleCell
    from src.bert_model import BertConfig
    from src.utils import BertLearningRate
    ms.set_seed(0)
    net = BertNetworkWithLoss(BertConfig(**obc.CONFIG), True)
    params = net.trainable_params()
    for p in params:
        p.set_data(Tensor(obc.initial_value(p.name, p.shape)))
    lr = BertLearningRate(learning_rate=obc.LR, end_learning_rate=obc.END_LR, warmup_steps=obc.WARMUP,
                          decay_steps=steps, power=obc.POWER)
    decay = [p for p in params if "layernorm" not in p.name.lower() and "bias" not in p.name.lower()]
    ids = {id(p) for p in decay}
    groups = [{"params": decay, "weight_decay": obc.WEIGHT_DECAY},
              {"params": [p for p in params if id(p) not in ids], "weight_decay": 0.0}, {"order_params": params}]
    update = DynamicLossScaleUpdateCell(loss_scale_value=obc.LOSS_SCALE, scale_factor=obc.SCALE_FACTOR,
                                        scale_window=obc.SCALE_WINDOW)
    train = BertTrainOneStepWithLossScaleCell(net, optimizer=AdamWeightDecay(groups, learning_rate=lr, eps=obc.EPS),
                                              scale_update_cell=update)
    return train.set_train()


def timed(cell, data, builds: list | None = None) -> tuple[float, float]:
    """(seconds of one step, its loss); with `builds`, the kernels the step built (compiled, or read
    from the disk cache) are appended to it."""
    from kernels import CACHE_STATS
    before = (CACHE_STATS["compiled"], CACHE_STATS["disk"])
    t0 = time.perf_counter()
    out = cell(*data)
    loss = float(np.asarray(out[0].asnumpy()).reshape(-1)[0])
    seconds = time.perf_counter() - t0
    if builds is not None:
        builds.append(CACHE_STATS["compiled"] + CACHE_STATS["disk"] - sum(before))
    return seconds, loss


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sources", metavar="SRC", help="official/nlp/Bert/src of MindSpore's models collection")
    p.add_argument("--seqs", default=None, help=f"sequence lengths, comma-separated (default {SEQS})")
    p.add_argument("--repeat", type=int, default=5, help="timed calls per shape (median)")
    p.add_argument("--json", default=None, help="write the figures as JSON here")
    p.add_argument("--small", action="store_true", help="a quick try: three lengths, two repeats")
    args = p.parse_args(argv)
    seqs = tuple(int(s) for s in args.seqs.split(",")) if args.seqs else (SMALL_SEQS if args.small else SEQS)
    repeat = 2 if args.small else args.repeat
    if min(seqs) < obc.MASKED or max(seqs) > obc.CONFIG["seq_length"]:
        p.error(f"sequence lengths must lie in {obc.MASKED}..{obc.CONFIG['seq_length']}")

    dest = tempfile.mkdtemp(prefix="dynamic_shapes_")
    obc.prepare(args.sources, dest, "graphkernel")
    sys.path.insert(0, dest)
    import graphkernel as ms
    from graphkernel import Tensor, context
    context.set_context(mode=context.GRAPH_MODE, device_target="Ascend", enable_graph_kernel=True,
                        reserve_class_name_in_scope=False)
    data = {s: [Tensor(a) for a in batch(s)] for s in seqs}
    total = len(seqs) * (repeat + 1) * 3
    # every cell built before any compiles: building a network (its to_float) invalidates every Cell's
    # compiles (graphkernel/cell.py _structure_version)
    statics = {s: build(ms, total) for s in seqs}
    dynamic = build(ms, total)
    first_loss = {}
    for s in seqs:
        first_loss[s] = timed(statics[s], data[s])[1]      # its compile
    dynamic.set_inputs(*[Tensor(shape=[None, None], dtype=ms.int32)] * 3, Tensor(shape=[None, 1], dtype=ms.int32),
                       *[Tensor(shape=[None, obc.MASKED], dtype=ms.int32)] * 2,
                       Tensor(shape=[None, obc.MASKED], dtype=ms.float32))
    load = [os.getloadavg()]
    compile_s, dynamic_first = timed(dynamic, data[seqs[0]])
    builds: list = []      # kernels the dynamic cell built after its compile (target: none)

    rows = []
    for s in seqs:
        static = statics[s]
        first, _ = timed(dynamic, data[s], builds)   # the first length's first call compiled: its second
        dyn, sta = [], []
        for _ in range(repeat):         # interleaved: both warm, the same load
            dyn.append(timed(dynamic, data[s], builds)[0])
            sta.append(timed(static, data[s])[0])
        rows.append({"seq": s, "first_s": first, "dynamic_s": statistics.median(dyn), "static_compiles": static.trace_count,
                     "static_s": statistics.median(sta)})
        load.append(os.getloadavg())
    changing = []
    for k in range(repeat):             # a length that changes every step, every plan cached by now
        for s in seqs[k % 2::2] + seqs[(k + 1) % 2::2]:
            changing.append((s, timed(dynamic, data[s], builds)[0]))
    load.append(os.getloadavg())

    result = {"compiles": dynamic.trace_count, "compile_s": compile_s, "rows": rows, "loadavg": load,
              "first_step_losses": {"dynamic": dynamic_first, "static": first_loss[seqs[0]]},
              "changing_step_s": statistics.median(t for _, t in changing),
              "static_step_s_at_the_same_lengths": statistics.median(
                  next(r["static_s"] for r in rows if r["seq"] == s) for s, _ in changing),
              "kernels_built_after_compile": sum(builds)}
    print(f"official BERT sources, small pinned config (batch {obc.BATCH}), set_inputs [None, None]; "
          f"load average {' / '.join(f'{a[0]:.2f}' for a in load)}")
    print(f"compiles of the dynamic train cell: {result['compiles']} (target 1), first compile {compile_s:.1f} s; "
          f"kernels it built after: {result['kernels_built_after_compile']}")
    print(f"{'seq':>4}  {'first call':>10}  {'later':>9}  {'first/later':>11}  {'static':>9}  {'dyn/static':>10}"
          f"  static compiles")
    for r in rows:
        print(f"{r['seq']:>4}  {r['first_s'] * 1e3:>8.1f}ms  {r['dynamic_s'] * 1e3:>7.1f}ms  "
              f"{r['first_s'] / r['dynamic_s']:>11.2f}  {r['static_s'] * 1e3:>7.1f}ms  "
              f"{r['dynamic_s'] / r['static_s']:>10.3f}  {r['static_compiles']}")
    print(f"targets: first/later <= 1.5 (a new shape compiles nothing), dyn/static <= 1.1; a length changing "
          f"every step: {result['changing_step_s'] * 1e3:.1f} ms against the static cells' "
          f"{result['static_step_s_at_the_same_lengths'] * 1e3:.1f} ms")
    rel = abs(dynamic_first - first_loss[seqs[0]]) / abs(first_loss[seqs[0]])
    print(f"the first step at seq {seqs[0]} from the same weights: loss {dynamic_first:.9g} dynamic, "
          f"{first_loss[seqs[0]]:.9g} static (relative difference {rel:.1e}; tests/test_dynamic_shapes.py checks "
          "whole runs)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
