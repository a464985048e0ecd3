"""Datasets for Model.train / Model.eval, with MindSpore's names: a dataset yields rows (tuples of numpy
arrays); `batch` stacks rows into batches; `shuffle` reorders them through a buffer.

    NumpySlicesDataset(data, column_names=None, shuffle=None, num_shards=None, shard_id=None)
        data: an array, a list/tuple of arrays (one per column) or a dict name -> array; row i is the
        tuple of every column's [i]. shuffle=None or True: a new order every epoch (MindSpore's default)
    GeneratorDataset(source, column_names=None, shuffle=None, num_shards=None, shard_id=None)
        source: a callable returning an iterator (a generator function), an iterable (an iterator
        is read once into a list), or an object with __getitem__ and __len__ (random access; only
        this kind shuffles and shards, as in MindSpore)
    dataset.batch(batch_size, drop_remainder=False) -> a dataset of stacked rows
    dataset.shuffle(buffer_size)        a buffer of buffer_size rows; each row out is drawn from it
    dataset.get_dataset_size()          rows (batches after .batch) per epoch
    dataset.create_tuple_iterator()     iterating a dataset itself gives the same tuples

Shards (data parallelism: each rank reads its own): num_shards=k, shard_id=s, given together, as
MindSpore 2.10's distributed sampler does (checked against it): the epoch's order (0..N-1, or the
shuffled order, the same on every rank for the same seed) is padded to a multiple of k by repeating
its first rows, and shard s takes every k-th row from position s: order[(s + k*i) mod N] for i below
ceil(N/k). Every shard has ceil(N/k) rows; together they cover every row, the padding repeated.
(10 rows, 3 shards: [0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1].)

as_dataset(obj) turns what Model.train accepts into a Dataset: a Dataset stays itself; any other iterable
of tuples of numpy arrays (a list of (x, y) pairs, a generator) is read once into a list, so that every
epoch sees the same batches. Orders are drawn from numpy generators seeded by `set_seed` (0 when no seed
is set), advanced every epoch.
"""
from __future__ import annotations

import math

import numpy as np

from ir.errors import GraphKernelError
from graphkernel.settings.seed import get_seed
from graphkernel.tensor import Tensor


class DatasetError(GraphKernelError, ValueError):
    """A dataset built from, or yielding, something Model cannot use."""


def _row(item, where: str) -> tuple:
    """One row as a tuple of numpy arrays."""
    if isinstance(item, dict):
        item = tuple(item.values())
    if not isinstance(item, (tuple, list)):
        item = (item,)
    row = []
    for k, a in enumerate(item):
        if isinstance(a, Tensor):
            a = a.asnumpy()
        a = np.asarray(a)
        if a.dtype.kind not in "biuf":
            raise DatasetError(f"{where}: column {k} is not numeric data (a {type(item[k]).__name__})")
        row.append(a)
    return tuple(row)


class Dataset:
    """A re-iterable source of rows: subclasses define `_rows()` (an iterator over one epoch's rows)."""

    def __iter__(self):
        for item in self._rows():
            yield _row(item, type(self).__name__)

    def _rows(self):
        raise NotImplementedError

    def create_tuple_iterator(self, num_epochs=-1, output_numpy=True):
        """The rows of one epoch, as tuples of numpy arrays (Tensors with output_numpy=False)."""
        for row in self:
            yield row if output_numpy else tuple(Tensor(a) for a in row)

    def get_dataset_size(self) -> int:
        return sum(1 for _ in self._rows())

    def batch(self, batch_size, drop_remainder=False) -> "BatchDataset":
        return BatchDataset(self, batch_size, drop_remainder)

    def shuffle(self, buffer_size) -> "ShuffleDataset":
        return ShuffleDataset(self, buffer_size)

    def reset(self) -> None:
        """MindSpore resets a dataset between epochs; iterating again starts a new epoch here."""


def _order_generator() -> np.random.Generator:
    seed = get_seed()
    return np.random.default_rng(0 if seed is None else seed)


