"""Model: MindSpore's high-level training API over our train cells.

    model = Model(network, loss_fn=None, optimizer=None, metrics=None, eval_network=None,
                  eval_indexes=None, amp_level="O0", loss_scale_manager=None)
    model.train(epoch, train_dataset, callbacks=None, dataset_sink_mode=False, sink_size=-1,
                initial_epoch=0)
    model.eval(valid_dataset, callbacks=None) -> {metric name: value}
    model.predict(*inputs) -> the network's output (Tensors or numpy arrays in)

The train network is built as MindSpore's amp.build_train_network does: WithLossCell(network, loss_fn)
(no loss_fn: the network computes its loss), then a TrainOneStepWithLossScaleCell when the loss scale
manager has an update cell (FixedLossScaleManager with drop_overflow_update, DynamicLossScaleManager),
else a TrainOneStepCell seeded with the manager's scale. amp_level maps onto our precision modes for
every compile and call the Model makes (the context's precision_mode is restored after):

    O0  the context's precision_mode, unchanged
    O1  allow_mix_precision (white-list ops in float16)
    O2  allow_mix_precision, and a DynamicLossScaleManager unless one is given
    O3  force_fp16
Parameters and the optimizer's state stay float32 under every level.

Interrupted training. Each compiled step is all or nothing (graphkernel/compiler.py); when train() stops
on an exception (a Ctrl-C, a callback's), cb_params.cur_step_num is set to the steps the Parameters hold
(graphkernel/settings/interrupts.committed_steps) before the callbacks' __exit__ run, and the dynamic
loss scale manager takes the device's scale.

Loop sinking (dataset_sink_mode=True). Each epoch of train() is one sink of sink_size steps (-1: the
dataset's size), MindSpore's rule: the batches of the sink are taken from the dataset in order (a sink
may run on into the dataset's next pass), stacked into one array per column (staged once), and ONE
call of the compiled step (CompiledGraph.run_steps) runs them all, returning the N losses together;
no step goes through the Cell call path. Callbacks see one step per sink: cur_step_num advances by
sink_size, net_outputs are the last step's outputs and cb_params.sink_outputs all of them stacked.
The context key iterations_per_loop (the session option's name) is the steps per launch too: with
sink_size=-1 it sets it, and a sink_size that differs from it is refused. Sinking needs GRAPH_MODE, batches
of one shape (batch(..., drop_remainder=True)) and mix_compile_mode off (its host ops need the host
every step).
"""
from __future__ import annotations

import contextlib
import inspect

import numpy as np

from ir.errors import GraphKernelError
from graphkernel import context
from graphkernel.cell import Cell
from graphkernel.communication.management import GlobalComm, get_group_size
from graphkernel.nn.loss import WithLossCell
from graphkernel.nn.optim import Optimizer
from graphkernel.nn.wrap import TrainOneStepCell, TrainOneStepWithLossScaleCell
from graphkernel.settings.interrupts import committed_steps
from graphkernel.tensor import Tensor
from graphkernel.train.callback.base import CallbackList, CallbackParam, RunContext
from graphkernel.train.dataset import DatasetError, as_dataset
from graphkernel.train.loss_scale import DynamicLossScaleManager, LossScaleManager
from graphkernel.train.metrics import Loss, get_metrics

AMP_LEVELS = {"O0": None, "O1": "allow_mix_precision", "O2": "allow_mix_precision", "O3": "force_fp16"}


class ModelError(GraphKernelError, ValueError):
    """Model built or called with arguments it cannot use."""


class WithEvalCell(Cell):
    """MindSpore's WithEvalCell: construct(data, label) = (loss, outputs, label)."""

    def __init__(self, network, loss_fn):
        super().__init__(auto_prefix=False)
        self._network = network
        self._loss_fn = loss_fn

    def construct(self, data, label):
        outputs = self._network(data)
        return self._loss_fn(outputs, label), outputs, label


def _positional(cell) -> list | None:
    """A Cell's set_inputs as a list in construct's order (set_inputs(x=...) included), or None."""
    entries = cell.get_inputs() if isinstance(cell, Cell) else None
    if entries is None:
        return None
    if isinstance(entries, dict):
        names = [n for n in inspect.signature(cell.construct).parameters]
        return [entries.get(n) for n in names[: max(names.index(k) for k in entries) + 1]]
    return list(entries)


def _tensors(batch) -> tuple:
    return tuple(a if isinstance(a, Tensor) else Tensor(np.asarray(a)) for a in batch)


