"""ResNet-50 written in torch (no torchvision), shaped as MindSpore's official `resnet50` (src/resnet.py):
a 7x7/2 stem, a 3x3/2 max pool with "same" padding, four stages of bottleneck blocks [3, 4, 6, 3] with the
stride on the 3x3 convolution and a 1x1 projection on the first block of each stage, BatchNorm
(eps 1e-4, MindSpore momentum 0.9, torch's 0.1), global average pooling and a dense layer. MindSpore's
"same" padding puts the odd pixel at the bottom and right; torch's conv2d pads symmetrically, so a
strided layer whose "same" padding is odd pads with F.pad first.

    net = ResNet50(classes)          step(net, opt, x, y) -> loss (cross-entropy with label smoothing 0.1)
    optimizer(net, lr, weight_decay) -> torch.optim.SGD with momentum 0.9 and the sources' decay groups
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

SMOOTHING = 0.1


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """MindSpore's "same": (before, after) with the odd pixel after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class SameConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1):
        super().__init__()
        self.kernel, self.stride = kernel, stride
        self.weight = nn.Parameter(torch.randn(cout, cin, kernel, kernel) * math.sqrt(2.0 / (cout * kernel * kernel)))

    def forward(self, x):
        top, bottom = same_padding(x.shape[2], self.kernel, self.stride)
        left, right = same_padding(x.shape[3], self.kernel, self.stride)
        if top == bottom and left == right:
            return F.conv2d(x, self.weight, stride=self.stride, padding=(top, left))
        return F.conv2d(F.pad(x, (left, right, top, bottom)), self.weight, stride=self.stride)


def bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=1e-4, momentum=0.1)


class Bottleneck(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        mid = cout // 4
        self.conv1, self.bn1 = SameConv(cin, mid, 1), bn(mid)
        self.conv2, self.bn2 = SameConv(mid, mid, 3, stride), bn(mid)
        self.conv3, self.bn3 = SameConv(mid, cout, 1), bn(cout)
        self.down = (nn.Sequential(SameConv(cin, cout, 1, stride), bn(cout))
                     if stride != 1 or cin != cout else None)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (self.down(x) if self.down is not None else x))


class ResNet50(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.conv1, self.bn1 = SameConv(3, 64, 7, 2), bn(64)
        stages = []
        for n, cin, cout, stride in ((3, 64, 256, 1), (4, 256, 512, 2), (6, 512, 1024, 2), (3, 1024, 2048, 2)):
            stages += [Bottleneck(cin, cout, stride)] + [Bottleneck(cout, cout, 1) for _ in range(n - 1)]
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        top, bottom = same_padding(x.shape[2], 3, 2)
        left, right = same_padding(x.shape[3], 3, 2)
        x = F.max_pool2d(F.pad(x, (left, right, top, bottom), value=-math.inf), 3, 2)
        x = self.stages(x)
        return self.fc(x.mean(dim=(2, 3)))


def optimizer(net: nn.Module, lr: float, weight_decay: float) -> torch.optim.SGD:
    """SGD with momentum 0.9 (MindSpore's Momentum: v = 0.9 v + g, p -= lr v) and weight decay on the conv
    and dense weights only."""
    decayed = [p for name, p in net.named_parameters() if p.dim() > 1]
    other = [p for name, p in net.named_parameters() if p.dim() <= 1]
    return torch.optim.SGD([{"params": decayed, "weight_decay": weight_decay}, {"params": other, "weight_decay": 0.0}],
                           lr=lr, momentum=0.9)


def step(net: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(net(x), y, label_smoothing=SMOOTHING)
    loss.backward()
    opt.step()
    return float(loss.detach())
