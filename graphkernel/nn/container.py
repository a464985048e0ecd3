"""SequentialCell and CellList, as MindSpore's: their cells are named "0", "1", ... so Parameters are
named `layers.0.dense.weight`."""
from __future__ import annotations

from collections import OrderedDict

from graphkernel.cell import Cell


class SequentialCell(Cell):
    """Cells called in order, each on the previous one's result: a list or an OrderedDict of them."""

    def __init__(self, *args):
        super().__init__()
        cells = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple, OrderedDict, dict)) else args
        items = cells.items() if isinstance(cells, dict) else ((str(i), c) for i, c in enumerate(cells))
        for name, cell in items:
            if not isinstance(cell, Cell):
                raise TypeError(f"SequentialCell: {name} is a {type(cell).__name__}, not a Cell")
            setattr(self, name, cell)

    def __len__(self):
        return len(self._cells)

    def __getitem__(self, index):
        return list(self._cells.values())[index]

    def append(self, cell: Cell) -> "SequentialCell":
        setattr(self, str(len(self._cells)), cell)
        return self

    def construct(self, x):
        for cell in self._cells.values():
            x = cell(x)
        return x


class CellList(Cell):
    """A list of Cells (indexing, iteration, append, extend); it has no construct of its own."""

    def __init__(self, cells=()):
        super().__init__()
        self.extend(cells)

    def append(self, cell: Cell) -> "CellList":
        if not isinstance(cell, Cell):
            raise TypeError(f"CellList: a {type(cell).__name__} is not a Cell")
        setattr(self, str(len(self._cells)), cell)
        return self

    def extend(self, cells) -> "CellList":
        for cell in cells:
            self.append(cell)
        return self

    def __len__(self):
        return len(self._cells)

    def __getitem__(self, index):
        return list(self._cells.values())[index]

    def __iter__(self):
        return iter(list(self._cells.values()))
