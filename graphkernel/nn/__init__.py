"""`from graphkernel.nn import Cell`."""
from graphkernel.nn.cell import Cell

__all__ = ["Cell"]
