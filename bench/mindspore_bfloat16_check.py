"""MindSpore's bfloat16 arithmetic on the CPU, beside graphkernel's: the bits each gives for the ops
MindSpore 2.10 has bfloat16 CPU kernels for (Add, Mul, RealDiv, Neg, a Python scalar added, a bfloat16
tensor with a float32 one), and which ops it refuses in bfloat16.

    python bench/mindspore_bfloat16_check.py mindspore      # run under MindSpore's interpreter
    python bench/mindspore_bfloat16_check.py graphkernel    # the same with graphkernel

Each prints one JSON object: {op: {"dtype": ..., "bits": [uint16 bits or float32 values]} or
{"refused": message}}. tests/test_kernels_bfloat16.py holds MindSpore 2.10's results. MindSpore is never
a dependency: install it in a virtual environment of its own (`pip install mindspore==2.10.0`).
"""
import json
import sys

import numpy as np

# ties and near-ties of bfloat16 rounding, signs, a subnormal product, a large quotient
X = [1.0078125, -3.140625, 0.0999755859375, 300.0, -0.0, 1.00390625, 2.0e-38, 255.0]
Y = [0.0078125, 2.0, 3.0, 1.5, 0.5, 1.0, 0.5, 0.00390625]


def main(backend: str) -> dict:
    if backend == "mindspore":
        import mindspore as ms
        from mindspore import Tensor, ops
        ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    else:
        import graphkernel as ms
        from graphkernel import Tensor, ops
        ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    x = Tensor(np.array(X, np.float32), ms.bfloat16)
    y = Tensor(np.array(Y, np.float32), ms.bfloat16)
    cases = {
        "Add": lambda: ops.add(x, y), "Mul": lambda: ops.mul(x, y), "RealDiv": lambda: ops.div(x, y),
        "Neg": lambda: ops.neg(x), "AddScalar": lambda: x + 1.5,
        "AddFloat32": lambda: ops.add(x, Tensor(np.array(Y, np.float32))),
        "Exp": lambda: ops.exp(x), "ReduceSum": lambda: ops.ReduceSum()(x, 0),
        "MatMul": lambda: ops.matmul(x.reshape(2, 4), y.reshape(4, 2)),
    }
    out = {}
    for name, fn in cases.items():
        try:
            r = fn()
            dtype = str(r.dtype)
            arr = r.asnumpy()
            if dtype.lower() == "bfloat16":   # its bits
                bits = arr.view(np.uint16).reshape(-1).tolist()
            else:
                bits = arr.astype(np.float32).reshape(-1).tolist()
            out[name] = {"dtype": dtype, "bits": bits}
        except Exception as e:  # noqa: BLE001 - MindSpore refuses the dtype with a TypeError or RuntimeError
            out[name] = {"refused": str(e).strip().splitlines()[0][:120]}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "graphkernel"), indent=1))
