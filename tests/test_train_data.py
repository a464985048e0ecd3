"""Datasets (NumpySlicesDataset, GeneratorDataset, batch, shuffle, plain iterables) and metrics (Accuracy,
Loss, MAE, MSE) against their numpy definitions, and the errors they give."""
import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor
from graphkernel.train import (MAE, MSE, Accuracy, DatasetError, GeneratorDataset, Loss, Metric, MetricError,
                               NumpySlicesDataset)
from graphkernel.train.dataset import as_dataset
from graphkernel.train.metrics import get_metrics


def _columns(rows=10):
    return np.arange(rows * 3, dtype=np.float32).reshape(rows, 3), np.arange(rows, dtype=np.int32)


def test_numpy_slices_rows_and_batches():
    x, y = _columns()
    ds = NumpySlicesDataset({"x": x, "y": y}, shuffle=False)
    assert ds.column_names == ["x", "y"] and ds.get_dataset_size() == 10
    rows = list(ds)
    assert len(rows) == 10 and np.array_equal(rows[3][0], x[3]) and rows[3][1] == 3
    batched = ds.batch(4)
    batches = list(batched)
    assert batched.get_dataset_size() == 3 == len(batches)
    assert [b[0].shape for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert np.array_equal(np.concatenate([b[1] for b in batches]), y)
    dropped = ds.batch(4, drop_remainder=True)
    assert dropped.get_dataset_size() == 2 == len(list(dropped))


def test_numpy_slices_shuffles_by_default_each_epoch_anew_and_from_the_seed():
    x, y = _columns(32)
    ms.set_seed(5)
    ds = NumpySlicesDataset((x, y))
    first, second = [r[1].item() for r in ds], [r[1].item() for r in ds]
    assert sorted(first) == list(range(32)) and first != list(range(32)) and first != second
    ms.set_seed(5)
    assert [r[1].item() for r in NumpySlicesDataset((x, y))] == first


def test_shuffle_buffer_keeps_every_row_once():
    x, y = _columns(20)
    ms.set_seed(0)
    order = [r[1].item() for r in NumpySlicesDataset((x, y), shuffle=False).shuffle(4)]
    assert sorted(order) == list(range(20)) and order != list(range(20))
    # a buffer of 4 moves a row at most 3 places earlier than its position
    assert all(pos >= row - 3 for pos, row in enumerate(order))
    with pytest.raises(DatasetError, match="buffer_size must be an int of at least 2"):
        NumpySlicesDataset((x, y)).shuffle(1)


def test_generator_dataset_sources():
    x, y = _columns(6)

    def gen():
        for i in range(6):
            yield x[i], y[i]

    class Source:
        def __getitem__(self, i):
            return x[i], y[i]

        def __len__(self):
            return 6

    from_function = GeneratorDataset(gen, ["x", "y"])
    assert from_function.get_dataset_size() == 6
    assert len(list(from_function)) == len(list(from_function)) == 6      # a new iterator every epoch
    once = GeneratorDataset(gen(), ["x", "y"])                              # an iterator: read once, kept
    assert len(list(once)) == len(list(once)) == 6
    ms.set_seed(0)
    random_access = GeneratorDataset(Source(), ["x", "y"])
    assert sorted(r[1].item() for r in random_access) == list(range(6))
    assert [r[1].tolist() for r in GeneratorDataset(Source(), shuffle=False).batch(3)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(DatasetError, match="shuffle=True needs a random-accessible source"):
        GeneratorDataset(gen, shuffle=True)
    with pytest.raises(DatasetError, match="source must be callable, iterable or random-accessible"):
        GeneratorDataset(3)


def test_plain_iterables_and_bad_data():
    x, y = _columns(4)
    ds = as_dataset(((x[i], y[i]) for i in range(4)), "Model.train")
    assert ds.get_dataset_size() == 4 and len(list(ds)) == len(list(ds)) == 4
    assert list(as_dataset([x], "here"))[0][0].shape == (4, 3)              # one array: one column
    assert list(as_dataset([(Tensor(x), y)], "here"))[0][0].dtype == np.float32
    with pytest.raises(DatasetError, match="Model.train: the dataset must be .* got int"):
        as_dataset(3, "Model.train")
    with pytest.raises(DatasetError, match="column 1 is not numeric data"):
        as_dataset([(x, "label")], "Model.train")
    with pytest.raises(DatasetError, match="columns of different lengths"):
        NumpySlicesDataset((x, y[:3]))
    with pytest.raises(DatasetError, match="column 0 has rows of different shapes"):
        list(as_dataset([(x[0],), (x[:2],)], "here").batch(2))
    with pytest.raises(DatasetError, match="batch_size must be a positive int"):
        NumpySlicesDataset(x).batch(0)


def test_accuracy_with_labels_and_one_hot():
    logits = np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.2, 0.2, 0.6], [0.3, 0.4, 0.3]], np.float32)
    labels = np.array([1, 0, 0, 2])
    acc = Accuracy()
    acc.update(Tensor(logits), labels)
    assert acc.eval() == 0.5
    acc.update(logits[:2], np.eye(3)[[1, 1]])          # one-hot: the first right, the second wrong
    assert acc.eval() == 3 / 6
    multi = Accuracy("multilabel")
    multi.update(np.array([[1, 0], [1, 1]]), np.array([[1, 0], [0, 1]]))
    assert multi.eval() == 0.5
    acc.clear()
    with pytest.raises(MetricError, match="Accuracy cannot be evaluated: no samples"):
        acc.eval()
    with pytest.raises(MetricError, match="labels of shape \\[3\\] do not match logits of shape \\[4, 3\\]"):
        acc.update(logits, labels[:3])
    with pytest.raises(MetricError, match="takes 2 input"):
        acc.update(logits)


