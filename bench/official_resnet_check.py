"""MindSpore's official ResNet sources, trained by graphkernel with only their import lines changed, beside
MindSpore 2.10 training the same sources unchanged.

    python bench/official_resnet_check.py ROOT [--nets resnet18,resnet50] [--steps 10]
                                               [--mindspore-python /path/to/venv/bin/python] [--reference]
    python bench/official_resnet_check.py ROOT --nudge --mindspore-python PY    (the learning rate's check)

ROOT is the folder `official/cv/ResNet` of MindSpore's public models collection (this tool fetches nothing;
none of its files is in this repository). bench/resnet_sources.py copies `src/resnet.py` and
`src/CrossEntropySmooth.py` into two temporary packages, one as they are (for MindSpore), one with
`mindspore` changed to `graphkernel` in their import lines and nowhere else, and builds the training step as
`train.py` builds it for CPU/GPU: the network, CrossEntropySmooth (sparse labels, smoothing 0.1),
Momentum 0.9 with weight decay 1e-4 on the conv and dense weights only (init_group_params), loss scale
1024 through FixedLossScaleManager(drop_overflow_update=False), i.e. TrainOneStepCell(sens=1024) with
the optimizer dividing it out. Every trainable Parameter starts from the same value, chosen by its name;
one synthetic batch from a fixed seed (64x64 images unless --image says, batch 4, 10 classes) is
trained `--steps` times with a constant learning rate; GRAPH_MODE.

graphkernel trains it fused and unfused (the emulated AI Core), with `--reference` also on its numpy
reference, MindSpore on its CPU. graphkernel builds every kernel before the first step (compile mode
wait): in the default background mode the first steps run on stand-ins, which sum in another order than
the kernels, and how many steps do is a matter of timing. Printed per network: the losses side by side,
the largest relative differences, and BatchNorm's moving statistics after the run against MindSpore's.
The exit status is 1 when a target is missed: fused/unfused within 1e-5 relative at every step, within
1e-4 of MindSpore's losses, moving statistics within 1e-4 (relative to each tensor's largest magnitude),
the loss falling.

The learning rate (LR below) is small enough that the comparison means something: `--nudge` trains each
network in MindSpore twice, the second time with every initial weight w moved to w * (1 + 1e-6 * u), u
uniform in [-1, 1] and drawn for each weight, and prints how far the losses move (they must move by less
than 1e-5 relative for a 1e-4 comparison to be fair). Each weight moves by its own factor: moved by one
common factor, a convolution's weights are a scale that the BatchNorm after it normalizes away, and such
a nudge does not reach the rounding boundaries (a ReLU's mask, a max pool's choice) that two correct
implementations may cross differently.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
from resnet_sources import batch, build_step, check_root, import_framework, initial_value, prepare  # noqa: E402

NETS = ("resnet18", "resnet50")
IMAGE, BATCH, CLASSES = 64, 4, 10
LR, WEIGHT_DECAY = 1e-4, 1e-4
NUDGE = 1e-6


def run(framework: str, net_name: str, steps: int, fused: bool, target: str, sources: str, nudge: float,
        lr: float = LR, image: int = IMAGE) -> dict:
    """Train one network in this process (a worker): losses, Parameter names, moving statistics."""
    sys.path.insert(0, sources)
    ms = import_framework(framework, target=target, fused=fused)
    train, net, decayed = build_step(ms, net_name, CLASSES, lr, WEIGHT_DECAY)
    if nudge:   # each weight by its own factor: a common scale of a conv's weights BatchNorm normalizes away
        for p in net.trainable_params():
            jitter = np.random.default_rng(zlib.crc32(p.name.encode()) + 1).uniform(-1, 1, tuple(p.shape))
            p.set_data(ms.Tensor((initial_value(p.name, p.shape) * (1 + nudge * jitter)).astype(np.float32)))
    x, y = batch(BATCH, image, CLASSES)
    data = [ms.Tensor(x), ms.Tensor(y)]
    losses = [float(np.asarray(train(*data).asnumpy()).reshape(-1)[0]) for _ in range(steps)]
    moving = {p.name: p.asnumpy().astype(float).tolist() for p in net.get_parameters()
              if "moving_mean" in p.name or "moving_variance" in p.name}
    return {"losses": losses, "names": [p.name for p in net.trainable_params()], "decay": decayed, "moving": moving}


def launch(python: str, sources: str, framework: str, net: str, steps: int, fused: bool = False,
           target: str = "Ascend", nudge: float = 0.0, lr: float = LR, image: int = IMAGE) -> dict:
    cmd = [python, os.path.abspath(__file__), "--worker", framework, "--sources", sources, "--net", net,
           "--steps", str(steps), "--target", target, "--nudge-by", str(nudge), "--lr", str(lr),
           "--image", str(image)] + (["--fused"] if fused else [])
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "bench") + ("" if framework == "mindspore"
                                                                       else os.pathsep + REPO),
               GRAPHKERNEL_COMPILE_MODE="wait")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"{framework} {net} {'fused' if fused else ''} failed:\n{done.stderr[-6000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def relative(a, b) -> float:
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def moving_difference(ours: dict, theirs: dict) -> tuple[float, str]:
    """The largest difference of a moving statistic relative to its tensor's largest magnitude, and where."""
    worst, where = 0.0, ""
    for name, value in theirs.items():
        a, b = np.asarray(ours[name]), np.asarray(value)
        d = float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-12))
        if d > worst:
            worst, where = d, name
    return worst, where


