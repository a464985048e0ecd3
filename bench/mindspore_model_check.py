"""Model.train and Model.eval of one MindSpore 2.x script, run by MindSpore and by graphkernel (only the
imports differ), compared: LossMonitor's printed lines (the same text but for the loss's last digits,
losses within 1e-5 relative) and Model.eval's metrics (within 1e-5 relative).

    python bench/mindspore_model_check.py compare --mindspore-python /path/to/venv/bin/python

MindSpore is never a dependency: install it in a virtual environment of its own
(`python -m venv v && v/bin/pip install mindspore==2.10.0`) and pass that interpreter. graphkernel runs
the script on its numpy reference and on the emulated AI Core with fusion on.
"""
import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def run(backend: str) -> dict:
    if backend == "mindspore":
        import mindspore as ms
        import mindspore.dataset as ds
        from mindspore import Tensor, nn
        from mindspore.train import LossMonitor, Model
        ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    else:
        import graphkernel as ms
        import graphkernel.train as ds
        from graphkernel import Tensor, nn
        from graphkernel.train import LossMonitor, Model
        ms.set_context(mode=ms.GRAPH_MODE, device_target=backend, enable_graph_kernel=backend == "Ascend")
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((8, 4)) * 0.5, rng.standard_normal(8) * 0.1,
               rng.standard_normal((2, 8)) * 0.5, rng.standard_normal(2) * 0.1]
    x = rng.standard_normal((24, 4)).astype(np.float32)
    y = rng.standard_normal((24, 2)).astype(np.float32)
    net = nn.SequentialCell([nn.Dense(4, 8, activation="relu"), nn.Dense(8, 2)])
    for p, w in zip(net.trainable_params(), weights):
        p.set_data(Tensor(w.astype(np.float32)))
    model = Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9), metrics={"mse", "mae", "loss"})
    data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(4)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        model.train(2, data, callbacks=[LossMonitor(per_print_times=2)])
    metrics = model.eval(data)
    return {"lines": printed.getvalue().splitlines(), "metrics": {k: float(v) for k, v in metrics.items()}}


def _split(line: str):
    m = re.fullmatch(r"(epoch: \d+ step: \d+, loss is )(\S+)", line)
    return (m[1], float(m[2])) if m else (line, None)


def compare(mindspore_python: str) -> int:
    here = os.path.abspath(__file__)
    env = dict(os.environ, PYTHONPATH="")
    out = subprocess.run([mindspore_python, here, "run", "mindspore"], capture_output=True, text=True, env=env,
                         cwd=tempfile.gettempdir(), check=True)   # away from the repository's packages
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    worst = 0.0
    for backend in ("CPU", "Ascend"):
        ours = run(backend)
        if len(ours["lines"]) != len(theirs["lines"]):
            print(f"{backend}: {len(ours['lines'])} lines printed, MindSpore {len(theirs['lines'])}")
            return 1
        for a, b in zip(ours["lines"], theirs["lines"]):
            (text_a, loss_a), (text_b, loss_b) = _split(a), _split(b)
            if text_a != text_b:
                print(f"{backend}: printed {a!r}, MindSpore {b!r}")
                return 1
            if loss_a is not None:
                worst = max(worst, abs(loss_a - loss_b) / abs(loss_b))
        if set(ours["metrics"]) != set(theirs["metrics"]):
            print(f"{backend}: metrics {sorted(ours['metrics'])}, MindSpore {sorted(theirs['metrics'])}")
            return 1
        for k, v in theirs["metrics"].items():
            worst = max(worst, abs(ours["metrics"][k] - v) / abs(v))
        print(f"{backend}: {len(ours['lines'])} LossMonitor lines as MindSpore's; eval {ours['metrics']}")
    print(f"largest relative difference (losses, metrics): {worst:.2g}")
    return 0 if worst <= 1e-5 else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run").add_argument("backend", choices=["mindspore", "CPU", "Ascend"])
    sub.add_parser("compare").add_argument("--mindspore-python", required=True)
    args = parser.parse_args()
    if args.command == "run":
        print(json.dumps(run(args.backend)))
        return 0
    return compare(args.mindspore_python)


if __name__ == "__main__":
    sys.exit(main())
