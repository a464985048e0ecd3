"""MindSpore 2.x's `mint` (`from graphkernel import mint`; `mint.sum(x, dim=1, keepdim=True)`): the op
table's "mint" forms with mint's parameter names (graphkernel/ops/forms.py; the same functions as
`ops.extend`), and `mint.nn.functional`."""
from graphkernel.ops.extend import *  # noqa: F401,F403
from graphkernel.ops.extend import __all__ as _functions
from graphkernel.mint import nn

__all__ = [*_functions, "nn"]
