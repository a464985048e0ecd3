"""MindSpore 2.3+'s `ops.auto_generate` path: the primitives it generates from its op definitions are
there too (`from graphkernel.ops.auto_generate import GeLUGrad`), the same classes as in
`ops.operations` and `ops.operations._grad_ops`."""
from graphkernel.ops.operations import *  # noqa: F401,F403
from graphkernel.ops.operations import __all__ as _primitives
from graphkernel.ops.operations._grad_ops import (BiasAddGrad, GeLUGrad, LayerNormGrad,  # noqa: F401
                                                  LogSoftmaxGrad, MaximumGrad, MinimumGrad, ReluGrad, SigmoidGrad,
                                                  SqrtGrad)

__all__ = [*_primitives, "BiasAddGrad", "GeLUGrad", "LayerNormGrad", "LogSoftmaxGrad", "MaximumGrad",
           "MinimumGrad", "ReluGrad", "SigmoidGrad", "SqrtGrad"]
