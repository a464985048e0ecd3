"""Optimizer: the base of every optimizer, with MindSpore's contract.

    Optimizer(learning_rate, parameters, weight_decay=0.0, loss_scale=1.0)

`parameters` is a list of Parameters, or of groups: `{'params': [...], 'lr': ..., 'weight_decay': ...}`
(a group without 'lr' or 'weight_decay' takes the optimizer's) and at most one `{'order_params': [...]}`,
the order the gradients come in (as BERT writes it, to keep LayerNorm and biases out of weight decay).
Without groups, weight decay skips Parameters with 'beta' or 'gamma' in their names (MindSpore's rule).

The learning rate is a float, a per-step list/array/1-D Tensor, or a `LearningRateSchedule` Cell. Every
value the step reads at run time is state of the optimizer, not a constant of the compiled graph: a float
rate is a Parameter (`learning_rate`, set it with `set_data` and the next step uses it), a list is a
Parameter indexed by the step counter `global_step` (an int32 Parameter of shape (1,) that every step
increments), a schedule is computed from `global_step`. Moments are ParameterTuples named
`<kind>.<parameter name>` (`moment1.fc.weight`).

Subclasses write `construct(gradients, ...)` with primitives, and call `decay_weight`, `scale_grad`,
`get_lr` and `self.assignadd(self.global_step, ...)` as MindSpore 2.x's optimizers do (get_lr does not
advance global_step: the optimizer's construct does); the updates are `ops.assign`s, so they run in
place after every reader of the old value (graphkernel/assign.py). MindSpore's attributes are there for
them: `parameters`, `is_group`, `is_group_lr`, `weight_decay` (a float32 0-d Tensor, or one per
Parameter with groups), `decay_flags`, `optim_filter` (all True on one device), `use_parallel` (False),
`map_`, `hyper_map` and their reverse forms, `broadcast_params` (the identity on one device).
"""
from __future__ import annotations

import numbers

import numpy as np

from ir.dtypes import DType
from ir.errors import GraphKernelError
from graphkernel.assign import AssignAdd, assign
from graphkernel.cell import Cell
from graphkernel.ops import operations as P
from graphkernel.ops.multitype import HyperMap, Map
from graphkernel.communication.parallel_context import get_auto_parallel_context
from graphkernel.tensor import Parameter, ParameterTuple, Tensor
from graphkernel.tracing.trace import active_trace


class OptimizerError(GraphKernelError, ValueError):
    """An optimizer built from arguments MindSpore refuses (the message names the argument)."""


