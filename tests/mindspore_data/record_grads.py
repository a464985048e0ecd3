"""Record MindSpore 2.10's dtype rules of its gradient primitives into grads.json: for every case and dtype
combination of grad_calls.py, called in PYNATIVE_MODE on its CPU, the result dtypes and values, or the
error (its first line). Run it in MindSpore's environment:

    MINDSPORE_PYTHON tests/mindspore_data/record_grads.py > tests/mindspore_data/grads.json
"""
import json
import os
import sys

import numpy as np

import mindspore as ms
from mindspore.ops.operations import _grad_ops as G

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grad_calls import CASES, combos, inputs  # noqa: E402


def encode(x):
    if isinstance(x, (tuple, list)):
        return [encode(i) for i in x]
    a = x.asnumpy()
    return {"dtype": str(a.dtype), "shape": list(a.shape), "values": a.astype(np.float64).ravel().tolist()}


def main() -> None:
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    out = {}
    for name, (kwargs, specs) in CASES.items():
        for label, dtypes in combos(len(specs)):
            args = [ms.Tensor(a) for a in inputs(name, dtypes)]
            for _ in range(3):   # a failed call can leave its error to the next calls
                try:
                    result = getattr(G, name)(**kwargs)(*args)
                    out[f"{name}/{label}"] = encode(result)
                    break
                except Exception as e:
                    text = [line for line in str(e).strip().splitlines() if line.strip() and not line.startswith("---")]
                    out[f"{name}/{label}"] = {"error": f"{type(e).__name__}: {text[0][:300] if text else ''}"}
    json.dump(out, sys.stdout, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()
