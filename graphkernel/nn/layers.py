"""Layers with MindSpore's names, arguments and defaults, written with the op table's primitives (so they
trace, fuse and differentiate like any construct).

    Dense(in_channels, out_channels, weight_init=None, bias_init=None, has_bias=True, activation=None)
        y = x @ weight^T + bias, weight (out, in); inputs of rank > 2 are flattened to 2-D and back.
        Default init as MindSpore 2.x: weight HeUniform(sqrt(5)), bias Uniform(1/sqrt(in_channels)).
    Embedding(vocab_size, embedding_size, use_one_hot=False, embedding_table='normal', dtype=int32,
              padding_idx=None)                   a Gather of rows of embedding_table (vocab, size)
    LayerNorm(normalized_shape, begin_norm_axis=-1, begin_params_axis=-1, gamma_init='ones',
              beta_init='zeros', epsilon=1e-7)   y only (P.LayerNorm's first result)
    GELU(approximate=True)                        tanh form (P.GeLU); False: 0.5 x (1 + erf(x / sqrt 2))
    ReLU, Sigmoid, Tanh, Softmax(axis=-1), LogSoftmax(axis=-1)
    Dropout(keep_prob=0.5, p=None)                identity when not training (see its doc)
    ClipByNorm(axis=None)(x, clip_norm)           x * clip_norm / max(l2 norm of x, clip_norm) (ops.clip_by_norm)
    BatchNorm1d(num_features, eps=1e-5, momentum=0.9, affine=True, ...)   x [N, C] or [N, C, L]
    BatchNorm2d(num_features, eps=1e-5, momentum=0.9, affine=True, ..., data_format='NCHW')   x [N, C, H, W]
                                                  batch statistics in training (`set_train()`), the moving
                                                  ones otherwise; training updates moving_mean and
                                                  moving_variance to momentum * old + (1 - momentum) * batch
"""
from __future__ import annotations

import math

from ir.errors import GraphKernelError
from graphkernel.common.initializer import HeUniform, Uniform, initializer
from graphkernel.cell import Cell
from graphkernel.ops.clip import clip_by_norm
from graphkernel.ops.dropout import dropout
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter


class LayerError(GraphKernelError, ValueError):
    """A layer built or called with arguments it cannot take."""


def _positive(cls: str, **values) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise LayerError(f"{cls}: {name} must be a positive int, got {v!r}")


class ReLU(Cell):
    def construct(self, x):
        return P.ReLU()(x)


class Sigmoid(Cell):
    def construct(self, x):
        return P.Sigmoid()(x)


class Tanh(Cell):
    def construct(self, x):
        return P.Tanh()(x)


class Softmax(Cell):
    def __init__(self, axis=-1):
        super().__init__()
        self.softmax = P.Softmax(axis=axis)

    def construct(self, x):
        return self.softmax(x)


class LogSoftmax(Cell):
    def __init__(self, axis=-1):
        super().__init__()
        self.log_softmax = P.LogSoftmax(axis=axis)

    def construct(self, x):
        return self.log_softmax(x)


class GELU(Cell):
    def __init__(self, approximate=True):
        super().__init__()
        self.approximate = approximate

    def construct(self, x):
        if self.approximate:
            return P.GeLU()(x)
        return x * 0.5 * (P.Erf()(x * (1 / math.sqrt(2))) + 1.0)


ACTIVATIONS = {"relu": ReLU, "sigmoid": Sigmoid, "tanh": Tanh, "gelu": GELU, "softmax": Softmax,
               "logsoftmax": LogSoftmax}


def get_activation(name):
    """A Cell for an activation given by name ('relu', 'gelu', ...), a Cell as is, None as None."""
    if name is None or isinstance(name, Cell):
        return name
    if isinstance(name, str) and name.lower() in ACTIVATIONS:
        return ACTIVATIONS[name.lower()]()
    raise LayerError(f"unknown activation {name!r}; accepted: {', '.join(ACTIVATIONS)} or a Cell")


class Dense(Cell):
    def __init__(self, in_channels, out_channels, weight_init=None, bias_init=None, has_bias=True,
                 activation=None, dtype=None):
        super().__init__()
        _positive("Dense", in_channels=in_channels, out_channels=out_channels)
        self.in_channels, self.out_channels, self.has_bias = in_channels, out_channels, has_bias
        weight_init = HeUniform(negative_slope=math.sqrt(5)) if weight_init is None else weight_init
        self.weight = Parameter(initializer(weight_init, (out_channels, in_channels), dtype or "float32"),
                                name="weight")
        if has_bias:
            bias_init = Uniform(1 / math.sqrt(in_channels)) if bias_init is None else bias_init
            self.bias = Parameter(initializer(bias_init, (out_channels,), dtype or "float32"), name="bias")
        self.activation = get_activation(activation)
        self.matmul = P.MatMul(transpose_b=True)
        self.bias_add = P.BiasAdd()

    def construct(self, x):
        if not x.shape or x.shape[-1] != self.in_channels:
            raise LayerError(f"Dense({self.in_channels}, {self.out_channels}): input {list(x.shape)} must end "
                             f"in in_channels={self.in_channels}")
        shape = x.shape
        if len(shape) != 2:
            x = P.Reshape()(x, (-1, self.in_channels))
        y = self.matmul(x, self.weight)
        if self.has_bias:
            y = self.bias_add(y, self.bias)
        if self.activation is not None:
            y = self.activation(y)
        return y if len(shape) == 2 else P.Reshape()(y, tuple(shape[:-1]) + (self.out_channels,))


