"""Records MindSpore 2.10's results for the convolution and pooling cases tests/test_conv_ops.py checks the
op table's references against (tests/data/mindspore_conv.npz), so the tests need no MindSpore.

    /path/to/mindspore-venv/bin/python bench/mindspore_conv_cases.py tests/data/mindspore_conv.npz

Each case (CASES below: id, op, attributes, input shapes) is run in PYNATIVE_MODE on MindSpore's CPU on
inputs drawn from a seed of its own; the file holds the inputs, the result and the op with its attributes (JSON) under `<id>/in<k>`,
`<id>/out` and `<id>/spec`.
"""
import json
import sys

import numpy as np

CASES = [
    # id, op, attrs, input shapes
    ("conv_valid", "Conv2D", dict(out_channel=4, kernel_size=3), [(2, 3, 7, 6), (4, 3, 3, 3)]),
    ("conv_same_even", "Conv2D", dict(out_channel=2, kernel_size=(2, 4), pad_mode="same", stride=2),
     [(1, 3, 7, 9), (2, 3, 2, 4)]),
    ("conv_pad_dilated", "Conv2D", dict(out_channel=3, kernel_size=3, pad_mode="pad", pad=(1, 0, 2, 1),
                                        dilation=2, stride=(1, 2)), [(2, 2, 8, 9), (3, 2, 3, 3)]),
    ("conv_groups", "Conv2D", dict(out_channel=6, kernel_size=3, pad_mode="same", group=2), [(1, 4, 5, 5), (6, 2, 3, 3)]),
    ("conv_depthwise", "Conv2D", dict(out_channel=3, kernel_size=3, pad_mode="same", group=3, stride=2),
     [(2, 3, 6, 7), (3, 1, 3, 3)]),
    ("conv_stride_gt_kernel", "Conv2D", dict(out_channel=2, kernel_size=2, stride=3), [(1, 2, 8, 7), (2, 2, 2, 2)]),
    ("dx_same", "Conv2DBackpropInput", dict(out_channel=4, kernel_size=3, pad_mode="same", stride=2,
                                            input_size=(2, 3, 7, 6)), [(2, 4, 4, 3), (4, 3, 3, 3)]),
    ("dx_pad_groups", "Conv2DBackpropInput", dict(out_channel=4, kernel_size=2, pad_mode="pad", pad=1, group=2,
                                                  dilation=2, input_size=(1, 4, 5, 6)), [(1, 4, 5, 6), (4, 2, 2, 2)]),
    ("dw_same", "Conv2DBackpropFilter", dict(out_channel=4, kernel_size=3, pad_mode="same", stride=2,
                                             filter_size=(4, 3, 3, 3)), [(2, 4, 4, 3), (2, 3, 7, 6)]),
    ("dw_valid_groups", "Conv2DBackpropFilter", dict(out_channel=4, kernel_size=(2, 3), group=2, stride=(2, 1),
                                                     filter_size=(4, 1, 2, 3)), [(1, 4, 3, 4), (1, 2, 6, 6)]),
    ("maxpool_same", "MaxPool", dict(kernel_size=3, strides=2, pad_mode="same"), [(2, 3, 7, 8)]),
    ("maxpool_valid", "MaxPool", dict(kernel_size=2, strides=3, pad_mode="valid"), [(1, 2, 8, 7)]),
    ("avgpool_same", "AvgPool", dict(kernel_size=3, strides=2, pad_mode="same"), [(2, 3, 7, 8)]),
    ("avgpool_valid", "AvgPool", dict(kernel_size=(2, 3), strides=(1, 2), pad_mode="valid"), [(1, 2, 5, 7)]),
    ("maxpool_grad", "MaxPoolGrad", dict(kernel_size=3, strides=2, pad_mode="same"), [(2, 3, 7, 8)]),
    ("avgpool_grad", "AvgPoolGrad", dict(kernel_size=3, strides=2, pad_mode="same"), [(2, 3, 7, 8)]),
    ("adaptive", "AdaptiveAvgPool2D", dict(output_size=(3, 2)), [(2, 3, 7, 5)]),
]


def run(case):
    from mindspore import Tensor
    from mindspore.ops import operations as P
    from mindspore.ops.operations import _grad_ops as G
    cid, op, attrs, shapes = case
    rng = np.random.default_rng(sum(map(ord, cid)))
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    attrs = dict(attrs)
    if op == "Conv2DBackpropInput":
        size = attrs.pop("input_size")
        out = P.Conv2DBackpropInput(**attrs)(Tensor(arrays[0]), Tensor(arrays[1]), size)
    elif op == "Conv2DBackpropFilter":
        size = attrs.pop("filter_size")
        out = G.Conv2DBackpropFilter(**attrs)(Tensor(arrays[0]), Tensor(arrays[1]), size)
    elif op in ("MaxPoolGrad", "AvgPoolGrad"):
        pool = getattr(P, op[:-4])(**attrs)
        x = Tensor(arrays[0])
        y = pool(x)
        dout = rng.standard_normal(y.shape).astype(np.float32)
        arrays += [y.asnumpy(), dout]
        out = getattr(G, op)(**attrs)(x, y, Tensor(dout))
    else:
        out = getattr(P, op)(**attrs)(*[Tensor(a) for a in arrays])
    return arrays, out.asnumpy()


def main(path):
    import mindspore as ms
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    data = {}
    for case in CASES:
        arrays, out = run(case)
        for k, a in enumerate(arrays):
            data[f"{case[0]}/in{k}"] = a
        data[f"{case[0]}/out"] = out
        data[f"{case[0]}/spec"] = np.array(json.dumps({"op": case[1], "attrs": case[2]}))
    np.savez_compressed(path, **data)
    print(f"{len(CASES)} cases written to {path} (mindspore {ms.__version__})")


if __name__ == "__main__":
    main(sys.argv[1])
