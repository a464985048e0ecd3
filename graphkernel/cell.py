"""Cell: the user's network. GRAPH_MODE traces `construct` and runs the compiled graph;
PYNATIVE_MODE runs `construct` directly, op by op.

The compiled graph is cached per input signature (shapes and dtypes of the call's Tensors and of the
Parameters construct reads) and per compile-relevant context (context.compile_settings()): changing
`enable_graph_kernel` and calling again compiles anew; calling again with the same signature does not
retrace (`cell.trace_count` counts traces).
"""
from __future__ import annotations

import inspect
import warnings

from ir.dtypes import DType, as_dtype
from ir.errors import GraphKernelError
from ir.graph import TensorType
from ir.symbolic import Assumptions
from graphkernel import context
from graphkernel.compiler import compile_graph, options_from_context
from graphkernel.settings.seed import get_seed
from graphkernel.bprop import call_with_bprop, has_bprop, record_with_bprop
from graphkernel.tracing.tape import active_tape
from graphkernel.tracing.arguments import check as check_argument, eager_arguments, graph_inputs, signature, trace_arguments
from graphkernel.assign import assign
from graphkernel.settings.jit_config import JitConfig, JitConfigError, JitConfigWarning
from graphkernel.tensor import (PARAMETER_FLAGS_VERSION, Parameter, ParameterTuple, Tensor, TensorOps,
                                is_python_scalar, operations)
from graphkernel.tracing.trace import SymbolicTensor, Trace, active_trace
from graphkernel.tracing.dynamic import declaration_of, fitted_signature, input_types, prepared_sizes


class CellCallError(GraphKernelError, TypeError):
    """A Cell called with arguments construct cannot take."""


class DynamicShapeWarning(UserWarning):
    """Dynamic-shape session options that name none of a called Cell's inputs (it compiles per shape)."""


_UNNAMED: set = set()   # (options, Cell class) warned about once


# Bumped when a Parameter or Cell attribute of any Cell is replaced: compiled graphs read Parameters by
# identity, so every cached compile becomes stale (rare; first assignments do not bump it).
_structure_version = [0]
# Bumped when set_train changes any Cell's mode. The mode is not in the structure: each Cell's cache key
# holds the modes of the Cells its construct can read (its subtree, and any other Cell a trace entered),
# so switching train -> eval -> train finds both compiles again.
_mode_version = [0]
_mode_ids: dict[tuple, int] = {}   # each tuple of training flags seen, as a small int for the cache keys
FITTED_SHAPES = 1024   # call signatures whose fit against a declared dynamic shape a Cell remembers


