"""MindSpore 2.3-2.6's `ops.extend`, the functions that moved to `mint` (2.10 has no `ops.extend`): the
op table's "mint" forms (graphkernel/ops/forms.py), with mint's parameter names. `graphkernel.mint`
holds the same functions."""
from graphkernel.ops.forms import namespace

FUNCTIONS = namespace("mint")
globals().update(FUNCTIONS)

__all__ = sorted(FUNCTIONS)
