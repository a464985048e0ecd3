"""`mint.nn`: its `functional` (graphkernel/mint/nn/functional.py)."""
from graphkernel.mint.nn import functional

__all__ = ["functional"]
