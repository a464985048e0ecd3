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

# Public paths kept where modules moved into folders: the old name imports the module at its new place
# (the same module object), so `import graphkernel.dump`, `from graphkernel import debug` and
# `python -m graphkernel.op_table` keep working.
MOVED = {
    "graphkernel.log": "graphkernel.settings.log",                 # MindSpore's mindspore.log
    "graphkernel.profiler": "graphkernel.observation.profiler",    # MindSpore's mindspore.profiler
    "graphkernel.dump": "graphkernel.observation.dump",            # graphkernel.dump.render
    "graphkernel.report": "graphkernel.observation.report",
    "graphkernel.debug": "graphkernel.tools.debug",                # graphkernel.debug.compare
    "graphkernel.demo": "graphkernel.tools.demo",
    "graphkernel.op_table": "graphkernel.tools.op_table",
    "graphkernel.cli": "graphkernel.tools.cli",                    # console scripts of earlier installs
    "graphkernel.dataset": "graphkernel.train.dataset",            # MindSpore's mindspore.dataset
}


class _MovedModuleFinder:
    """A meta path finder and loader for MOVED: the old name's module is replaced, while it loads, by the
    module at its new place."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        import importlib.util
        return importlib.util.spec_from_loader(fullname, _MovedModuleFinder)

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        import importlib
        import sys
        sys.modules[module.__name__] = importlib.import_module(MOVED[module.__name__])

    @staticmethod
    def get_code(fullname):
        """For `python -m <old name>`: the new module's code."""
        import importlib.util
        new = MOVED[fullname]
        return importlib.util.find_spec(new).loader.get_code(new)


def __getattr__(name: str):
    """`graphkernel.dump` after a plain `import graphkernel`."""
    if f"graphkernel.{name}" in MOVED:
        import importlib
        return importlib.import_module(MOVED[f"graphkernel.{name}"])
    raise AttributeError(f"module 'graphkernel' has no attribute {name!r}")


import sys as _sys  # noqa: E402
if not any(isinstance(f, type) and f.__name__ == "_MovedModuleFinder" for f in _sys.meta_path):
    _sys.meta_path.append(_MovedModuleFinder)

from graphkernel import context, dtype  # noqa: E402
from graphkernel.tensor import Parameter, Tensor  # noqa: E402
from graphkernel.observation.profiler import Profiler  # noqa: E402
from graphkernel.host import host_scope  # noqa: E402
from graphkernel.common.api import enable_dynamic, jit  # noqa: E402
from graphkernel.gradients import grad, value_and_grad  # noqa: E402
from graphkernel.checkpoint import (CheckpointError, load_checkpoint, load_param_into_net,  # noqa: E402
                                    save_checkpoint)
from graphkernel import mint, nn, ops  # noqa: E402
from graphkernel import train  # noqa: E402
from graphkernel.train import DynamicLossScaleManager, FixedLossScaleManager, Model  # noqa: E402
from graphkernel.settings.seed import get_seed, set_seed  # noqa: E402
from graphkernel.context import (GRAPH_MODE, PYNATIVE_MODE, get_context, set_context, set_deterministic,  # noqa: E402
                                 set_device)
from graphkernel.context import (ParallelMode, get_auto_parallel_context, reset_auto_parallel_context,  # noqa: E402
                                 set_auto_parallel_context)
from graphkernel import communication  # noqa: E402,F401  (MindSpore's mindspore.communication)
from graphkernel.settings.jit_config import JitConfig  # noqa: E402
from graphkernel.tracing.arguments import mutable  # noqa: E402
from graphkernel.dtype import (bfloat16, bool_, complex64, float16, float32, float64, int8, int16,  # noqa: E402
                               int32, int64, uint8, uint16, uint32, uint64)
from ir.errors import GraphKernelError  # noqa: E402

__version__ = "0.1.0"
__all__ = ["context", "dtype", "Tensor", "Parameter", "host_scope", "Profiler", "GraphKernelError", "grad",
           "value_and_grad", "jit", "enable_dynamic", "save_checkpoint", "load_checkpoint", "load_param_into_net",
           "CheckpointError", "mint", "nn", "ops", "train", "Model", "FixedLossScaleManager", "DynamicLossScaleManager", "set_seed", "get_seed", "set_context", "get_context",
           "set_device", "set_deterministic", "JitConfig", "mutable", "ParallelMode", "set_auto_parallel_context",
           "get_auto_parallel_context", "reset_auto_parallel_context", "communication",
           "GRAPH_MODE", "PYNATIVE_MODE", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64", "bool_", "bfloat16", "complex64",
           "__version__"]
