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

Memory. The shape is checked first (ints >= 0, a ShapeError naming it) and so is its size, against
max_device_memory and the process's limits (a ResourceLimitError naming the shape, its bytes and the
limit) before anything is allocated. The result is allocated once, in its own dtype, and filled a chunk
of CHUNK elements at a time: the float64 draws never take more than 8 MiB, whatever the tensor's size
(a chunk's draws are the next ones of the generator's stream, so the values are those of one draw of
the whole shape, cast).
"""
from __future__ import annotations

import math

import numpy as np

from ir.dtypes import DType, as_dtype
from ir.errors import GraphKernelError
from graphkernel.settings.seed import generator
from graphkernel.tensor import Tensor, checked_shape, new_array


class InitializerError(GraphKernelError, ValueError):
    """An unknown initializer name, or one that cannot fill the shape asked for."""


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    if not shape:
        raise InitializerError("fan_in and fan_out need a shape of rank >= 1, got a scalar")
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


CHUNK = 1 << 20   # elements drawn (in float64) and cast into the result at a time


class Initializer:
    """Fills an array of a shape; subclasses define `draw(n, shape, rng)`: the next n values of the whole
    shape's draw, float64 (or exact values)."""

    def __call__(self, shape, dtype=DType.float32) -> np.ndarray:
        out = new_array(shape, dtype, f"initializer {type(self).__name__}")
        self.fill(out.reshape(-1), tuple(out.shape), generator())
        return out

    def fill(self, flat: np.ndarray, shape: tuple[int, ...], rng) -> None:
        """Write the values into `flat` (the result in C order), CHUNK at a time, cast on assignment."""
        for start in range(0, flat.size, CHUNK):
            stop = min(start + CHUNK, flat.size)
            flat[start:stop] = self.draw(stop - start, shape, rng)

    def draw(self, n: int, shape: tuple[int, ...], rng) -> np.ndarray:
        raise NotImplementedError


class Normal(Initializer):
    def __init__(self, sigma=0.01, mean=0.0):
        self.sigma, self.mean = sigma, mean

    def draw(self, n, shape, rng):
        return rng.normal(self.mean, self.sigma, n)


class TruncatedNormal(Initializer):
    def __init__(self, sigma=0.01, mean=0.0, a=-2.0, b=2.0):
        if a >= b:
            raise InitializerError(f"TruncatedNormal: a={a} must be below b={b}")
        self.sigma, self.mean, self.a, self.b = sigma, mean, a, b

    def fill(self, flat, shape, rng):
        """The draws of the whole shape, redrawn where they fall outside [a, b] (in the order one draw of
        the whole shape would redraw them): the truncated distribution exactly."""
        outside = np.zeros(flat.size, np.bool_)
        for start in range(0, flat.size, CHUNK):
            stop = min(start + CHUNK, flat.size)
            z = rng.standard_normal(stop - start)
            np.less(z, self.a, out=outside[start:stop])
            outside[start:stop] |= z > self.b
            z *= self.sigma   # in place: mean + sigma * z without two more chunks
            z += self.mean
            flat[start:stop] = z
            del z   # before the next chunk is drawn
        redo = np.flatnonzero(outside)
        del outside
        while redo.size:
            z = rng.standard_normal(redo.size)
            inside = (z >= self.a) & (z <= self.b)
            flat[redo[inside]] = self.mean + self.sigma * z[inside]
            redo = redo[~inside]


class Uniform(Initializer):
    def __init__(self, scale=0.07):
        self.scale = scale

    def draw(self, n, shape, rng):
        return rng.uniform(-self.scale, self.scale, n)


class XavierUniform(Initializer):
    def __init__(self, gain=1):
        self.gain = gain

    def draw(self, n, shape, rng):
        fan_in, fan_out = fans(shape)
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-bound, bound, n)


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

    def draw(self, n, shape, rng):
        fan = fans(shape)[0 if self.mode == "fan_in" else 1]
        bound = _gain(self.nonlinearity, self.slope) * math.sqrt(3.0 / fan)
        return rng.uniform(-bound, bound, n)


class Constant(Initializer):
    def __init__(self, value):
        self.value = value

    def fill(self, flat, shape, rng):
        flat[...] = np.asarray(self.value)   # cast as numpy casts: the value of a float64 / int64 array's


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
        if shape is not None and tuple(arr.shape) != checked_shape(shape, "initializer: shape"):
            raise InitializerError(f"initializer: the given tensor has shape {list(arr.shape)}, asked for "
                                   f"{list(shape)}")
        out = new_array(arr.shape, dtype, "initializer")
        out[...] = arr
        return Tensor(out)
    if shape is None:
        raise InitializerError("initializer: a shape is needed")
    shape = checked_shape(shape, "initializer: shape")
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
    tensor = Tensor(init(shape, dtype))
    tensor.init = init   # MindSpore's Tensor.init: init_data() returns the (already filled) Tensor
    return tensor