class Embedding(Cell):
    def __init__(self, vocab_size, embedding_size, use_one_hot=False, embedding_table="normal", dtype=None,
                 padding_idx=None):
        super().__init__()
        _positive("Embedding", vocab_size=vocab_size, embedding_size=embedding_size)
        self.vocab_size, self.embedding_size, self.use_one_hot = vocab_size, embedding_size, use_one_hot
        table = initializer(embedding_table, (vocab_size, embedding_size)).asnumpy()   # ours alone: no copy
        if padding_idx is not None:
            if not -vocab_size <= padding_idx < vocab_size:
                raise LayerError(f"Embedding: padding_idx {padding_idx} outside [{-vocab_size}, {vocab_size})")
            table[padding_idx] = 0
        self.padding_idx = padding_idx
        self.embedding_table = Parameter(table, name="embedding_table")
        self.gather = P.Gather()

    def construct(self, ids):
        if not ids.dtype.is_int:
            raise LayerError(f"Embedding: ids must be int32 or int64, got {ids.dtype}")
        return self.gather(self.embedding_table, ids, 0)


class LayerNorm(Cell):
    def __init__(self, normalized_shape, begin_norm_axis=-1, begin_params_axis=-1, gamma_init="ones",
                 beta_init="zeros", epsilon=1e-7, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int) or not isinstance(normalized_shape, (tuple, list)):
            raise LayerError(f"LayerNorm: normalized_shape must be a tuple or list, got {normalized_shape!r}")
        shape = tuple(normalized_shape)
        for i, d in enumerate(shape):
            if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
                raise LayerError(f"LayerNorm: normalized_shape[{i}] must be a positive int, got {d!r} "
                                 f"(normalized_shape={normalized_shape!r})")
        self.gamma = Parameter(initializer(gamma_init, shape, dtype or "float32"), name="gamma")
        self.beta = Parameter(initializer(beta_init, shape, dtype or "float32"), name="beta")
        self.layer_norm = P.LayerNorm(begin_norm_axis=begin_norm_axis, begin_params_axis=begin_params_axis,
                                      epsilon=epsilon)

    def construct(self, x):
        return self.layer_norm(x, self.gamma, self.beta)[0]


class Dropout(Cell):
    """Dropout(keep_prob=0.5, p=None) (p, the drop probability, wins when given, as in MindSpore 2.x):
    in training (`set_train()`), each element is zeroed with probability p and the rest scaled by
    1 / (1 - p), the mask drawn from counters (graphkernel/ops/dropout.py); outside training, the identity."""

    def __init__(self, keep_prob=0.5, p=None, dtype=None):
        super().__init__()
        drop = (1 - keep_prob) if p is None else p
        if not 0 <= drop < 1:
            raise LayerError(f"Dropout: the drop probability must be in [0, 1), got {drop!r}")
        self.p = drop

    def construct(self, x):
        return dropout(x, self.p, self.training)


class ClipByNorm(Cell):
    def __init__(self, axis=None):
        super().__init__()
        if axis not in (None, ()):
            raise LayerError(f"ClipByNorm: only axis=None (the norm over every axis) is supported, got {axis!r}")
        self.axis = axis

    def construct(self, x, clip_norm):
        return clip_by_norm(x, clip_norm)


class _BatchNorm(Cell):
    """MindSpore's nn.BatchNorm layers over P.BatchNorm: `momentum` here is the weight of the old moving
    statistics (P.BatchNorm's is 1 - momentum); use_batch_statistics None follows `set_train()`."""
    ranks: tuple[int, ...] = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones", beta_init="zeros",
                 moving_mean_init="zeros", moving_var_init="ones", use_batch_statistics=None,
                 data_format="NCHW", dtype=None):
        super().__init__()
        name = type(self).__name__
        _positive(name, num_features=num_features)
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0 <= momentum <= 1:
            raise LayerError(f"{name}: momentum must be in [0, 1], got {momentum!r}")
        if use_batch_statistics not in (None, True, False):
            raise LayerError(f"{name}: use_batch_statistics must be None, True or False, got {use_batch_statistics!r}")
        shape, dtype = (num_features,), dtype or "float32"
        self.gamma = Parameter(initializer(gamma_init, shape, dtype), name="gamma", requires_grad=affine)
        self.beta = Parameter(initializer(beta_init, shape, dtype), name="beta", requires_grad=affine)
        self.moving_mean = Parameter(initializer(moving_mean_init, shape, dtype), name="moving_mean",
                                     requires_grad=False)
        self.moving_variance = Parameter(initializer(moving_var_init, shape, dtype), name="moving_variance",
                                         requires_grad=False)
        self.use_batch_statistics = use_batch_statistics
        settings = dict(epsilon=eps, data_format=data_format)
        self.bn_train = P.BatchNorm(is_training=True, momentum=1.0 - momentum, **settings)
        self.bn_infer = P.BatchNorm(is_training=False, **settings)

    def construct(self, x):
        if len(x.shape) not in self.ranks:
            raise LayerError(f"{type(self).__name__}: x must have rank {' or '.join(map(str, self.ranks))}, got "
                             f"shape {list(x.shape)}")
        training = self.training if self.use_batch_statistics is None else self.use_batch_statistics
        bn = self.bn_train if training else self.bn_infer
        return bn(x, self.gamma, self.beta, self.moving_mean, self.moving_variance)[0]


class BatchNorm1d(_BatchNorm):
    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    ranks = (4,)
