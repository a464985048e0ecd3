"""The attributes and methods of Tensor and Parameter that MindSpore 2.x scripts use beyond the op table,
each as MindSpore 2.10 behaves on the CPU (the values in the comments are what it printed): .data,
.set_data, .init_data, .asnumpy, .copy, .shape/.dtype/.ndim/.size, .name, .requires_grad."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Parameter, Tensor
from graphkernel.common.initializer import One, initializer
from graphkernel.nn import Cell
from graphkernel.ops import operations as P

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def param(dtype=np.float32):
    return Parameter(Tensor(np.ones((2, 3), dtype)), name="w")


def test_shape_dtype_ndim_size():
    t = Tensor(X)
    assert (t.shape, t.dtype, t.ndim, t.size) == ((2, 3), ms.float32, 2, 6)   # MindSpore: (2, 3) Float32 2 6
    assert isinstance(t.shape, tuple) and isinstance(t.size, int) and isinstance(t.ndim, int)
    assert (Tensor(1.0).shape, Tensor(1.0).size) == ((), 1)
    assert Tensor(1).dtype == ms.int64 and Tensor([1.0, 2.0]).dtype == ms.float32


def test_data_and_asnumpy_and_copy_of_a_tensor():
    t = Tensor(X.copy())
    assert t.data.asnumpy() is t.asnumpy()       # MindSpore: t.data shares t's memory
    c = t.copy()
    t.asnumpy()[0, 0] = 55.0                      # MindSpore: asnumpy() shares a Tensor's memory too
    assert t.asnumpy()[0, 0] == 55.0 and c.asnumpy()[0, 0] == 0.0   # the copy has its own


def test_data_and_copy_of_a_parameter():
    p = param()
    d = p.data
    assert type(d) is Tensor and not isinstance(d, Parameter)     # MindSpore: p.data is a Tensor
    p.set_data(Tensor(np.full((2, 3), 9, np.float32)))
    assert d.asnumpy()[0, 0] == 1.0               # MindSpore: the old data keeps its value
    c = p.copy()
    assert type(c) is Parameter and c.name == "w" and c.requires_grad  # MindSpore: a Parameter named w
    p.set_data(Tensor(np.zeros((2, 3), np.float32)))
    assert c.asnumpy()[0, 0] == 9.0
    assert p.asnumpy() is not p.asnumpy()         # a snapshot here (MindSpore's shares the storage)


def test_set_data_casts_to_the_parameters_dtype_as_mindspore():
    i = Parameter(Tensor(np.ones(2, np.int32)), name="i").set_data(Tensor(np.array([1.5, -2.5], np.float32)))
    assert i.dtype == ms.int32 and i.asnumpy().tolist() == [1, -2]                  # MindSpore: [ 1 -2]
    h = Parameter(Tensor(np.ones(2, np.float16)), name="h").set_data(Tensor(np.array([1 / 3, 7e4], np.float32)))
    assert h.dtype == ms.float16 and h.asnumpy()[0] == np.float16(1 / 3) and np.isinf(h.asnumpy()[1])  # [0.3333 inf]
    f = param().set_data(Tensor(np.full((2, 3), 1.5, np.float16)))
    assert f.dtype == ms.float32 and f.asnumpy()[0, 0] == 1.5


def test_set_data_of_a_number_or_another_shape():
    p = param()
    address = p.data_ptr()
    assert p.set_data(Tensor(np.full((2, 3), 2, np.float32))) is p and p.data_ptr() == address   # in place
    assert p.set_data(3).shape == () and p.asnumpy() == 3.0         # MindSpore: shape (), 3.0
    q = param().set_data(Tensor(np.zeros((3, 3), np.float32)))
    assert q.shape == (3, 3)                                         # MindSpore: (3, 3)
    with pytest.raises(TypeError, match="can not be converted to current dtype implicitly"):
        Parameter(Tensor(np.ones(2, np.int32)), name="i").set_data(3.7)   # as MindSpore


def test_set_data_of_another_shape_recompiles_the_cells_that_read_it(cpu):
    class Scale(Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(Tensor(np.ones(3, np.float32)), name="w")

        def construct(self, x):
            return x * self.w

    net = Scale()
    np.testing.assert_array_equal(net(Tensor(X)).asnumpy(), X)
    net.w.set_data(Tensor(np.array([[2.0], [3.0]], np.float32)))
    np.testing.assert_array_equal(net(Tensor(X)).asnumpy(), X * np.array([[2.0], [3.0]], np.float32))
    assert net.trace_count == 2


def test_init_data():
    p = param()
    assert p.init_data() is p                                       # MindSpore: the Parameter itself
    made = initializer(One(), [2, 2], ms.float32)
    np.testing.assert_array_equal(made.init_data().asnumpy(), np.ones((2, 2), np.float32))
    assert Parameter(made, name="lazy").init_data().asnumpy().sum() == 4
    with pytest.raises(TypeError, match="init_data must be set Tensor.init, init can't be None"):
        Tensor(X).init_data()                                       # MindSpore's TypeError


def test_name_and_requires_grad_checked_as_mindspore():
    p = param()
    p.name = "x.y"
    assert p.name == "x.y"
    with pytest.raises(ValueError, match="name should be 'string' or 'None'"):
        p.name = 3
    p.requires_grad = False
    assert p.requires_grad is False
    with pytest.raises(TypeError, match="`requires_grad` must be bool type"):
        p.requires_grad = 1
    with pytest.raises(AttributeError):
        Tensor(X).name                                              # MindSpore: Tensor has no name


def test_data_inside_construct_is_the_value_there(two_settings):
    class Net(Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(Tensor(np.ones(3, np.float32)), name="w")

        def construct(self, x):
            before = self.w.data
            P.Assign()(self.w, self.w * 2.0)
            return x * before + self.w.data * x.copy()

    net = Net()
    np.testing.assert_allclose(net(Tensor(X)).asnumpy(), X * 1 + X * 2)
    np.testing.assert_array_equal(net.w.asnumpy(), np.full(3, 2, np.float32))
