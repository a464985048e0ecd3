"""Initializers with MindSpore's names and formulas (`mindspore.common.initializer`).

    initializer(init, shape, dtype=float32) -> Tensor
        init: an Initializer, a name ('normal', 'truncatedNormal', 'xavier_uniform', 'he_uniform', 'uniform',
        'zeros', 'ones'), a number (every element), or a Tensor/array of that shape

    Normal(sigma=0.01, mean=0.0)                     N(mean, sigma^2)
    TruncatedNormal(sigma=0.01, mean=0.0, a=-2, b=2) N(mean, sigma^2) redrawn outside mean + [a, b] sigma
    Uniform(scale=0.07)                              U(-scale, scale)
    XavierUniform(gain=1)                            U(-g, g), g = gain sqrt(6 / (fan_in + fan_out))
    HeUniform(negative_slope=0, mode='fan_in', nonlinearity='leaky_relu')
                                                     U(-g, g), g = gain sqrt(3 / fan), gain = sqrt(2 / (1 + a^2))
                                                     for leaky_relu (sqrt(2) for relu, 1 for linear)
    Zero(), One(), Constant(value)

fan_in and fan_out of a shape (out, in, k...) are in * prod(k) and out * prod(k) (a 1-D shape: its
length for both). Values are drawn from the generator `set_seed` seeds, in float64, then cast. MindSpore
returns a Tensor initialized lazily; here it is filled at once.
"""
from __future__ import annotations

import math

import numpy as np

from ir.dtypes import DType, as_dtype
from ir.errors import GraphKernelError
from graphkernel.settings.seed import generator
from graphkernel.tensor import Tensor


class InitializerError(GraphKernelError, ValueError):
    """An unknown initializer name, or one that cannot fill the shape asked for."""


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    if not shape:
        raise InitializerError("fan_in and fan_out need a shape of rank >= 1, got a scalar")
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


class Initializer:
    """Fills an array of a shape; subclasses define `values(shape, rng)` (float64 or exact values)."""

    def __call__(self, shape, dtype=DType.float32) -> np.ndarray:
        return np.asarray(self.values(tuple(shape), generator())).astype(as_dtype(dtype).np)

    def values(self, shape, rng) -> np.ndarray:
        raise NotImplementedError


class Normal(Initializer):
    def __init__(self, sigma=0.01, mean=0.0):
        self.sigma, self.mean = sigma, mean

    def values(self, shape, rng):
        return rng.normal(self.mean, self.sigma, shape)


class TruncatedNormal(Initializer):
    def __init__(self, sigma=0.01, mean=0.0, a=-2.0, b=2.0):
        if a >= b:
            raise InitializerError(f"TruncatedNormal: a={a} must be below b={b}")
        self.sigma, self.mean, self.a, self.b = sigma, mean, a, b

    def values(self, shape, rng):
        out = rng.standard_normal(shape)
        bad = (out < self.a) | (out > self.b)
        while bad.any():      # redraw outside [a, b]: the truncated distribution exactly
            out[bad] = rng.standard_normal(int(bad.sum()))
            bad = (out < self.a) | (out > self.b)
        return self.mean + self.sigma * out


class Uniform(Initializer):
    def __init__(self, scale=0.07):
        self.scale = scale

    def values(self, shape, rng):
        return rng.uniform(-self.scale, self.scale, shape)


class XavierUniform(Initializer):
    def __init__(self, gain=1):
        self.gain = gain

    def values(self, shape, rng):
        fan_in, fan_out = fans(shape)
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-bound, bound, shape)


def _gain(nonlinearity: str, slope: float) -> float:
    gains = {"linear": 1.0, "sigmoid": 1.0, "conv2d": 1.0, "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
             "leaky_relu": math.sqrt(2.0 / (1 + slope ** 2))}
    if nonlinearity not in gains:
        raise InitializerError(f"nonlinearity {nonlinearity!r}; accepted: {', '.join(gains)}")
    return gains[nonlinearity]


class HeUniform(Initializer):
    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        if mode not in ("fan_in", "fan_out"):
            raise InitializerError(f"HeUniform: mode {mode!r}; accepted: 'fan_in', 'fan_out'")
        self.slope, self.mode, self.nonlinearity = negative_slope, mode, nonlinearity

    def values(self, shape, rng):
        fan = fans(shape)[0 if self.mode == "fan_in" else 1]
        bound = _gain(self.nonlinearity, self.slope) * math.sqrt(3.0 / fan)
        return rng.uniform(-bound, bound, shape)


class Constant(Initializer):
    def __init__(self, value):
        self.value = value

    def values(self, shape, rng):
        return np.full(shape, self.value)


class Zero(Constant):
    def __init__(self):
        super().__init__(0)


class One(Constant):
    def __init__(self):
        super().__init__(1)


NAMES = {"normal": Normal, "truncatednormal": TruncatedNormal, "uniform": Uniform,
         "xavier_uniform": XavierUniform, "xavieruniform": XavierUniform, "he_uniform": HeUniform,
         "heuniform": HeUniform, "zeros": Zero, "zero": Zero, "ones": One, "one": One}


def initializer(init, shape=None, dtype=DType.float32) -> Tensor:
    """A Tensor of `shape` and `dtype` filled by `init` (see the module doc)."""
    dtype = as_dtype(dtype)
    if isinstance(init, (Tensor, np.ndarray)):
        arr = np.asarray(init.asnumpy() if isinstance(init, Tensor) else init)
        if shape is not None and tuple(arr.shape) != tuple(shape):
            raise InitializerError(f"initializer: the given tensor has shape {list(arr.shape)}, asked for "
                                   f"{list(shape)}")
        return Tensor(arr.astype(dtype.np))
    if shape is None:
        raise InitializerError("initializer: a shape is needed")
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if isinstance(init, str):
        cls = NAMES.get(init.lower())
        if cls is None:
            raise InitializerError(f"unknown initializer {init!r}; accepted: {', '.join(sorted(NAMES))}")
        init = cls()
    elif isinstance(init, (bool, int, float)):
        init = Constant(init)
    elif isinstance(init, type) and issubclass(init, Initializer):
        init = init()
    if not isinstance(init, Initializer):
        raise InitializerError(f"initializer: {init!r} is not an Initializer, a name, a number or a tensor")
    return Tensor(init(shape, dtype))