class Model:
    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None,
                 eval_indexes=None, amp_level="O0", loss_scale_manager=None):
        if not isinstance(network, Cell):
            raise ModelError(f"Model: network must be a Cell, got {type(network).__name__}")
        if loss_fn is not None and not isinstance(loss_fn, Cell):
            raise ModelError(f"Model: loss_fn must be a Cell, got {type(loss_fn).__name__}")
        if optimizer is not None and not isinstance(optimizer, Optimizer):
            raise ModelError(f"Model: optimizer must be an Optimizer, got {type(optimizer).__name__}")
        if amp_level not in AMP_LEVELS:
            raise ModelError(f"Model: amp_level {amp_level!r} is not supported; accepted: {', '.join(AMP_LEVELS)}")
        if loss_scale_manager is not None and not isinstance(loss_scale_manager, LossScaleManager):
            raise ModelError(f"Model: loss_scale_manager must be a LossScaleManager, got "
                             f"{type(loss_scale_manager).__name__}")
        if loss_scale_manager is not None and optimizer is None:
            raise ModelError("Model: loss_scale_manager needs an optimizer")
        if amp_level == "O2" and loss_scale_manager is None and optimizer is not None:
            loss_scale_manager = DynamicLossScaleManager()
        self._network = network
        self._loss_fn = loss_fn
        self._optimizer = optimizer
        self._amp_level = amp_level
        self._loss_scale_manager = loss_scale_manager
        self._train_network = self._build_train_network()
        self._metric_fns = get_metrics(metrics)
        self._eval_network, self._eval_indexes = self._build_eval_network(eval_network, eval_indexes)

    # -- building -----------------------------------------------------------------------------
    def _build_train_network(self):
        net = WithLossCell(self._network, self._loss_fn) if self._loss_fn is not None else self._network
        if self._optimizer is None:
            return net
        manager = self._loss_scale_manager
        update_cell = manager.get_update_cell() if manager is not None else None
        if update_cell is not None:
            train = TrainOneStepWithLossScaleCell(net, self._optimizer, scale_sense=update_cell).set_train()
        else:
            sens = manager.get_loss_scale() if manager is not None else None
            train = TrainOneStepCell(net, self._optimizer, sens).set_train()
        declared = self._declared_inputs()
        if declared is not None:
            train.set_inputs(*declared)
        return train

    def _declared_inputs(self):
        """MindSpore's Model: the network's set_inputs, then the loss function's without its first (the
        network's output), declare the train network's inputs (None: the network declared none)."""
        net_inputs = _positional(self._network)
        if net_inputs is None:
            return None
        loss_inputs = _positional(self._loss_fn) if isinstance(self._loss_fn, Cell) else None
        return net_inputs + (loss_inputs[1:] if loss_inputs else [])

    def _build_eval_network(self, eval_network, eval_indexes):
        if not self._metric_fns:
            return eval_network, eval_indexes
        if eval_network is not None:
            if eval_indexes is not None and (not isinstance(eval_indexes, list) or len(eval_indexes) != 3):
                raise ModelError(f"Model: eval_indexes must be a list of three indexes or None, got {eval_indexes!r}")
            return eval_network, eval_indexes
        if self._loss_fn is None:
            raise ModelError("Model: metrics need an eval_network, or a loss_fn to build one (WithEvalCell "
                             "returning (loss, outputs, label))")
        return WithEvalCell(self._network, self._loss_fn), [0, 1, 2]

    @property
    def train_network(self):
        return self._train_network

    @property
    def eval_network(self):
        return self._eval_network

    @property
    def predict_network(self):
        return self._network

    @contextlib.contextmanager
    def _precision(self):
        """The amp_level's precision mode for the calls inside; the context's own afterwards."""
        mode = AMP_LEVELS[self._amp_level]
        if mode is None:
            yield
            return
        keys = ("precision_mode", "precision_mode_v2")
        saved = {k: context.get_context(k) for k in keys}
        context.set_context(precision_mode=mode, precision_mode_v2=None)
        try:
            yield
        finally:
            context.set_context(**saved)

    # -- train ----------------------------------------------------------------------------------
    def train(self, epoch, train_dataset, callbacks=None, dataset_sink_mode=False, sink_size=-1, initial_epoch=0):
        for name, value, low in (("epoch", epoch, 1), ("initial_epoch", initial_epoch, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ModelError(f"Model.train: {name} must be an int >= {low}, got {value!r}")
        if initial_epoch >= epoch:
            raise ModelError(f"Model.train: epoch ({epoch}) must be larger than initial_epoch ({initial_epoch})")
        if isinstance(sink_size, bool) or not isinstance(sink_size, int) or sink_size == 0 or sink_size < -1:
            raise ModelError(f"Model.train: sink_size must be -1 or a positive int, got {sink_size!r}")
        if self._optimizer is None:
            raise ModelError("Model.train needs an optimizer: Model(network, loss_fn, optimizer)")
        dataset = as_dataset(train_dataset, "Model.train")
        dataset_size = dataset.get_dataset_size()
        if dataset_size == 0:
            raise ModelError("Model.train: the dataset is empty")
        sink_size = self._steps_per_launch(bool(dataset_sink_mode), sink_size, dataset_size)
        callbacks = CallbackList(callbacks)
        batch_num = sink_size if dataset_sink_mode else dataset_size
        cb = CallbackParam(
            train_network=self._train_network, epoch_num=epoch - initial_epoch, batch_num=batch_num,
            mode="train", loss_fn=self._loss_fn, optimizer=self._optimizer,
            parallel_mode=context.get_auto_parallel_context("parallel_mode"),
            device_number=get_group_size() if GlobalComm.INITED else 1, train_dataset=train_dataset, list_callback=callbacks.callbacks,
            train_dataset_element=None, network=self._network, last_save_ckpt_step=None, latest_ckpt_file=None,
            loss_scale_mananger=self._loss_scale_manager, initial_step=initial_epoch * batch_num,
            cur_step_num=initial_epoch * batch_num, cur_epoch_num=initial_epoch,
            dataset_sink_mode=bool(dataset_sink_mode))
        if dataset_sink_mode:
            cb.sink_size = sink_size
        with contextlib.ExitStack() as stack:
            for c in callbacks.callbacks:
                stack.enter_context(c)
            with self._precision():
                base, committed = cb.cur_step_num, committed_steps()
                try:
                    if dataset_sink_mode:
                        self._train_sunk(epoch, initial_epoch, dataset, sink_size, callbacks, cb)
                    else:
                        self._train_steps(epoch, initial_epoch, dataset, callbacks, cb)
                except BaseException:
                    # interrupted (Ctrl-C, a callback's or a step's exception): the counter says how many
                    # steps the Parameters hold, the one cut short counted only if it was done
                    if context.get_context("mode") == context.GRAPH_MODE:
                        cb.cur_step_num = base + committed_steps() - committed
                    self._sync_loss_scale()
                    raise

    def _steps_per_launch(self, sink: bool, sink_size: int, dataset_size: int) -> int:
        per_loop = context.get_context("iterations_per_loop")
        if not sink:
            if per_loop != 1:
                raise ModelError(f"Model.train: iterations_per_loop={per_loop} is set but dataset_sink_mode=False; "
                                 "pass dataset_sink_mode=True to run that many steps per launch, or set "
                                 "iterations_per_loop back to 1")
            return sink_size
        if per_loop != 1:
            if sink_size not in (-1, per_loop):
                raise ModelError(f"Model.train: sink_size={sink_size} differs from the context's "
                                 f"iterations_per_loop={per_loop}; they name the same thing (steps per launch)")
            sink_size = per_loop
        steps = dataset_size if sink_size == -1 else sink_size
        if context.get_context("mode") != context.GRAPH_MODE:
            raise ModelError("Model.train: dataset_sink_mode=True needs GRAPH_MODE (a sink runs one compiled "
                             "graph over many steps); in PYNATIVE_MODE use dataset_sink_mode=False")
        if steps != 1 and context.get_context("mix_compile_mode"):
            raise ModelError(f"Model.train: loop sinking ({steps} steps per launch) with mix_compile_mode=True: "
                             "in mixed compute mode training loop sinking cannot be on, iterations_per_loop "
                             "must stay 1; use dataset_sink_mode=False or sink_size=1")
        return steps

    def _check_batch(self, batch):
        if self._loss_fn is not None and len(batch) != 2:
            raise DatasetError(f"Model.train: with a loss_fn each batch must be (data, label), got {len(batch)} "
                               "columns")

    def _step_done(self, cb, outputs) -> None:
        cb.net_outputs = outputs
        self._sync_loss_scale()

    def _sync_loss_scale(self) -> None:
        manager = self._loss_scale_manager
        if isinstance(manager, DynamicLossScaleManager):   # the scale of the next step, as the device has it
            manager.loss_scale = float(self._train_network.scale_sense.asnumpy().reshape(-1)[0])

    def _train_steps(self, epoch, initial_epoch, dataset, callbacks, cb):
        run_context = RunContext(cb)
        callbacks.on_train_begin(run_context)
        for e in range(initial_epoch, epoch):
            cb.cur_epoch_num = e + 1
            callbacks.on_train_epoch_begin(run_context)
            for batch in dataset:
                self._check_batch(batch)
                cb.cur_step_num += 1
                cb.train_dataset_element = inputs = _tensors(batch)
                callbacks.on_train_step_begin(run_context)
                self._step_done(cb, self._train_network(*inputs))
                callbacks.on_train_step_end(run_context)
                if run_context.get_stop_requested():
                    break
            callbacks.on_train_epoch_end(run_context)
            if run_context.get_stop_requested():
                break
        callbacks.on_train_end(run_context)

    def _train_sunk(self, epoch, initial_epoch, dataset, sink_size, callbacks, cb):
        run_context = RunContext(cb)
        callbacks.on_train_begin(run_context)
        stream = _endless(dataset)
        for e in range(initial_epoch, epoch):
            cb.cur_epoch_num = e + 1
            callbacks.on_train_epoch_begin(run_context)
            batches = [next(stream) for _ in range(sink_size)]
            self._check_batch(batches[0])
            staged = _stage(batches)
            cb.cur_step_num += sink_size
            cb.train_dataset_element = last = _tensors(batches[-1])
            callbacks.on_train_step_begin(run_context)
            compiled = self._train_network.compile(*last)
            results = compiled.run_steps(staged)
            cb.sink_outputs = compiled.structure([Tensor._wrap(r) for r in results])
            self._step_done(cb, compiled.structure([Tensor._wrap(r[-1].copy()) for r in results]))
            callbacks.on_train_step_end(run_context)
            callbacks.on_train_epoch_end(run_context)
            if run_context.get_stop_requested():
                break
        callbacks.on_train_end(run_context)

    # -- eval / predict -----------------------------------------------------------------------
    def eval(self, valid_dataset, callbacks=None, dataset_sink_mode=False):
        if not self._metric_fns:
            raise ModelError("Model.eval needs metrics: Model(..., metrics={'accuracy'})")
        dataset = as_dataset(valid_dataset, "Model.eval")
        callbacks = CallbackList(callbacks)
        cb = CallbackParam(eval_network=self._eval_network, valid_dataset=valid_dataset,
                           batch_num=dataset.get_dataset_size(), mode="eval", cur_step_num=0,
                           list_callback=callbacks.callbacks, network=self._network,
                           dataset_sink_mode=False)
        for metric in self._metric_fns.values():
            metric.clear()
        run_context = RunContext(cb)
        was_training = self._network.training
        self._network.set_train(False)
        try:
            with contextlib.ExitStack() as stack, self._precision():
                for c in callbacks.callbacks:
                    stack.enter_context(c)
                callbacks.on_eval_begin(run_context)
                callbacks.on_eval_epoch_begin(run_context)
                for batch in dataset:
                    cb.cur_step_num += 1
                    cb.eval_dataset_element = inputs = _tensors(batch)
                    callbacks.on_eval_step_begin(run_context)
                    outputs = self._eval_network(*inputs)
                    cb.net_outputs = outputs
                    callbacks.on_eval_step_end(run_context)
                    self._update_metrics(outputs)
                    if run_context.get_stop_requested():
                        break
                callbacks.on_eval_epoch_end(run_context)
                cb.metrics = metrics = {name: m.eval() for name, m in self._metric_fns.items()}
                callbacks.on_eval_end(run_context)
        finally:
            self._network.set_train(was_training)
        return metrics

    def _update_metrics(self, outputs):
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        if self._eval_indexes is not None and len(outputs) < 3:
            raise ModelError(f"Model.eval: the eval network returned {len(outputs)} outputs; eval_indexes "
                             f"{self._eval_indexes} need 3")
        for metric in self._metric_fns.values():
            if self._eval_indexes is None:
                metric.update(*outputs)
            elif isinstance(metric, Loss):
                metric.update(outputs[self._eval_indexes[0]])
            else:
                metric.update(outputs[self._eval_indexes[1]], outputs[self._eval_indexes[2]])

    def predict(self, *predict_data):
        was_training = self._network.training
        self._network.set_train(False)
        try:
            with self._precision():
                return self._network(*_tensors(predict_data))
        finally:
            self._network.set_train(was_training)


def _endless(dataset):
    """The dataset's batches, pass after pass."""
    while True:
        empty = True
        for batch in dataset:
            empty = False
            yield batch
        if empty:
            raise DatasetError("Model.train: the dataset yielded no batch")


def _stage(batches: list) -> list[np.ndarray]:
    """One array per column: the sink's batches stacked on a new first axis."""
    staged = []
    for k in range(len(batches[0])):
        shapes = {np.shape(b[k]) for b in batches}
        if len(shapes) != 1:
            raise DatasetError(f"Model.train: a sink needs batches of one shape; column {k} has shapes "
                               f"{sorted(shapes)} (use dataset.batch(n, drop_remainder=True))")
        staged.append(np.stack([np.asarray(b[k]) for b in batches]))
    return staged