def report(net: str, runs: dict) -> bool:
    fused = runs["fused"]
    print(f"\n== {net}: {len(fused['names'])} trainable Parameters, {len(fused['decay'])} with weight decay, "
          f"{len(fused['moving'])} moving statistics")
    failed = False
    theirs = runs.get("MindSpore")
    if theirs and (fused["names"] != theirs["names"] or fused["decay"] != theirs["decay"]):
        print("   Parameter names differ from MindSpore's:", sorted(set(fused["names"]) ^ set(theirs["names"])))
        failed = True
    print("   step  " + "".join(f"{k:>14}" for k in runs))
    for i in range(len(fused["losses"])):
        print(f"   {i + 1:4d}  " + "".join(f"{r['losses'][i]:14.7f}" for r in runs.values()))
    on_off = relative(fused["losses"], runs["unfused"]["losses"])
    print(f"   fused/unfused: {on_off:.2e} relative (target 1e-5)")
    failed |= on_off > 1e-5
    if "reference" in runs:
        print(f"   fused/reference: {relative(fused['losses'], runs['reference']['losses']):.2e}")
    if theirs:
        to_ms = relative(fused["losses"], theirs["losses"])
        stats, where = moving_difference(fused["moving"], theirs["moving"])
        print(f"   fused/MindSpore: {to_ms:.2e} relative (target 1e-4); moving statistics {stats:.2e} "
              f"(target 1e-4; largest at {where})")
        failed |= to_ms > 1e-4 or stats > 1e-4
    falls = fused["losses"][-1] < fused["losses"][0]
    print(f"   loss {fused['losses'][0]:.4f} -> {fused['losses'][-1]:.4f} ({'falls' if falls else 'does not fall'})")
    return failed or not falls


def compare(args) -> int:
    work = tempfile.mkdtemp(prefix="official_resnet_")
    failed, opts = False, dict(lr=args.lr, image=args.image)
    try:
        for net in args.nets.split(","):
            ours, theirs = os.path.join(work, net, "graphkernel"), os.path.join(work, net, "mindspore")
            prepare(args.root, ours, "graphkernel", net)
            prepare(args.root, theirs, "mindspore", net)
            runs = {"fused": launch(sys.executable, ours, "graphkernel", net, args.steps, fused=True, **opts),
                    "unfused": launch(sys.executable, ours, "graphkernel", net, args.steps, **opts)}
            if args.reference:
                runs["reference"] = launch(sys.executable, ours, "graphkernel", net, args.steps, target="CPU", **opts)
            if args.mindspore_python:
                runs["MindSpore"] = launch(args.mindspore_python, theirs, "mindspore", net, args.steps, **opts)
            failed |= report(net, runs)
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def nudge(args) -> int:
    """How far MindSpore's own losses move when every initial weight moves by one part in a million."""
    work = tempfile.mkdtemp(prefix="official_resnet_")
    opts = dict(lr=args.lr, image=args.image)
    try:
        for net in args.nets.split(","):
            theirs = os.path.join(work, net)
            prepare(args.root, theirs, "mindspore", net)
            base = launch(args.mindspore_python, theirs, "mindspore", net, args.steps, **opts)["losses"]
            moved = launch(args.mindspore_python, theirs, "mindspore", net, args.steps, nudge=NUDGE,
                           **opts)["losses"]
            print(f"{net} at {args.image}x{args.image}: lr {args.lr}, every weight x (1 + {NUDGE:g} u): losses "
                  f"move by at most {relative(moved, base):.2e} relative over {args.steps} steps, by "
                  f"{relative(moved[:1], base[:1]):.2e} at step 1, before any update "
                  f"({base[0]:.6f} -> {base[-1]:.6f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", help="the folder official/cv/ResNet of MindSpore's models collection")
    parser.add_argument("--nets", default=",".join(NETS), help=f"comma-separated, of {', '.join(NETS)}")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--lr", type=float, default=LR, help=f"the constant learning rate (default {LR})")
    parser.add_argument("--image", type=int, default=IMAGE, help=f"the images' height and width (default {IMAGE})")
    parser.add_argument("--mindspore-python", help="a Python with mindspore 2.10 installed")
    parser.add_argument("--reference", action="store_true", help="also train on graphkernel's numpy reference")
    parser.add_argument("--nudge", action="store_true", help="measure the learning rate's sensitivity instead")
    parser.add_argument("--worker", choices=("graphkernel", "mindspore"), help=argparse.SUPPRESS)
    parser.add_argument("--sources", help=argparse.SUPPRESS)
    parser.add_argument("--net", choices=NETS, help=argparse.SUPPRESS)
    parser.add_argument("--fused", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target", default="Ascend", help=argparse.SUPPRESS)
    parser.add_argument("--nudge-by", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = run(args.worker, args.net, args.steps, args.fused, args.target, args.sources, args.nudge_by,
                     args.lr, args.image)
        print("RESULT " + json.dumps(result))
        return 0
    problem = check_root(args.root or ".")
    if not args.root or problem:
        parser.error(f"ROOT must be the folder official/cv/ResNet of MindSpore's models: {problem}")
    bad = set(args.nets.split(",")) - set(NETS)
    if bad:
        parser.error(f"unknown network(s) {sorted(bad)}; accepted: {', '.join(NETS)}")
    if args.nudge and not args.mindspore_python:
        parser.error("--nudge needs --mindspore-python")
    return nudge(args) if args.nudge else compare(args)


if __name__ == "__main__":
    sys.exit(main())
