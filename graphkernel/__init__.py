"""graphkernel: MindSpore-style graph-kernel fusion for an emulated Ascend AI Core, on the CPU.

    from graphkernel import context, Tensor          # MindSpore r0.7's spelling
    from graphkernel.nn import Cell
    from graphkernel.ops import operations as P

    import graphkernel as ms                          # 2.x's
    from graphkernel import nn, ops
    ms.set_context(mode=ms.GRAPH_MODE, enable_graph_kernel=True)
    ms.set_context(jit_config={"jit_level": "O1"})      # 2.3+'s switch of the same fusion
"""
import os as _os


def _check_own_packages() -> None:
    """`ir` and `kernels` are common top-level names on PyPI: make sure we imported ours."""
    here = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    import importlib
    for name in ("ir", "kernels"):
        try:
            mod = importlib.import_module(name)
        except ImportError as e:
            raise ImportError(f"graphkernel cannot import its own {name!r} package ({e}); reinstall "
                              "graphkernel") from None
        dirs = [_os.path.abspath(d) for d in getattr(mod, "__path__", [])]
        if not any(_os.path.dirname(d) == here for d in dirs):
            where = dirs[0] if dirs else getattr(mod, "__file__", "?")
            raise ImportError(f"graphkernel found a different {name!r} package at {where}; another "
                              f"distribution installs a top-level {name!r} module. Uninstall it or use a "
                              "separate virtual environment.")


_check_own_packages()

from graphkernel import context, dtype  # noqa: E402
from graphkernel.tensor import Parameter, Tensor  # noqa: E402
from graphkernel.profiler import Profiler  # noqa: E402
from graphkernel.host import host_scope  # noqa: E402
from graphkernel.gradients import grad, jit, value_and_grad  # noqa: E402
from graphkernel.checkpoint import (CheckpointError, load_checkpoint, load_param_into_net,  # noqa: E402
                                    save_checkpoint)
from graphkernel import nn, ops  # noqa: E402
from graphkernel import train  # noqa: E402
from graphkernel.train import Model  # noqa: E402
from graphkernel.seed import get_seed, set_seed  # noqa: E402
from graphkernel.context import GRAPH_MODE, PYNATIVE_MODE, get_context, set_context, set_device  # noqa: E402
from graphkernel.jit_config import JitConfig  # noqa: E402
from graphkernel.arguments import mutable  # noqa: E402
from graphkernel.dtype import (bfloat16, bool_, complex64, float16, float32, float64, int8, int16,  # noqa: E402
                               int32, int64, uint8)
from ir.errors import GraphKernelError  # noqa: E402

__version__ = "0.1.0"
__all__ = ["context", "dtype", "Tensor", "Parameter", "host_scope", "Profiler", "GraphKernelError", "grad",
           "value_and_grad", "jit", "save_checkpoint", "load_checkpoint", "load_param_into_net",
           "CheckpointError", "nn", "ops", "train", "Model", "set_seed", "get_seed", "set_context", "get_context",
           "set_device", "JitConfig", "mutable",
           "GRAPH_MODE", "PYNATIVE_MODE", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "bool_", "bfloat16", "complex64",
           "__version__"]
