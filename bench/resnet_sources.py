"""MindSpore's official ResNet sources, prepared for a run by MindSpore or by graphkernel, and the training
step built from them as the official `train.py` builds it on CPU/GPU. Shared by bench/resnet_bench.py
(step times) and bench/official_resnet_check.py (losses against MindSpore's).

    prepare(ROOT, dest, framework, net_name)   ROOT the folder official/cv/ResNet of MindSpore's models
                                               collection; this tool fetches nothing and the repository
                                               holds none of its files

prepare() copies `src/resnet.py` and `src/CrossEntropySmooth.py` into dest/src; for graphkernel,
`mindspore` becomes `graphkernel` in their import lines and nowhere else. `src/model_utils/config.py`
(which reads a YAML file and the command line at import) is replaced by a stand-in holding the two
settings resnet.py reads, `net_name` and `optimizer` ("Momentum"), as the sources' YAML files give them.

build_step() then builds what `train.py` builds when `device_target` is CPU: the network
(`resnet18`/`resnet50`), `CrossEntropySmooth(sparse=True, reduction="mean", smooth_factor, num_classes)`,
`init_group_params` (weight decay on every Parameter whose name holds none of beta, gamma, bias: the conv
and dense weights), `nn.Momentum(group_params, lr, 0.9, loss_scale=1024)` and the
`FixedLossScaleManager(1024, drop_overflow_update=False)` train.py's GPU path passes to Model, which
without an update cell is `TrainOneStepCell(WithLossCell(net, loss), opt, sens=1024)`: the gradients
scaled by the loss scale, the optimizer dividing it out. Every trainable Parameter starts from a value
chosen by its name alone (initial_value), so both frameworks train the same weights.
"""
from __future__ import annotations

import os
import zlib

import numpy as np

from official_bert_check import copy_source   # bench/: the same import-line rewrite

SOURCES = ("resnet.py", "CrossEntropySmooth.py")
MOMENTUM, LOSS_SCALE, SMOOTHING = 0.9, 1024.0, 0.1
STAND_IN_CONFIG = '''"""A stand-in for the sources' model_utils/config.py (written by bench/resnet_sources.py): the settings
resnet.py reads, as the YAML file of {net} gives them."""


class _Config:
    net_name = "{net}"
    optimizer = "Momentum"


config = _Config()
'''


def check_root(root: str) -> str | None:
    """None when `root` holds the sources this tool reads, else what is missing."""
    missing = [name for name in SOURCES if not os.path.isfile(os.path.join(root, "src", name))]
    return f"{root} lacks src/{', src/'.join(missing)}" if missing else None


def prepare(root: str, dest: str, framework: str, net_name: str) -> None:
    """dest/src: the official files (import lines changed for graphkernel) and the stand-in config."""
    package = os.path.join(dest, "src")
    os.makedirs(os.path.join(package, "model_utils"))
    for name in SOURCES:
        copy_source(os.path.join(root, "src", name), os.path.join(package, name), framework)
    for init in (package, os.path.join(package, "model_utils")):
        with open(os.path.join(init, "__init__.py"), "w", encoding="utf-8") as f:
            f.write("")
    with open(os.path.join(package, "model_utils", "config.py"), "w", encoding="utf-8") as f:
        f.write(STAND_IN_CONFIG.format(net=net_name))


def initial_value(name: str, shape) -> np.ndarray:
    """The starting value of the trainable Parameter called `name`, from its name alone: BatchNorm's gamma
    ones and beta zeros (as the sources' _bn), conv weights N(0, 2 / fan_out) (the sources'
    kaiming_normal, fan_out, relu), the dense weight U(+-1/sqrt(fan_in)) and its bias zeros."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    shape = tuple(shape)
    if name.endswith("gamma"):
        return np.ones(shape, np.float32)
    if name.endswith(("beta", "bias")):
        return np.zeros(shape, np.float32)
    if len(shape) == 4:
        fan_out = shape[0] * shape[2] * shape[3]
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_out)).astype(np.float32)
    bound = 1.0 / np.sqrt(shape[1])
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def batch(size: int, image: int, classes: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic images N(0, 1) [size, 3, image, image] and int32 labels, from a fixed seed."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((size, 3, image, image)).astype(np.float32)
    y = rng.integers(0, classes, size).astype(np.int32)
    return x, y


def group_params(net, weight_decay: float) -> list:
    """train.py's init_group_params (src/util.py): weight decay on what is not beta, gamma or bias."""
    decayed, other = [], []
    for p in net.trainable_params():
        (decayed if all(k not in p.name for k in ("beta", "gamma", "bias")) else other).append(p)
    return [{"params": decayed, "weight_decay": weight_decay}, {"params": other},
            {"order_params": net.trainable_params()}]


def build_step(ms, net_name: str, classes: int, lr: float, weight_decay: float):
    """(train cell, network, decayed Parameter names) as train.py builds them on CPU/GPU (the module doc);
    `ms` is the framework's top-level module (mindspore or graphkernel), the sources already importable."""
    from src.CrossEntropySmooth import CrossEntropySmooth   # the prepared package: its import lines are ms's
    from src import resnet
    net = getattr(resnet, net_name)(classes)
    for p in net.trainable_params():
        p.set_data(ms.Tensor(initial_value(p.name, p.shape)))
    groups = group_params(net, weight_decay)
    opt = ms.nn.Momentum(groups, lr, MOMENTUM, loss_scale=LOSS_SCALE)
    loss = CrossEntropySmooth(sparse=True, reduction="mean", smooth_factor=SMOOTHING, num_classes=classes)
    manager = ms.FixedLossScaleManager(LOSS_SCALE, drop_overflow_update=False)
    train = ms.nn.TrainOneStepCell(ms.nn.WithLossCell(net, loss), opt, sens=manager.get_loss_scale())
    train.set_train()
    return train, net, [p.name for p in groups[0]["params"]]


def import_framework(framework: str, target: str = "Ascend", fused: bool = False, flags: str = ""):
    """The framework's top-level module, its context set for a GRAPH_MODE run (MindSpore: its CPU)."""
    if framework == "mindspore":
        import mindspore as ms
        ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU", enable_graph_kernel=fused)
    else:
        import graphkernel as ms
        ms.set_context(mode=ms.GRAPH_MODE, device_target=target, enable_graph_kernel=fused,
                       graph_kernel_flags=flags)
    return ms
