"""Every primitive of the user API, called through P, against direct numpy: eager (PYNATIVE) and traced
(GRAPH_MODE), several shapes including broadcasts, several dtypes."""
import math

import numpy as np
import pytest

from graphkernel import Tensor, context
from graphkernel import dtype as mstype
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from tolerance import assert_close

rng = np.random.default_rng(0)


def rand(shape, dtype=np.float32, positive=False):
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-5, 6, shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    return np.abs(x) + np.asarray(0.5, dtype) if positive else x


class Wrap(Cell):
    """A Cell calling one primitive, so the same call can be traced."""

    def __init__(self, prim, *call_args):
        super().__init__()
        self.prim, self.call_args = prim, call_args

    def construct(self, *xs):
        return self.prim(*xs, *self.call_args)


def both_modes(prim, arrays, *call_args):
    """Results of the primitive eagerly and traced, as numpy arrays (tuples for several outputs)."""
    tensors = [Tensor(a) for a in arrays]
    context.set_context(mode=context.PYNATIVE_MODE)
    eager = prim(*tensors, *call_args)
    context.set_context(mode=context.GRAPH_MODE)
    graph = Wrap(prim, *call_args)(*tensors)
    as_np = lambda r: tuple(t.asnumpy() for t in r) if isinstance(r, tuple) else r.asnumpy()
    return as_np(eager), as_np(graph)


