"""MindSpore's Tensor methods (the op rows' `api.method` with their `api.method_args`) and basic indexing
(a StridedSlice), inside construct in every mode and target, fused and unfused, and on concrete
Tensors, against numpy; a constant Tensor sliced inside construct; bad indices named."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import GraphKernelError, Tensor
from graphkernel.nn import Cell
from graphkernel.ops import operations as P
from graphkernel.tensor import _METHODS, operations
from tolerance import assert_close

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 4 + 0.25

def test_tensor_operators_call_the_operations_module():
    """tensor.operations() is graphkernel.ops.operations (P), handed over when P is imported; the
    fusion passes' `primitives(node)` is another thing: the primitive nodes a node computes."""
    assert operations() is P
    assert (Tensor(X) * 2).asnumpy().tolist() == (X * 2).tolist()


# (id, the call on a tensor, the same on a numpy array)
CALLS = [
    ("sum", lambda x: x.sum(), lambda x: x.sum()),
    ("sum-axis-keepdims", lambda x: x.sum(axis=1, keepdims=True), lambda x: x.sum(1, keepdims=True)),
    ("sum-axes", lambda x: x.sum((0, 2)), lambda x: x.sum((0, 2))),
    ("sum-None", lambda x: x.sum(None, True), lambda x: x.sum(None, keepdims=True)),
    ("mean", lambda x: x.mean(-1), lambda x: x.mean(-1)),
    ("mean-keep_dims", lambda x: x.mean(0, keep_dims=True), lambda x: x.mean(0, keepdims=True)),
    ("max", lambda x: x.max(0), lambda x: x.max(0)),
    ("min", lambda x: x.min(), lambda x: x.min()),
    ("reshape-args", lambda x: x.reshape(6, 4), lambda x: x.reshape(6, 4)),
    ("reshape-tuple", lambda x: x.reshape((4, -1)), lambda x: x.reshape(4, -1)),
    ("transpose", lambda x: x.transpose(), lambda x: x.transpose()),
    ("transpose-axes", lambda x: x.transpose(1, 0, 2), lambda x: x.transpose(1, 0, 2)),
    ("T", lambda x: x.T, lambda x: x.T),
    ("astype", lambda x: x.astype(ms.float16), lambda x: x.astype(np.float16)),
    ("expand_dims", lambda x: x.expand_dims(-1), lambda x: x[..., None]),
    ("squeeze", lambda x: x[:, None, :1].squeeze(), lambda x: x[:, 0]),
    ("squeeze-axis", lambda x: x[None].squeeze(0), lambda x: x),
    ("tile", lambda x: x.tile((2, 1)), lambda x: np.tile(x, (2, 1))),
    ("abs-exp-sqrt", lambda x: (-x).abs().exp().sqrt(), lambda x: np.sqrt(np.exp(np.abs(-x)))),
    ("index-int", lambda x: x[1], lambda x: x[1]),
    ("index-column", lambda x: x[:, 0], lambda x: x[:, 0]),
    ("index-ellipsis", lambda x: x[..., 1:3], lambda x: x[..., 1:3]),
    ("index-step", lambda x: x[::2, ::-1], lambda x: x[::2, ::-1]),
    ("index-None", lambda x: x[None, :, None], lambda x: x[None, :, None]),
    ("index-negative", lambda x: x[1, -1, -3:-1], lambda x: x[1, -1, -3:-1]),
    ("index-empty", lambda x: x[:, 3:1], lambda x: x[:, 3:1]),
    ("index-out-of-bounds-slice", lambda x: x[:, 1:10], lambda x: x[:, 1:10]),
]


class Call(Cell):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def construct(self, x):
        return self.fn(x)


@pytest.mark.parametrize("call, want", [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_methods_and_indexing_in_construct(setting, call, want):
    got = Call(call)(Tensor(X))
    expected = np.asarray(want(X))
    assert got.shape == expected.shape
    assert_close(got.asnumpy(), expected.astype(got.asnumpy().dtype))


@pytest.mark.parametrize("call, want", [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_methods_and_indexing_on_concrete_tensors(cpu, call, want):
    got = call(Tensor(X))
    assert_close(got.asnumpy(), np.asarray(want(X)).astype(got.asnumpy().dtype))


def test_every_method_of_the_op_table_with_its_own_arguments_has_a_call_here():
    from ir.ops import OPS
    bound = {name for name, op in _METHODS.items() if OPS[op].api.method_args}
    called = {c[0].split("-")[0] for c in CALLS}
    assert bound <= called | {"transpose"}, bound - called


def test_a_constant_tensor_sliced_in_construct_by_a_shape(setting):
    class Net(Cell):
        def __init__(self):
            super().__init__()
            self.position_ids = Tensor(np.arange(16).reshape(1, 16).astype(np.int32))

        def construct(self, x):
            seq = x.shape[1]
            return self.position_ids[:, :seq] + x

    x = np.ones((2, 5), np.int32)
    np.testing.assert_array_equal(Net()(Tensor(x)).asnumpy(), np.arange(5)[None] + x)


def test_an_index_that_only_drops_a_size_1_axis_is_a_reshape(cpu):
    ms.set_context(enable_graph_kernel=True)
    compiled = Call(lambda x: x[:, 0] * 2.0).compile(Tensor(np.ones((3, 1, 4), np.float32)))
    assert "Slice" not in {n.op for n in compiled.stages["simplify"].nodes}
    assert compiled.kernel_count == 1


def test_bad_indices_and_methods_are_named(cpu):
    x = Tensor(X)
    with pytest.raises(GraphKernelError, match="index 0 of the tensor is a Tensor.*P.Gather"):
        x[Tensor(np.array([0], np.int32))]
    with pytest.raises(GraphKernelError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(GraphKernelError, match="step cannot be 0"):
        x[::0]
    with pytest.raises(GraphKernelError, match=r"begin\[0\]=5 of axis 0 \(size 2\)"):
        x[5]
    with pytest.raises(AttributeError, match="no attribute 'summ' \\(did you mean sum\\?\\)"):
        x.summ()
    with pytest.raises(TypeError, match="unexpected keyword argument 'keep_dims'; it takes axis, keepdims"):
        x.sum(keep_dims=True)

    class Traced(Cell):
        def construct(self, x):
            return x[:, x]

    with pytest.raises(GraphKernelError, match="index 1 of the tensor is a SymbolicTensor"):
        Traced()(x)
