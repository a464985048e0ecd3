"""MindSpore 2.x's `mint.nn.functional`: the op table's "mint.nn.functional" forms (graphkernel/ops/forms.py)
and `gelu` (erf's GELU by default, as `ops.gelu`)."""
from graphkernel.ops.forms import namespace
from graphkernel.ops.functional import gelu

FUNCTIONS = {**namespace("mint.nn.functional"), "gelu": gelu}
globals().update(FUNCTIONS)

__all__ = sorted(FUNCTIONS)