class Cell:
    def __init__(self, auto_prefix: bool = True):
        object.__setattr__(self, "_cells", {})
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_param_tuples", {})   # ParameterTuples: their Parameters keep their names
        object.__setattr__(self, "_compiled", {})
        object.__setattr__(self, "trace_count", 0)
        object.__setattr__(self, "_auto_prefix", auto_prefix)
        object.__setattr__(self, "training", False)
        object.__setattr__(self, "_jit_level", None)   # (level, switch) of set_jit_config
        object.__setattr__(self, "_float_dtype", None)  # to_float: the dtype its float inputs are cast to
        object.__setattr__(self, "_entered", {})       # id -> Cell outside the subtree a trace entered
        object.__setattr__(self, "_modes_seen", None)  # (versions, mode id) cached by _modes
        object.__setattr__(self, "_declared", None)    # set_inputs: the dynamic shapes its calls may have
        object.__setattr__(self, "_declared_entries", None)   # set_inputs' arguments, as given (get_inputs)
        object.__setattr__(self, "_fitted", {})        # (declaration, call signature) -> its compile signature
        object.__setattr__(self, "_names", {})         # argument count -> the arguments' names

    def __setattr__(self, name, value):
        if "_cells" not in self.__dict__:
            raise GraphKernelError(f"{type(self).__name__}.__init__ must call super().__init__() before "
                                   f"setting attributes (setting {name!r})")
        if name in self._params and value is not self._params[name] and (
                not isinstance(value, Parameter) or active_trace() is not None):
            # `self.p = expr` (in construct, or op by op): MindSpore's assign; the Parameter stays, its
            # value changes (a Parameter's value too: `self.a, self.b = self.b, self.a` swaps values)
            assign(self._params[name], value)
            return
        if name in self._cells or name in self._params or name in self._param_tuples:
            self._cells.pop(name, None)
            self._params.pop(name, None)
            self._param_tuples.pop(name, None)
            _structure_version[0] += 1
        if isinstance(value, Cell):
            if self._auto_prefix:   # MindSpore: the child's Parameters are named by their path from here
                value.update_parameters_name(name + ".")
            self._cells[name] = value
        elif isinstance(value, Parameter):
            if value.name is None:
                value.name = name
            self._params[name] = value
        elif isinstance(value, ParameterTuple):
            self._param_tuples[name] = value
        object.__setattr__(self, name, value)

    def construct(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__} must define construct()")

    @property
    def cls_name(self) -> str:
        """MindSpore's name of the cell's class (its messages use it)."""
        return type(self).__name__

    def to_float(self, dst_type) -> "Cell":
        """MindSpore's `to_float`: this cell and every cell below it cast their float inputs to dst_type
        (float16, float32 or bfloat16, as MindSpore 2.x's) when called; returns the cell."""
        dtype = as_dtype(dst_type)
        if dtype not in (DType.float16, DType.float32, DType.bfloat16):
            raise CellCallError(f"{type(self).__name__}.to_float: dst_type must be float16, float32 or bfloat16, "
                                f"got {dtype}")
        for _, cell in self.cells_and_names():
            object.__setattr__(cell, "_float_dtype", dtype)
        _structure_version[0] += 1
        return self

    def _cast_inputs(self, args):
        """The call's arguments with float tensors cast to the to_float dtype (when one is set)."""
        dtype = self._float_dtype
        if dtype is None:
            return args
        cast = operations().Cast()
        return tuple(cast(a, dtype) if isinstance(a, TensorOps) and a.dtype.is_float and a.dtype != dtype else a
                     for a in args)

    # -- parameters ---------------------------------------------------------------------------
    def parameters_and_names(self, prefix: str = ""):
        """(path, Parameter) of its own, then its ParameterTuples' (by their names), then its cells'."""
        for name, p in self._params.items():
            yield (f"{prefix}{name}", p)
        for params in self._param_tuples.values():
            yield from ((p.name, p) for p in params)
        for name, cell in self._cells.items():
            yield from cell.parameters_and_names(f"{prefix}{name}.")

    def get_parameters(self):
        """Every Parameter, each once: its own first, then its cells' (in the order they were set)."""
        seen, out = set(), []
        for _, p in self.parameters_and_names():
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        return out

    def trainable_params(self):
        """The Parameters with requires_grad=True."""
        return [p for p in self.get_parameters() if p.requires_grad]

    def untrainable_params(self):
        return [p for p in self.get_parameters() if not p.requires_grad]

    def update_parameters_name(self, prefix: str = "") -> None:
        """Name every Parameter `prefix` + its attribute path (MindSpore's auto_prefix naming); the
        Parameters of ParameterTuples keep their names."""
        in_tuples = {id(p) for _, cell in self.cells_and_names() for t in cell._param_tuples.values() for p in t}
        for path, p in self.parameters_and_names():
            if id(p) not in in_tuples:
                p.name = prefix + path

    def cells_and_names(self, prefix: str = ""):
        """(path, cell) for this cell ("" or `prefix`) and every cell below it."""
        yield prefix, self
        for name, cell in self._cells.items():
            yield from cell.cells_and_names(f"{prefix}.{name}" if prefix else name)

    def cells(self):
        return list(self._cells.values())

    def set_grad(self, requires_grad: bool = True) -> "Cell":
        """MindSpore's flag that a gradient will be taken of this cell; nothing to prepare here."""
        return self

    def set_train(self, mode: bool = True) -> "Cell":
        """Training mode for this cell and every cell below it (Dropout reads it). The mode is read when
        construct is traced: a call in a mode not compiled before compiles; one compiled before (training,
        then evaluating, then training again) reuses its compile."""
        changed = False
        for _, cell in self.cells_and_names():
            if cell.training != bool(mode):
                object.__setattr__(cell, "training", bool(mode))
                changed = True
        if changed:
            _mode_version[0] += 1
        return self

    def _modes(self) -> int:
        """The training flags of every Cell a trace of this one can read (its subtree and the Cells outside
        it that its traces entered), as a small int: walked again only after a set_train or a structure
        change, so a call's cache key stays cheap to hash."""
        versions = (_mode_version[0], _structure_version[0], len(self._entered))
        seen = self._modes_seen
        if seen is None or seen[0] != versions:
            cells = [cell for _, cell in self.cells_and_names()] + list(self._entered.values())
            flags = tuple(cell.training for cell in cells)
            seen = (versions, _mode_ids.setdefault(flags, len(_mode_ids)))
            object.__setattr__(self, "_modes_seen", seen)
        return seen[1]

    def set_jit_config(self, jit_config: JitConfig) -> None:
        """MindSpore 2.x: this Cell compiles at `jit_config.jit_level` ("O1": fusion on), which comes
        before the session's jit_level (graphkernel/settings/jit_config.py). As in MindSpore it is set once: a
        second call warns and changes nothing."""
        if not isinstance(jit_config, JitConfig):
            raise JitConfigError(f"{type(self).__name__}.set_jit_config: expected a JitConfig, got "
                                 f"{type(jit_config).__name__}")
        if self._jit_level is not None:
            warnings.warn(f"{type(self).__name__}.set_jit_config: the jit config of a Cell can only be set "
                          "once; this setting is ignored", JitConfigWarning, stacklevel=2)
            return
        level = jit_config.jit_level
        object.__setattr__(self, "_jit_level", (level, f"{type(self).__name__}.set_jit_config("
                                                       f"JitConfig(jit_level={level!r}))") if level else ())
        _structure_version[0] += 1

    # -- dynamic shapes ----------------------------------------------------------------------------
    def set_inputs(self, *inputs, **kwargs) -> None:
        """MindSpore 2.x: the shapes later calls may have, `Tensor(shape=[None, 128], dtype=...)` with None
        a dynamic dim (shape=None: any rank), given for every construct argument in order (a Tensor
        with data declares its static shape, another value nothing) or by name (`set_inputs(x=...)`).
        In GRAPH_MODE every call that fits compiles once (`compile(*args)` returns the same graph);
        one that does not is an InputShapeError naming the input, its declared and its given shape
        (a dtype that differs: InputDTypeError). A declaration of any rank compiles once per rank."""
        cls = type(self).__name__
        if inputs and kwargs:
            raise CellCallError(f"{cls}.set_inputs: give the inputs in order or by name, not both (inputs: "
                                f"{len(inputs)}, names: {', '.join(kwargs)})")
        params = inspect.signature(self.construct).parameters
        names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        varargs = any(p.kind == p.VAR_POSITIONAL for p in params.values())
        if kwargs:
            unknown = [k for k in kwargs if k not in names]
            if unknown:
                raise CellCallError(f"{cls}.set_inputs: construct has no argument {', '.join(map(repr, unknown))}; "
                                    f"its arguments: {', '.join(names) or 'none'}")
            entries = [kwargs.get(n) for n in names[: max(names.index(k) for k in kwargs) + 1]]
        else:
            entries = list(inputs)
            required = [n for n, p in params.items() if p.kind == p.POSITIONAL_OR_KEYWORD and p.default is p.empty]
            if len(entries) < len(required) or (len(entries) > len(names) and not varargs):
                raise CellCallError(f"{cls}.set_inputs: construct takes {len(required)}"
                                    f"{'' if len(required) == len(names) else '-' + str(len(names))} argument(s) "
                                    f"({', '.join(names)}), set_inputs got {len(entries)}; declare every input, "
                                    "in order (MindSpore: all networks and loss functions with set_inputs)")
        arg_names = names + [f"input{k}" for k in range(len(names), len(entries))]
        decl = declaration_of(entries, arg_names, "set_inputs")
        object.__setattr__(self, "_declared", decl if any(s is not None for s in decl.specs) else None)
        object.__setattr__(self, "_declared_entries", tuple(inputs) if inputs else dict(kwargs))
        # no other Cell's compiles change: this one's calls now key by the declaration (_cache_key)

    def get_inputs(self):
        """The inputs set_inputs was given (None when it was not called)."""
        entries = self._declared_entries
        if isinstance(entries, dict):
            return entries or None
        return entries

    def _declaration(self, names):
        """The dynamic shapes of this Cell's calls: set_inputs', else seed 004's session options (by the
        names of construct's arguments), else None."""
        if self._declared is not None:
            return self._declared
        session = context.dynamic_shapes()
        if session is None:
            return None
        decl = session.declaration(names)
        if decl is None and (session.origin, type(self).__name__) not in _UNNAMED:
            _UNNAMED.add((session.origin, type(self).__name__))
            warnings.warn(f"{session.origin} names {', '.join(n for n, _ in session.shapes)}: no argument of "
                          f"{type(self).__name__}.construct ({', '.join(names) or 'none'}) has one of those names, "
                          "so its calls compile per shape", DynamicShapeWarning, stacklevel=4)
        return decl

    def _arg_names(self, count: int) -> list[str]:
        """The names of a call's `count` arguments: construct's parameters, then (construct(*inputs) of a
        train cell passing them on to its network) the network's, then input<k>."""
        names = self._names.get(count)
        if names is None:
            params = inspect.signature(self.construct).parameters.values()
            named = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            inner = self._cells.get("network")
            if any(p.kind == p.VAR_POSITIONAL for p in params) and inner is not None and not named:
                named = inner._arg_names(count)
            names = self._names[count] = named[:count] + [f"input{k}" for k in range(len(named), count)]
        return names

    # -- calling --------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        trace = active_trace()
        if trace is not None:
            return self._call_nested(trace, args, kwargs)
        if context.get_context("mode") == context.PYNATIVE_MODE:
            self._check_args(args, kwargs)
            tape = active_tape()
            inputs = self._cast_inputs(eager_arguments(args))
            if tape is not None and has_bprop(self):   # a PYNATIVE gradient is recording
                return record_with_bprop(self, tape, args, self.construct(*inputs))
            return self.construct(*inputs)
        compiled = None if kwargs else self._compiled.get(self._cache_key(args))
        if compiled is None:
            compiled = self.compile(*args, **kwargs)
        return compiled.call_unchecked(graph_inputs(args))

    def _cache_key(self, args):
        """(input signature, compile settings, structure version), or None for arguments a call cannot
        take. A Python constant's value is part of the signature (graphkernel/tracing/arguments.py); an
        input of a declared dynamic shape counts by its declaration (graphkernel/tracing/dynamic.py), so every
        shape that fits shares one compile."""
        sig = signature(args)
        if sig is None:
            return None
        decl = self._declared
        if decl is None and context.dynamic_shapes_set():
            decl = self._declaration(self._arg_names(len(args)))
        if decl is not None:   # checked once per shape of the call (_fitted), then a dict lookup
            hit = self._fitted.get((id(decl), sig))
            if hit is None or hit[0] is not decl:
                if len(self._fitted) >= FITTED_SHAPES:
                    self._fitted.clear()
                hit = self._fitted[(id(decl), sig)] = (decl, fitted_signature(decl, args, self._arg_names(len(args))))
            sig = hit[1]
        return (sig, context.compile_settings_id(), _structure_version[0], self._modes(),
                PARAMETER_FLAGS_VERSION[0], get_seed())

    def _call_nested(self, trace: Trace, args, kwargs):
        """A sub-cell called while its parent is being traced: inline its construct under its scope."""
        try:
            inspect.signature(self.construct).bind(*args, **kwargs)
        except TypeError as e:
            raise CellCallError(f"{type(self).__name__}.construct: {e}") from None
        trace.scope.append(self._scope_in(trace))
        trace.cells.append(self)
        trace.entered[id(self)] = self
        trace.random_calls.append(0)
        args = self._cast_inputs(args)
        try:
            if has_bprop(self):   # its gradient is its own bprop (graphkernel/bprop.py)
                return call_with_bprop(self, trace, args, lambda *a: self.construct(*a, **kwargs))
            return self.construct(*args, **kwargs)
        finally:
            trace.random_calls.pop()
            trace.cells.pop()
            trace.scope.pop()

    def _scope_in(self, trace: Trace) -> str:
        parent = trace.cells[-1] if trace.cells else None
        attr = next((n for n, c in parent._cells.items() if c is self), None) if parent else None
        if not attr:
            return type(self).__name__
        return f"{attr}-{type(self).__name__}" if context.get_context("reserve_class_name_in_scope") else attr

    def _check_args(self, args, kwargs):
        cls = type(self).__name__
        if kwargs:
            raise CellCallError(f"{cls}: keyword arguments ({', '.join(kwargs)}) are not supported; pass "
                                "Tensors positionally")
        try:
            inspect.signature(self.construct).bind(*args)
        except TypeError as e:
            raise CellCallError(f"{cls}.construct: {e}") from None
        for i, a in enumerate(args):
            check_argument(cls, i, a)

    def compile(self, *args, **kwargs):
        """The CompiledGraph a call with these Tensors uses (compiled now if not cached)."""
        self._check_args(args, kwargs)
        key = self._cache_key(args)
        compiled = self._compiled.get(key)
        if compiled is None:
            with Assumptions():   # size equalities the trace and the passes rely on (ir/symbolic.py)
                graph, parameters, tree, checks = self._trace(args)
                compiled = compile_graph(graph, options_from_context(self._jit_level or None), parameters=parameters,
                                         out_tree=tree, name=type(self).__name__, checks=checks)
            decl = self._declaration(self._arg_names(len(args)))
            if decl is not None:   # gears and range bounds: planned (their kernels built) now
                for sizes in prepared_sizes(decl, args):
                    compiled.prepare(sizes, required=decl.gears is not None)
            self._compiled[self._cache_key(args)] = compiled   # the trace may have entered Cells outside the tree
        return compiled

    def compiled_inputs(self, *args) -> list:
        """The Tensors a call with `args` hands to the CompiledGraph of `compile(*args)` (before the
        Parameters' values): the Tensors and mutables' values, not the constants; an ONNX model leaves
        out the inputs it reads as shape data."""
        return graph_inputs(args)

    def _trace(self, args):
        object.__setattr__(self, "trace_count", self.trace_count + 1)
        params = inspect.signature(self.construct).parameters
        names = [p for p in params][: len(args)]
        decl = self._declaration(self._arg_names(len(args)))
        types = input_types(decl, args) if decl is not None else [None] * len(args)
        with Trace() as trace:
            inputs = trace_arguments(args, lambda a, i: trace.input(
                types[i] or TensorType(a.shape, a.dtype), names[i] if i < len(names) else f"input{i}"))

            def run():   # once per path through construct's tensor conditions (graphkernel/tracing/branching.py)
                trace.cells.append(self)
                return _flatten(self.construct(*self._cast_inputs(inputs)), trace)
            trace.run_paths(run)
            graph = trace.graph()
        inside = {id(cell) for _, cell in self.cells_and_names()}
        for key, cell in trace.entered.items():
            if key not in inside:
                self._entered[key] = cell
        checks = []
        for check in trace.checks:   # each run of construct adds its checks again
            if check not in checks:
                checks.append(check)
        return graph, list(trace.parameters), trace.tree, checks


def _flatten(result, trace: Trace):
    """Graph outputs of construct's result, and the tree to rebuild it (tuples and lists nest)."""
    leaves = []

    def walk(x):
        if isinstance(x, (tuple, list)):
            return (type(x), [walk(item) for item in x])
        if isinstance(x, dict):   # MindSpore returns a dict as a dict
            return ("dict", [(k, walk(v)) for k, v in x.items()])
        if isinstance(x, SymbolicTensor):
            leaves.append(x.value)
        elif isinstance(x, Parameter):
            leaves.append(trace.parameter(x))
        elif isinstance(x, Tensor) or is_python_scalar(x):
            leaves.append(trace.constant(x.asnumpy() if isinstance(x, Tensor) else Tensor(x).asnumpy()))
        elif callable(x) and not isinstance(x, type):
            raise CellCallError(f"construct returned a {type(x).__name__}: as in MindSpore (\"Function in output "
                                "is not supported\"), return Tensors, constants, or tuples/lists of them")
        else:   # None, a string, a dtype, another constant: returned as it is, as MindSpore returns it
            return ("constant", x)
        return None

    return leaves, walk(result)
