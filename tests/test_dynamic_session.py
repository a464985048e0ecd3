"""Seed 004's dynamic-shape session options: gears (input_shape + dynamic_dims + dynamic_node_type) and
ranges (dynamic_input + dynamic_graph_execute_mode + dynamic_inputs_shape_range), in the seed's syntax
(graphkernel/settings/dynamic_shapes.py): one compile serving every gear or the whole range, a shape
outside refused naming what was declared, and every inconsistency an error naming the option."""
import numpy as np
import pytest

from graphkernel import Tensor, context, nn
from graphkernel.context import ContextError
from graphkernel.ops import operations as P
from graphkernel.settings.dynamic_shapes import DynamicShapeSettingError
from graphkernel.tracing.dynamic import InputShapeError
from tests.tolerance import assert_close


class Net(nn.Cell):
    def construct(self, data, mask):
        return P.ReduceSum()(data * 2.0, 3), P.ReduceMax()(mask, 1)


def _call(net, data_shape, mask_shape, seed=0):
    rng = np.random.default_rng(seed)
    d = rng.standard_normal(data_shape).astype(np.float32)
    m = rng.standard_normal(mask_shape).astype(np.float32)
    out = net(Tensor(d), Tensor(m))
    assert_close(out[0].asnumpy(), (d * 2).sum(3))
    assert_close(out[1].asnumpy(), m.max(1), bitwise=True)
    return out


GEARS = dict(input_shape="data:1,1,40,-1;mask:-1,-1", dynamic_dims="20,1,1;40,2,2;80,4,4", dynamic_node_type=0)


def test_gears_compile_once_and_serve_exactly_the_gears():
    context.set_context(device_target="Ascend", **GEARS)
    net = Net()
    for g in ((20, 1, 1), (40, 2, 2), (80, 4, 4), (20, 1, 1)):
        _call(net, (1, 1, 40, g[0]), (g[1], g[2]))
    assert net.trace_count == 1
    compiled = net.compile(Tensor(np.ones((1, 1, 40, 20), np.float32)), Tensor(np.ones((1, 1), np.float32)))
    planned = compiled.program.planner._plans   # every gear was planned (its kernels built) at compile time
    assert {((1, 1, 40, g0), (g1, g2)) for g0, g1, g2 in ((20, 1, 1), (40, 2, 2), (80, 4, 4))} <= set(planned)
    with pytest.raises(InputShapeError, match=r"dynamic dims are 30,2,2, not one of the gears of "
                                              r"input_shape/dynamic_dims \(20,1,1; 40,2,2; 80,4,4\).*data\) \[1, 1, "
                                              r"40, -1\].*given float32\[1, 1, 40, 30\]"):
        _call(net, (1, 1, 40, 30), (2, 2))
    with pytest.raises(InputShapeError, match=r"input 0 \(data\).*dim 2 is 41, declared 40"):
        _call(net, (1, 1, 41, 20), (1, 1))


def test_ranges_compile_once_for_the_range_and_refuse_outside_it():
    context.set_context(device_target="Ascend", dynamic_input=True, dynamic_graph_execute_mode="dynamic_execute",
                        dynamic_inputs_shape_range="data:[1,1,40,2~64];mask:[1~4, -1]")
    net = Net()
    for k, (n, rows, cols) in enumerate([(2, 1, 1), (64, 4, 100), (7, 3, 5)]):
        _call(net, (1, 1, 40, n), (rows, cols), seed=k)
    assert net.trace_count == 1
    with pytest.raises(InputShapeError, match=r"input 0 \(data\): declared \[1, 1, 40, 2~64\] by "
                                              r"dynamic_inputs_shape_range.*dim 3 is 65, outside its range 2~64"):
        _call(net, (1, 1, 40, 65), (2, 2))
    with pytest.raises(InputShapeError, match=r"input 1 \(mask\).*dim 0 is 5, outside its range 1~4"):
        _call(net, (1, 1, 40, 8), (5, 2))


def test_getnext_names_the_call_inputs_in_order():
    context.set_context(device_target="CPU", dynamic_input=True, dynamic_graph_execute_mode="dynamic_execute",
                        dynamic_inputs_shape_range="getnext:[1,1,40,-1],[-1,3]")
    net = Net()
    for n in (3, 9):
        _call(net, (1, 1, 40, n), (n, 3))
    assert net.trace_count == 1


