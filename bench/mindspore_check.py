"""The same MindSpore 2.x script run by MindSpore and by graphkernel (only the import differs): a Dense,
GELU, LayerNorm, Softmax and CrossEntropyLoss network's loss and parameter gradients, and five training
steps of a Dense/LayerNorm network with each optimizer MindSpore runs on the CPU (TrainOneStepCell with
AdamWeightDecay, Adam, Momentum, SGD; weight decay on), compared.

    python bench/mindspore_check.py compare --mindspore-python /path/to/venv/bin/python

MindSpore is never a dependency: install it in a virtual environment of its own
(`python -m venv v && v/bin/pip install mindspore==2.10.0`) and pass that interpreter.
"""
import argparse
import json
import subprocess
import sys
import tempfile

import numpy as np


def run(backend: str) -> dict:
    if backend == "mindspore":
        import mindspore as ms
        from mindspore import Tensor, nn
    else:
        import graphkernel as ms
        from graphkernel import Tensor, nn
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((16, 8)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(16).astype(np.float32) * 0.1
    w2 = rng.standard_normal((3, 16)).astype(np.float32) * 0.3

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Dense(8, 16, weight_init=Tensor(w1), bias_init=Tensor(b1), activation="gelu")
            self.ln = nn.LayerNorm((16,), epsilon=1e-5)
            self.d2 = nn.Dense(16, 3, weight_init=Tensor(w2), bias_init="zeros")
            self.sm = nn.Softmax()

        def construct(self, x):
            h = self.ln(self.d1(x))
            return self.d2(h * self.sm(h))

    net, loss_fn = Net(), nn.CrossEntropyLoss()
    x = Tensor(rng.standard_normal((6, 8)).astype(np.float32))
    y = Tensor(np.array([0, 1, 2, 1, 0, 2], np.int32))

    def forward(data, label):
        return loss_fn(net(data), label)
    loss, grads = ms.value_and_grad(forward, None, net.trainable_params())(x, y)
    return {"names": [p.name for p in net.trainable_params()], "loss": float(loss.asnumpy()),
            "grads": [g.asnumpy().ravel().tolist() for g in grads]}


OPTIMIZERS = {
    "AdamWeightDecay": lambda nn, ps: nn.AdamWeightDecay(ps, 1e-2, weight_decay=0.1),
    "Adam": lambda nn, ps: nn.Adam(ps, 1e-2, weight_decay=0.1),
    "Momentum": lambda nn, ps: nn.Momentum(ps, 0.05, 0.9, weight_decay=0.1),
    "SGD": lambda nn, ps: nn.SGD(ps, 0.05, momentum=0.9, dampening=0.1, weight_decay=0.1),
}


def run_training(backend: str) -> dict:
    if backend == "mindspore":
        import mindspore as ms
        from mindspore import Tensor, nn
    else:
        import graphkernel as ms
        from graphkernel import Tensor, nn
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    rng = np.random.default_rng(0)
    start = [rng.standard_normal((16, 8)).astype(np.float32) * 0.3, rng.standard_normal(16).astype(np.float32) * 0.1,
             np.ones(16, np.float32), np.zeros(16, np.float32),
             rng.standard_normal((4, 16)).astype(np.float32) * 0.3, np.zeros(4, np.float32)]
    x = Tensor(rng.standard_normal((32, 8)).astype(np.float32))
    y = Tensor(rng.standard_normal((32, 4)).astype(np.float32))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Dense(8, 16, activation="relu")
            self.ln = nn.LayerNorm((16,))
            self.d2 = nn.Dense(16, 4)

        def construct(self, data):
            return self.d2(self.ln(self.d1(data)))

    out = {}
    for name, make in OPTIMIZERS.items():
        net = Net()
        for param, value in zip(net.trainable_params(), start):   # gamma and beta: decay skips them
            param.set_data(Tensor(value))
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), make(nn, net.trainable_params()))
        losses = [float(step(x, y).asnumpy()) for _ in range(5)]
        out[name] = {"losses": losses, "params": [p.asnumpy().ravel().tolist() for p in net.trainable_params()]}
    return out


def compare_training(mindspore_python: str) -> float:
    out = subprocess.run([mindspore_python, __file__, "mindspore-train"], capture_output=True, text=True,
                         check=True, cwd=tempfile.gettempdir())
    theirs, ours = json.loads(out.stdout.strip().splitlines()[-1]), run_training("graphkernel")
    worst = 0.0
    for name in OPTIMIZERS:
        a, b = np.array(theirs[name]["losses"]), np.array(ours[name]["losses"])
        loss_error = float(np.abs(a - b).max() / np.abs(a).max())
        param_error = max(float(np.abs(np.array(p) - np.array(q)).max() / max(np.abs(p).max(), 1e-30))
                          for p, q in zip(theirs[name]["params"], ours[name]["params"]))
        worst = max(worst, loss_error, param_error)
        print(f"{name:16s} 5 steps: losses {loss_error:.2e}, parameters {param_error:.2e} max relative difference")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("backend", choices=["mindspore", "graphkernel", "mindspore-train", "graphkernel-train",
                                            "compare"])
    parser.add_argument("--mindspore-python", default=sys.executable)
    args = parser.parse_args()
    if args.backend.endswith("-train"):
        print(json.dumps(run_training(args.backend[:-len("-train")])))
        return 0
    if args.backend != "compare":
        print(json.dumps(run(args.backend)))
        return 0
    out = subprocess.run([args.mindspore_python, __file__, "mindspore"], capture_output=True, text=True, check=True,
                         cwd=tempfile.gettempdir())   # MindSpore writes rank_0/ into its working directory
    theirs, ours = json.loads(out.stdout.strip().splitlines()[-1]), run("graphkernel")
    assert theirs["names"] == ours["names"], (theirs["names"], ours["names"])
    print(f"loss: mindspore {theirs['loss']:.7g}, graphkernel {ours['loss']:.7g}")
    worst = 0.0
    for name, a, b in zip(ours["names"], theirs["grads"], ours["grads"]):
        a, b = np.array(a), np.array(b)
        error = float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30))
        worst = max(worst, error)
        print(f"{name:12s} max relative difference {error:.2e}")
    ok = worst < 1e-5 and abs(theirs["loss"] - ours["loss"]) < 1e-5 * abs(theirs["loss"])
    return 0 if ok and compare_training(args.mindspore_python) < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
