"""The same MindSpore 2.x script run by MindSpore and by graphkernel (only the import differs): a Dense,
GELU, LayerNorm, Softmax and CrossEntropyLoss network's loss and parameter gradients, compared.

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("backend", choices=["mindspore", "graphkernel", "compare"])
    parser.add_argument("--mindspore-python", default=sys.executable)
    args = parser.parse_args()
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
    return 0 if worst < 1e-5 and abs(theirs["loss"] - ours["loss"]) < 1e-5 * abs(theirs["loss"]) else 1


if __name__ == "__main__":
    sys.exit(main())