def _check_float(cls: str, name: str, value, low=None, high=None, low_open=False, high_open=False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OptimizerError(f"{cls}: {name} must be a float, got {type(value).__name__}")
    value = float(value)
    if low is not None and (value <= low if low_open else value < low):
        raise OptimizerError(f"{cls}: {name} must be {'>' if low_open else '>='} {low}, got {value}")
    if high is not None and (value >= high if high_open else value > high):
        raise OptimizerError(f"{cls}: {name} must be {'<' if high_open else '<='} {high}, got {value}")
    return value


def _is_schedule(x) -> bool:
    """A learning-rate schedule: a Cell computing the rate from the step (nn.LearningRateSchedule)."""
    return isinstance(x, Cell)


class _DynamicLR(Cell):
    """A per-step learning rate list: Gather(rates, global_step). A step past its end is refused
    before the call (the host reads the counter)."""

    def __init__(self, rates: np.ndarray, name: str, global_step: Parameter):
        super().__init__(auto_prefix=False)
        self.learning_rate = Parameter(rates, name=name, requires_grad=False)
        self.length = len(rates)
        self.counter = global_step

    def _check(self):
        step = int(self.counter._array[0])
        if step >= self.length:
            raise OptimizerError(f"learning rate {self.learning_rate.name}: step {step} is past the end of "
                                 f"the per-step list ({self.length} values)")

    def construct(self, global_step):
        trace = active_trace()
        if trace is not None:
            trace.checks.append(self._check)
        else:
            self._check()
        return P.Reshape()(P.Gather()(self.learning_rate, global_step, 0), ())


class Optimizer(Cell):
    def __init__(self, learning_rate, parameters, weight_decay=0.0, loss_scale=1.0):
        super().__init__(auto_prefix=False)
        cls = type(self).__name__
        if isinstance(parameters, (ParameterTuple, tuple)) or hasattr(parameters, "__next__"):
            parameters = list(parameters)
        if not isinstance(parameters, list) or not parameters:
            raise OptimizerError(f"{cls}: parameters must be a non-empty list of Parameters or of group "
                                 f"dicts, got {type(parameters).__name__}")
        self.loss_scale = _check_float(cls, "loss_scale", loss_scale, 0.0, low_open=True)
        self.global_step = Parameter(np.zeros((1,), np.int32), name="global_step", requires_grad=False)
        self.global_step_increase_tensor = Tensor(np.ones((1,), np.int32))
        self.assignadd = AssignAdd()
        self.is_group = isinstance(parameters[0], dict)
        groups = self._groups(cls, parameters, learning_rate, weight_decay)
        params = [p for g in groups for p in g["params"]]
        order = next((g["order_params"] for g in parameters if isinstance(g, dict) and "order_params" in g), None)
        if order is not None:
            params = self._ordered(cls, params, order)
        group_of = {id(p): g for g in groups for p in g["params"]}
        self.parameters = ParameterTuple(params)
        self._parameters = self.parameters
        self.param_length = len(params)
        # learning rates: one per group (shared by its Parameters)
        rates = []
        for k, g in enumerate(groups):
            suffix = "" if len(groups) == 1 or not self.is_group else f"_group{k}"
            rates.append(self._learning_rate(cls, g["lr"], "learning_rate" + suffix))
        self.is_group_lr = self.is_group and any("lr" in g for g in parameters if isinstance(g, dict))
        self.dynamic_lr = any(not isinstance(r, Parameter) for r in rates)
        for k, r in enumerate(rates):
            name = "learning_rate" if len(rates) == 1 else f"learning_rate_{k}"
            setattr(self, name, r)
        self._rates = rates
        group_index = {id(g): k for k, g in enumerate(groups)}   # by identity: == on a group compares Tensors
        self._rate_of = [group_index[id(group_of[id(p)])] for p in params]
        self.weight_decays = tuple(group_of[id(p)]["weight_decay"] for p in params)
        if self.is_group:
            self.decay_flags = tuple(wd > 0 for wd in self.weight_decays)
        else:
            self.decay_flags = tuple("beta" not in p.name and "gamma" not in p.name for p in params)
        wd_tensor = lambda wd: Tensor(np.array(wd, np.float32))  # noqa: E731
        self.weight_decay = (tuple(wd_tensor(wd) for wd in self.weight_decays) if self.is_group
                             else wd_tensor(self.weight_decays[0]))
        self.exec_weight_decay = any(wd > 0 and flag for wd, flag in zip(self.weight_decays, self.decay_flags))
        self.reciprocal_scale = 1.0 / self.loss_scale
        self.need_scale = self.loss_scale != 1.0
        if get_auto_parallel_context("enable_parallel_optimizer"):
            raise OptimizerError(f"{cls}: the parallel optimizer needs a data-parallel run; graphkernel runs one "
                                 "device (set enable_parallel_optimizer=False)")
        self.use_parallel = False
        self.optim_filter = (True,) * self.param_length
        self.map_, self.map_reverse = Map(), Map(None, True)
        self.hyper_map, self.hyper_map_reverse = HyperMap(), HyperMap(None, True)

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def _groups(cls, parameters, learning_rate, weight_decay) -> list[dict]:
        wd = _check_float(cls, "weight_decay", weight_decay, 0.0)
        if not isinstance(parameters[0], dict):
            for p in parameters:
                if not isinstance(p, Parameter):
                    raise OptimizerError(f"{cls}: parameters must all be Parameters (or all group dicts), got "
                                         f"a {type(p).__name__}")
            if len({id(p) for p in parameters}) != len(parameters):
                raise OptimizerError(f"{cls}: a Parameter appears twice in parameters")
            return [{"params": list(parameters), "lr": learning_rate, "weight_decay": wd}]
        groups, seen = [], {}
        for k, g in enumerate(parameters):
            if not isinstance(g, dict):
                raise OptimizerError(f"{cls}: group {k} is a {type(g).__name__}; every element must be a dict "
                                     "when one is")
            if "order_params" in g:
                if set(g) != {"order_params"}:
                    raise OptimizerError(f"{cls}: the order_params group may hold nothing else, got keys "
                                         f"{sorted(g)}")
                continue
            unknown = set(g) - {"params", "lr", "weight_decay", "grad_centralization"}
            if unknown:
                raise OptimizerError(f"{cls}: group {k} has unknown key(s) {sorted(unknown)}")
            if "params" not in g:
                raise OptimizerError(f"{cls}: group {k} has no 'params'")
            params = list(g["params"])
            if not params:
                raise OptimizerError(f"{cls}: group {k} has an empty 'params'")
            for p in params:
                if not isinstance(p, Parameter):
                    raise OptimizerError(f"{cls}: group {k}'s params must be Parameters, got a {type(p).__name__}")
                if id(p) in seen:
                    raise OptimizerError(f"{cls}: Parameter {p.name} is in group {seen[id(p)]} and group {k}")
                seen[id(p)] = k
            groups.append({"params": params, "lr": g.get("lr", learning_rate),
                           "weight_decay": _check_float(cls, f"group {k} weight_decay",
                                                        g.get("weight_decay", wd), 0.0)})
        if not groups:
            raise OptimizerError(f"{cls}: no group has 'params'")
        return groups

    @staticmethod
    def _ordered(cls, params, order) -> list:
        order = list(order)
        mine = {id(p) for p in params}
        if {id(p) for p in order} != mine or len(order) != len(params):
            missing = [p.name for p in params if id(p) not in {id(q) for q in order}]
            extra = [getattr(p, "name", p) for p in order if id(p) not in mine]
            raise OptimizerError(f"{cls}: order_params must hold the groups' Parameters, each once "
                                 f"(missing {missing}, not in a group {extra})")
        return order

    def _learning_rate(self, cls, lr, name):
        if _is_schedule(lr):
            return lr
        if isinstance(lr, bool):
            raise OptimizerError(f"{cls}: learning_rate must be a float, a list, a Tensor or a "
                                 "LearningRateSchedule, got a bool")
        if isinstance(lr, numbers.Real):
            return Parameter(np.array(_check_float(cls, "learning_rate", lr, 0.0), np.float32), name=name,
                             requires_grad=False)
        if isinstance(lr, (list, tuple, np.ndarray, Tensor)):
            rates = np.asarray(lr.asnumpy() if isinstance(lr, Tensor) else lr, np.float32)
            if rates.ndim == 0:
                return Parameter(rates, name=name, requires_grad=False)
            if rates.ndim != 1 or rates.size == 0:
                raise OptimizerError(f"{cls}: a learning_rate list/Tensor must be 1-D and non-empty, got "
                                     f"shape {list(rates.shape)}")
            if (rates < 0).any():
                raise OptimizerError(f"{cls}: learning_rate values must be >= 0")
            return _DynamicLR(rates, name, self.global_step)
        raise OptimizerError(f"{cls}: learning_rate must be a float, a list, a Tensor or a "
                             f"LearningRateSchedule, got a {type(lr).__name__}")

    # -- what a step uses ---------------------------------------------------------------------------
    def get_lr(self):
        """The learning rate of this step: a scalar, or (with per-group rates) one per Parameter."""
        values = [r if isinstance(r, Parameter) else P.Reshape()(r(self.global_step), ()) for r in self._rates]
        if self.is_group_lr:
            return tuple(values[k] for k in self._rate_of)
        return values[0]

    def get_lr_parameter(self, param):
        rate = lambda p: self._rates[self._rate_of[[id(q) for q in self.parameters].index(id(p))]]  # noqa: E731
        return [rate(p) for p in param] if isinstance(param, list) else rate(param)

    def decay_weight(self, gradients):
        """gradient + weight_decay * parameter, for the Parameters weight decay applies to (L2)."""
        if not self.exec_weight_decay:
            return gradients
        return tuple(g + p * wd if flag and wd > 0 else g
                     for g, p, wd, flag in zip(gradients, self.parameters, self.weight_decays, self.decay_flags))

    def scale_grad(self, gradients):
        """The gradients divided by loss_scale."""
        if not self.need_scale:
            return gradients
        return tuple(g * self.reciprocal_scale for g in gradients)

    def gradients_centralization(self, gradients):
        return gradients

    def broadcast_params(self, optim_result):
        """MindSpore's broadcast of the updated Parameters across the parallel optimizer's devices: one
        device here, so the result itself."""
        return optim_result

    def _check_gradients(self, gradients):
        if not isinstance(gradients, (tuple, list)) or len(gradients) != self.param_length:
            n = len(gradients) if isinstance(gradients, (tuple, list)) else type(gradients).__name__
            raise OptimizerError(f"{type(self).__name__}: expects one gradient per Parameter "
                                 f"({self.param_length}), got {n}")
        for g, p in zip(gradients, self.parameters):
            if tuple(g.shape) != tuple(p.shape):
                raise OptimizerError(f"{type(self).__name__}: the gradient of {p.name} has shape "
                                     f"{list(g.shape)}, the Parameter {list(p.shape)}")

    def __call__(self, gradients, *args):
        """Inside a trace (a jitted step, a train cell), the updates join the compiled graph; called
        directly, the update runs op by op. `args` follow the gradients (an overflow flag, say)."""
        self._check_gradients(gradients)
        if active_trace() is None:
            return self.construct(tuple(gradients), *args)
        return super().__call__(tuple(gradients), *args)

    def _lrs(self, lr):
        return lr if isinstance(lr, tuple) else (lr,) * self.param_length


def f32(x):
    """x as float32 (a no-op when it is): updates compute in float32 whatever the Parameter's dtype."""
    return x if x.dtype == DType.float32 else P.Cast()(x, DType.float32)


def write(param, value):
    """assign, cast back to the Parameter's dtype."""
    return assign(param, value if value.dtype == param.dtype else P.Cast()(value, param.dtype))