BINARY = [
    ("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("RealDiv", np.true_divide),
    ("Maximum", np.maximum), ("Minimum", np.minimum), ("Greater", np.greater), ("Less", np.less),
    ("Equal", np.equal), ("TensorAdd", np.add), ("Div", np.true_divide),
]
SHAPES = [((4, 4), (4, 4)), ((3, 1, 5), (4, 5)), ((8,), ()), ((2, 3), (3,))]


@pytest.mark.parametrize("name,fn", BINARY)
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary(cpu, name, fn, shapes):
    dtypes = [np.float32, np.float64] + ([np.int32, np.int64] if name not in ("RealDiv", "Div") else [])
    for dtype in dtypes:
        a, b = rand(shapes[0], dtype), rand(shapes[1], dtype, positive=True)
        eager, graph = both_modes(getattr(P, name)(), [a, b])
        expected = fn(a, b)
        assert_close(eager, expected)
        assert_close(graph, expected)


def test_pow_with_scalar_and_tensor(cpu):
    x = rand((5, 3), positive=True)
    for y in (3.0, 0.5, rand((3,))):
        eager, graph = both_modes(P.Pow(), [x, y] if isinstance(y, np.ndarray) else [x], *(
            () if isinstance(y, np.ndarray) else (y,)))
        assert_close(graph, np.power(x, y if isinstance(y, np.ndarray) else np.float32(y)))


UNARY = [("Exp", np.exp, False), ("Log", np.log, True), ("Sqrt", np.sqrt, True),
         ("Rsqrt", lambda x: 1 / np.sqrt(x), True), ("Neg", np.negative, False), ("Abs", np.abs, False),
         ("Tanh", np.tanh, False), ("Erf", np.vectorize(math.erf), False),
         ("Square", np.square, False), ("Sigmoid", lambda x: 1 / (1 + np.exp(-x)), False),
         ("ReLU", lambda x: np.maximum(x, 0), False)]


@pytest.mark.parametrize("name,fn,positive", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_unary(cpu, name, fn, positive, dtype):
    x = rand((3, 7), dtype, positive)
    eager, graph = both_modes(getattr(P, name)(), [x])
    expected = fn(x.astype(np.float64)).astype(dtype)
    assert_close(eager, expected, rtol_scale=2)
    assert_close(graph, expected, rtol_scale=2)


def test_gelu_tanh_form(cpu):
    x = rand((4, 16))
    x64 = x.astype(np.float64)
    expected = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    eager, graph = both_modes(P.GeLU(), [x])
    assert_close(graph, expected.astype(np.float32), rtol_scale=4)
    assert_close(eager, graph)


@pytest.mark.parametrize("op,fn", [("ReduceSum", np.sum), ("ReduceMax", np.max), ("ReduceMin", np.min),
                                   ("ReduceMean", np.mean)])
@pytest.mark.parametrize("axis", [(), 0, -1, (0, 2), (1,)])
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reductions(cpu, op, fn, axis, keep_dims):
    x = rand((3, 4, 5))
    eager, graph = both_modes(getattr(P, op)(keep_dims=keep_dims), [x], axis)
    np_axis = None if axis == () else axis
    expected = fn(x.astype(np.float64), axis=np_axis, keepdims=keep_dims).astype(np.float32)
    assert_close(eager, expected, rtol_scale=4)
    assert_close(graph, expected, rtol_scale=4)


def test_cast_select_shape_ops(cpu):
    x = rand((2, 3, 4))
    e, g = both_modes(P.Cast(), [x], mstype.float16)
    assert_close(g, x.astype(np.float16))
    e, g = both_modes(P.Cast(), [x], np.int32)
    assert_close(g, x.astype(np.int32))
    cond = rand((3, 4), np.bool_)
    e, g = both_modes(P.Select(), [cond, x, rand((2, 3, 4))])
    assert g.shape == (2, 3, 4)
    e, g = both_modes(P.Reshape(), [x], (4, -1))
    assert_close(g, x.reshape(4, 6))
    e, g = both_modes(P.Transpose(), [x], (2, 0, 1))
    assert_close(g, x.transpose(2, 0, 1))
    e, g = both_modes(P.BroadcastTo((5, 2, -1, 4)), [x])
    assert_close(g, np.broadcast_to(x, (5, 2, 3, 4)))


def test_matmul_family(cpu):
    a, b = rand((4, 6)), rand((5, 6))
    e, g = both_modes(P.MatMul(transpose_b=True), [a, b])
    assert_close(g, a @ b.T, rtol_scale=10)
    a, b = rand((2, 3, 4, 6)), rand((1, 3, 6, 5))
    e, g = both_modes(P.BatchMatMul(), [a, b])
    assert_close(g, np.matmul(a, b), rtol_scale=10)


def test_softmax_logsoftmax_layernorm_biasadd(cpu):
    x = rand((4, 10))
    e, g = both_modes(P.Softmax(), [x])
    ex = np.exp(x - x.max(-1, keepdims=True))
    assert_close(g, ex / ex.sum(-1, keepdims=True), rtol_scale=4)
    e, g = both_modes(P.LogSoftmax(axis=0), [x])
    s = x - x.max(0, keepdims=True)
    assert_close(g, s - np.log(np.exp(s).sum(0, keepdims=True)), rtol_scale=4)
    gamma, beta = rand((10,)), rand((10,))
    e, (y, mean, var) = both_modes(P.LayerNorm(epsilon=1e-5), [x, gamma, beta])
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    assert_close(mean, m)
    assert_close(var, v, rtol_scale=4)
    assert_close(y, (x - m) / np.sqrt(v + np.float32(1e-5)) * gamma + beta, rtol_scale=10)
    x4, bias = rand((2, 3, 4, 5)), rand((3,))
    e, g = both_modes(P.BiasAdd(), [x4, bias])
    assert_close(g, x4 + bias.reshape(3, 1, 1))


def test_tensor_operators(cpu):
    x, y = rand((3, 3)), rand((3, 3), positive=True)
    tx, ty = Tensor(x), Tensor(y)
    assert_close((tx + ty).asnumpy(), x + y)
    assert_close((2.0 * tx - ty).asnumpy(), 2 * x - y)
    assert_close((tx / ty).asnumpy(), x / y)
    assert_close((-tx).asnumpy(), -x)
    assert_close((ty ** 2).asnumpy(), y ** 2)
    assert_close((tx > ty).asnumpy(), x > y)
    assert_close((1.0 / ty).asnumpy(), np.float32(1) / y)