def _check_shards(cls: str, num_shards, shard_id) -> tuple[int, int]:
    """(num_shards, shard_id), (1, 0) for none; MindSpore's rules."""
    if num_shards is None and shard_id is None:
        return 1, 0
    if num_shards is None or shard_id is None:
        raise DatasetError(f"{cls}: num_shards and shard_id must be given together (got num_shards={num_shards!r}, "
                           f"shard_id={shard_id!r})")
    for name, v in (("num_shards", num_shards), ("shard_id", shard_id)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise DatasetError(f"{cls}: {name} must be an int, got {v!r}")
    if num_shards < 1 or not 0 <= shard_id < num_shards:
        raise DatasetError(f"{cls}: shard_id {shard_id} must be in [0, num_shards={num_shards})")
    return num_shards, shard_id


class _RandomAccess(Dataset):
    def __init__(self, length: int, shuffle, num_shards=None, shard_id=None):
        if shuffle not in (None, True, False):
            raise DatasetError(f"{type(self).__name__}: shuffle must be True, False or None, got {shuffle!r}")
        self._length = length
        self._shuffle = shuffle is not False
        self._rng = _order_generator()
        self.num_shards, self.shard_id = _check_shards(type(self).__name__, num_shards, shard_id)

    def _order(self):
        order = self._rng.permutation(self._length) if self._shuffle else np.arange(self._length)
        if self.num_shards == 1 or self._length == 0:
            return order
        k, s = self.num_shards, self.shard_id
        return order[(s + k * np.arange(self._shard_rows())) % self._length]

    def _shard_rows(self) -> int:
        return -(-self._length // self.num_shards)

    def get_dataset_size(self) -> int:
        return self._shard_rows() if self._length >= 0 else self._length


class NumpySlicesDataset(_RandomAccess):
    def __init__(self, data, column_names=None, shuffle=None, num_shards=None, shard_id=None):
        if isinstance(data, dict):
            column_names = list(data) if column_names is None else column_names
            columns = list(data.values())
        elif isinstance(data, (list, tuple)):
            columns = list(data)
        else:
            columns = [data]
        columns = [np.asarray(c.asnumpy() if isinstance(c, Tensor) else c) for c in columns]
        if not columns or any(c.ndim == 0 for c in columns):
            raise DatasetError("NumpySlicesDataset: data must hold arrays of at least one dimension")
        lengths = {len(c) for c in columns}
        if len(lengths) != 1:
            raise DatasetError(f"NumpySlicesDataset: columns of different lengths {[len(c) for c in columns]}")
        self.columns = columns
        self.column_names = list(column_names) if column_names is not None else [
            f"column_{k}" for k in range(len(columns))]
        super().__init__(lengths.pop(), shuffle, num_shards, shard_id)

    def _rows(self):
        for i in self._order():
            yield tuple(c[i] for c in self.columns)


class GeneratorDataset(_RandomAccess):
    def __init__(self, source, column_names=None, shuffle=None, num_shards=None, shard_id=None):
        self.source = source
        self.column_names = list(column_names) if column_names is not None else None
        self._random_access = hasattr(source, "__getitem__") and hasattr(source, "__len__")
        if not self._random_access and not callable(source) and not hasattr(source, "__iter__"):
            raise DatasetError(f"GeneratorDataset: source must be callable, iterable or random-accessible, got "
                               f"{type(source).__name__}")
        if not self._random_access and shuffle:
            raise DatasetError("GeneratorDataset: shuffle=True needs a random-accessible source (with "
                               "__getitem__ and __len__); use .shuffle(buffer_size) instead")
        if not self._random_access and num_shards is not None:
            raise DatasetError("GeneratorDataset: num_shards needs a random-accessible source (with __getitem__ "
                               "and __len__), as in MindSpore")
        if not self._random_access and hasattr(source, "__iter__") and iter(source) is source:
            self.source = list(source)   # an iterator can be read once: keep its rows for every epoch
        super().__init__(len(source) if self._random_access else -1, shuffle if self._random_access else False,
                         num_shards, shard_id)

    def _rows(self):
        if self._random_access:
            for i in self._order():
                yield self.source[int(i)]
        elif hasattr(self.source, "__iter__"):
            yield from self.source
        else:
            yield from self.source()   # a generator function: a new iterator every epoch

    def get_dataset_size(self) -> int:
        return self._shard_rows() if self._random_access else Dataset.get_dataset_size(self)


class BatchDataset(Dataset):
    def __init__(self, child: Dataset, batch_size, drop_remainder=False):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise DatasetError(f"batch: batch_size must be a positive int, got {batch_size!r}")
        self.child, self.batch_size, self.drop_remainder = child, batch_size, bool(drop_remainder)

    def _rows(self):
        rows = []
        for row in self.child:
            rows.append(row)
            if len(rows) == self.batch_size:
                yield self._stack(rows)
                rows = []
        if rows and not self.drop_remainder:
            yield self._stack(rows)

    def _stack(self, rows):
        width = {len(r) for r in rows}
        if len(width) != 1:
            raise DatasetError(f"batch: rows with different numbers of columns {sorted(width)}")
        out = []
        for k in range(width.pop()):
            shapes = {r[k].shape for r in rows}
            if len(shapes) != 1:
                raise DatasetError(f"batch: column {k} has rows of different shapes {sorted(shapes)}")
            out.append(np.stack([r[k] for r in rows]))
        return tuple(out)

    def get_dataset_size(self) -> int:
        rows = self.child.get_dataset_size()
        return rows // self.batch_size if self.drop_remainder else math.ceil(rows / self.batch_size)


class ShuffleDataset(Dataset):
    def __init__(self, child: Dataset, buffer_size):
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 2:
            raise DatasetError(f"shuffle: buffer_size must be an int of at least 2, got {buffer_size!r}")
        self.child, self.buffer_size = child, buffer_size
        self._rng = _order_generator()

    def _rows(self):
        buffer = []
        for row in self.child:
            if len(buffer) < self.buffer_size:
                buffer.append(row)
                continue
            k = int(self._rng.integers(len(buffer)))
            yield buffer[k]
            buffer[k] = row
        while buffer:
            yield buffer.pop(int(self._rng.integers(len(buffer))))

    def get_dataset_size(self) -> int:
        return self.child.get_dataset_size()


class _ListDataset(Dataset):
    """A Python iterable of rows, read once into a list."""

    def __init__(self, rows: list):
        self.rows = rows

    def _rows(self):
        return iter(self.rows)

    def get_dataset_size(self) -> int:
        return len(self.rows)


def as_dataset(obj, where: str) -> Dataset:
    """What Model.train/eval accept as a dataset: a Dataset, or any iterable of rows."""
    if isinstance(obj, Dataset):
        return obj
    if isinstance(obj, np.ndarray) or not hasattr(obj, "__iter__"):
        raise DatasetError(f"{where}: the dataset must be a graphkernel.train dataset or an iterable of "
                           f"tuples of numpy arrays, got {type(obj).__name__}")
    return _ListDataset([_row(item, where) for item in obj])
