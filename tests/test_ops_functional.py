"""The functional forms take attributes positionally or by name; ops.clip_by_global_norm as MindSpore's."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, ops
from graphkernel.ops.clip import ClipError
from tests.tolerance import assert_close


def test_functional_attributes_by_position_and_name():
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    e = np.exp(x - x.max(0))
    assert_close(ops.softmax(Tensor(x), axis=0).asnumpy(), (e / e.sum(0)).astype(np.float32))
    assert_close(ops.matmul(Tensor(x), Tensor(x.T)).asnumpy(), x @ x.T)
    assert ops.cast(Tensor(x), ms.float16).dtype == ms.float16
    assert ops.gather(Tensor(x), Tensor(np.array([1, 0], np.int32)), 1).shape == (2, 2)
    with pytest.raises(Exception, match="axis"):
        ops.softmax(Tensor(x), axis=5)


@pytest.mark.parametrize("mode", [ms.GRAPH_MODE, ms.PYNATIVE_MODE])
def test_clip_by_global_norm(mode):
    ms.set_context(mode=mode, device_target="Ascend", enable_graph_kernel=True)
    a, b = np.full(4, 3.0, np.float32), np.full((2, 2), -4.0, np.float32)
    norm = np.sqrt(4 * 9 + 4 * 16)
    clipped = ms.jit(lambda p, q: ops.clip_by_global_norm((p, q), 2.0))(Tensor(a), Tensor(b))
    assert_close(clipped[0].asnumpy(), (a * 2 / norm).astype(np.float32))
    assert_close(clipped[1].asnumpy(), (b * 2 / norm).astype(np.float32))
    kept = ops.clip_by_global_norm((Tensor(a), Tensor(b)), 100.0)
    assert_close(kept[1].asnumpy(), b)
    with pytest.raises(ClipError, match="non-empty tuple or list"):
        ops.clip_by_global_norm(Tensor(a))