def test_loss_mae_mse_formulas():
    rng = np.random.default_rng(0)
    pred, target = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 3))
    mae, mse, loss = MAE(), MSE(), Loss()
    for p, t in zip(pred, target):
        mae.update(p, t)
        mse.update(Tensor(p.astype(np.float32)), t.astype(np.float32))
        loss.update(np.mean((p - t) ** 2))
    assert mae.eval() == pytest.approx(np.abs(pred - target).sum() / 10)
    assert mse.eval() == pytest.approx(((pred - target) ** 2).sum() / 10, rel=1e-6)
    assert loss.eval() == pytest.approx(np.mean([np.mean((p - t) ** 2) for p, t in zip(pred, target)]))
    with pytest.raises(MetricError, match="Loss.update: the loss must be a scalar or 1-D"):
        loss.update(np.zeros((2, 2)))
    with pytest.raises(MetricError, match="MAE.update: targets of shape \\[4\\] do not match"):
        mae.update(np.zeros(3), np.zeros(4))


def test_metric_names_and_a_custom_metric():
    class Count(Metric):
        def clear(self):
            self.n = 0

        def update(self, *inputs):
            self.n += 1

        def eval(self):
            return self.n

    metrics = get_metrics({"acc", "mse"})
    assert isinstance(metrics["acc"], Accuracy) and isinstance(metrics["mse"], MSE)
    assert isinstance(get_metrics({"count": Count()})["count"], Count)
    with pytest.raises(MetricError, match="unknown metric 'f1'; accepted names: acc, accuracy, loss, mae, mse"):
        get_metrics({"f1"})
    with pytest.raises(MetricError, match="metrics\\['x'\\] must be a Metric"):
        get_metrics({"x": 3})


def test_create_tuple_iterator_gives_arrays_or_tensors():
    x, y = _columns(3)
    ds = NumpySlicesDataset((x, y), shuffle=False)
    arrays = list(ds.create_tuple_iterator(output_numpy=True))
    tensors = list(ds.create_tuple_iterator(output_numpy=False))
    assert isinstance(arrays[0][0], np.ndarray) and isinstance(tensors[0][0], Tensor)
    assert np.array_equal(tensors[2][0].asnumpy(), x[2])