@pytest.mark.parametrize("options,message", [
    (dict(GEARS, dynamic_dims="20,1;40,2"), r"dynamic_dims: gear 0 \(20,1\) has 2 size\(s\), input_shape has 3"),
    (dict(GEARS, dynamic_dims="20,1,1"), "dynamic_dims lists 1 gear; it must list at least 2"),
    (dict(GEARS, dynamic_dims="20,1,1;20,1,1"), "dynamic_dims lists a gear twice"),
    ({k: v for k, v in GEARS.items() if k != "dynamic_node_type"}, "dynamic_node_type is not set"),
    ({k: v for k, v in GEARS.items() if k != "input_shape"}, "input_shape is not set"),
    ({k: v for k, v in GEARS.items() if k != "dynamic_dims"}, "dynamic_dims is not set"),
    (dict(GEARS, input_shape="data:1,1,40,8;mask:2,2"), "input_shape has no -1 dim"),
    (dict(GEARS, dynamic_input=True), r"\(gears\) and dynamic_input \(ranges\) are both set"),
    (dict(dynamic_inputs_shape_range="data:[1,1,40,2~64]"), "set without dynamic_input=True"),
    (dict(dynamic_input=True, dynamic_inputs_shape_range="data:[1,1,40,2~64]"),
     'needs dynamic_graph_execute_mode="dynamic_execute"'),
    (dict(dynamic_input=True, dynamic_graph_execute_mode="dynamic_execute"), "needs dynamic_inputs_shape_range"),
    (dict(dynamic_input=True, dynamic_graph_execute_mode="dynamic_execute",
          dynamic_inputs_shape_range="data:[1,1,40,2~64];input:[2]"), r"no input is called input \(the inputs: data, mask"),
])
def test_each_inconsistency_names_the_option(options, message):
    context.set_context(device_target="CPU", **options)
    with pytest.raises(DynamicShapeSettingError, match=message):
        Net()(Tensor(np.ones((1, 1, 40, 20), np.float32)), Tensor(np.ones((1, 1), np.float32)))


@pytest.mark.parametrize("key,value,message", [
    ("input_shape", "data:1,x,3", r"input_shape.*'x' is not an integer"),
    ("input_shape", "data1,2", "is not name:dims"),
    ("input_shape", "data:1,-2", "below -1"),
    ("dynamic_dims", "1,2;;3,4", "empty entry"),
    ("dynamic_dims", "1,0;2,2", "size below 1"),
    ("dynamic_node_type", 2, r"accepted: 0 \(dataset inputs\) or 1"),
    ("dynamic_graph_execute_mode", "lazy_recompile", "accepted: 'dynamic_execute'"),
    ("dynamic_inputs_shape_range", "data:[1,5~3]", "needs 1 <= lo <= hi"),
    ("dynamic_inputs_shape_range", "data:1,2", "is not name:\\[dims\\]"),
    ("dynamic_inputs_shape_range", "data:[1];data:[2]", "input data is named twice"),
    ("dynamic_input", "yes", "True or False"),
])
def test_a_malformed_option_is_refused_when_set(key, value, message):
    with pytest.raises(ContextError, match=f"set_context\\({key}=...\\).*{message}"):
        context.set_context(**{key: value})


def test_options_naming_no_input_leave_a_cell_static_with_a_warning():
    from graphkernel.cell import DynamicShapeWarning
    context.set_context(device_target="CPU", dynamic_input=True, dynamic_graph_execute_mode="dynamic_execute",
                        dynamic_inputs_shape_range="images:[-1,3]")

    class Other(nn.Cell):
        def construct(self, x):
            return x * 2.0

    net = Other()
    with pytest.warns(DynamicShapeWarning, match=r"names images: no argument of Other.construct \(x\)"):
        net(Tensor(np.ones((2, 3), np.float32)))
    net(Tensor(np.ones((4, 3), np.float32)))
    assert net.trace_count == 2


def test_a_train_cell_takes_the_names_of_its_network():
    context.set_context(device_target="CPU", dynamic_input=True, dynamic_graph_execute_mode="dynamic_execute",
                        dynamic_inputs_shape_range="data:[-1,4];label:[-1]")   # WithLossCell(data, label)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(4, 3)

        def construct(self, x):
            return self.dense(x)

    net = Net()
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")),
                               nn.Momentum(net.trainable_params(), 0.1, 0.9))
    rng = np.random.default_rng(0)
    for n in (4, 7, 1):
        step(Tensor(rng.standard_normal((n, 4)).astype(np.float32)), Tensor(rng.integers(0, 3, n).astype(np.int32)))
    assert step.trace_count == 1
