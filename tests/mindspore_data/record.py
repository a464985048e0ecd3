"""Record MindSpore 2.10's side of tests/test_mindspore_forms.py into forms.json: the parameter names of
every function graphkernel generates into ops., mint. and mint.nn.functional (`None` where MindSpore's
signature is opaque, `(*args, **kwargs)`), which Tensor methods MindSpore has, and the results of the
sample calls of form_calls.py on its CPU. Run it in MindSpore's environment, with graphkernel's names given:

    python -c "import json; from graphkernel.ops.forms import generated_names as g; print(json.dumps(g()))" > names.json
    MINDSPORE_PYTHON tests/mindspore_data/record.py names.json > tests/mindspore_data/forms.json
"""
import inspect
import json
import os
import sys

import numpy as np

import mindspore as ms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from form_calls import CALLS  # noqa: E402


def resolve(path: str):
    obj = ms
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def params(fn):
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        return None
    return None if names == ["args", "kwargs"] else names


def encode(x):
    if isinstance(x, (tuple, list)):
        return [encode(i) for i in x]
    a = x.asnumpy() if isinstance(x, ms.Tensor) else np.asarray(x)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "values": a.astype(np.float64).ravel().tolist()}


def main(names_file: str) -> None:
    ms.set_device("CPU")
    names = json.load(open(names_file))
    out = {"functions": {}, "methods": {}, "calls": {}}
    for path in names["functions"]:
        fn = resolve(path)
        out["functions"][path] = "missing" if fn is None else params(fn)
    for name in names["methods"]:
        out["methods"][name] = hasattr(ms.Tensor, name)
    for key, call in CALLS.items():
        for _ in range(3):   # a failed call can leave its error to the next calls: each gets a second try
            try:
                out["calls"][key] = encode(call(ms, ms.Tensor))
                break
            except Exception as e:   # no CPU kernel in MindSpore 2.10: the test compares another way
                out["calls"][key] = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"}
    json.dump(out, sys.stdout, indent=0, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
