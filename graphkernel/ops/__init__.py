"""`from graphkernel.ops import operations as P`: MindSpore's primitive classes."""
from graphkernel.ops import operations

__all__ = ["operations"]
