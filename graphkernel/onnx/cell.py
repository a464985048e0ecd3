"""OnnxCell: a Cell that runs an ONNX graph, replayed node by node through the Builder in a trace.

    cell = graphkernel.onnx.load("model.onnx")
    y = cell(Tensor(x))                  # one Tensor per graph input, in the model's order
    y0, y1 = cell(Tensor(a), Tensor(b))  # several graph outputs come back as a tuple, in declared order

A dim the model leaves dynamic (a dim_param, or a dim without a value) is a symbolic size
(ir/symbolic.py): the graph compiles once for all its sizes, one dim_param one size in every input it
names. A model whose converters cannot follow a dynamic dim through its shape arithmetic compiles per
input shape instead, with a DynamicShapeWarning. A graph input the model reads as
shape data (a Reshape's shape, a Slice's starts, reduction axes) is a *static input*, as in
`jax.jit(static_argnums=...)`: its value is known at trace time, and each distinct value has its own
compiled graph (a _Variant, whose construct takes the other inputs). Declared dims, dtypes and the
number of inputs are checked before anything is traced; a mismatch names the input.
Large initializers are Parameters (`cell.parameters_and_names()`), named as in the model.
"""
from __future__ import annotations

import difflib
import inspect
import keyword
import os
import re
import warnings

import numpy as np

from ir.errors import GraphKernelError
from ir.limits import ResourceLimitError, check_shape
from ir.printer import RESERVED
from graphkernel.settings.dynamic_shapes import Declaration, InputSpec as DimSpec
from graphkernel.tracing.dynamic import InputDTypeError, InputShapeError
from graphkernel.context import max_device_memory
from graphkernel.cell import Cell
from graphkernel.onnx.builder import Builder, NodeInfo
from graphkernel.onnx.loader import (InputSpec, ModelSpec, check_fields, check_model, model_spec,
                                     read_model)
from graphkernel.onnx.types import OnnxImportError, OnnxInputError
from graphkernel.tensor import Parameter, Tensor
from graphkernel.tracing.trace import SymbolicTensor, active_trace


def _identifiers(names: list[str]) -> list[str]:
    """Distinct Python identifiers for the names; the suffix count per base is kept, so names that all
    sanitize alike (a hostile model's) take linear time, not quadratic."""
    out, seen, next_suffix = [], set(), {}
    for name in names:
        ident = re.sub(r"\W", "_", name) or "input"
        if ident[0].isdigit() or keyword.iskeyword(ident):
            ident = "_" + ident
        base, k = ident, next_suffix.get(ident, 1)
        while ident in seen:
            ident, k = f"{base}_{k}", k + 1
        next_suffix[base] = k
        seen.add(ident)
        out.append(ident)
    return out


def _set_construct(cell: Cell, specs: list[InputSpec], fn) -> None:
    """construct(*inputs) with one positional parameter per input, named after it."""
    def construct(*inputs):
        return fn(*inputs)
    construct.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_ONLY)
         for p in _identifiers([s.name for s in specs])])
    object.__setattr__(cell, "construct", construct)


class OnnxCell(Cell):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "_variants", {})
        for name, arr in spec.weights.items():
            self._params[name] = Parameter(arr, name=name, requires_grad=False)
        _set_construct(self, spec.inputs, self._nested)

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.spec.inputs]

    @property
    def output_names(self) -> list[str]:
        return list(self.spec.outputs)

    def __repr__(self):
        ins = ", ".join(map(str, self.spec.inputs))
        return f"OnnxCell({self.spec.name!r}, opset {self.spec.opset}, inputs ({ins}), " \
               f"outputs {self.output_names})"

    # -- calling: ONNX graphs always run compiled (in PYNATIVE_MODE too) --------------------------------
    def __call__(self, *args, **kwargs):
        if active_trace() is not None:  # inside another Cell's construct: inline the model's graph
            return super().__call__(*args, **kwargs)
        variant, dynamic = self._variant(args, kwargs)
        return variant(*dynamic)

    def compile(self, *args, **kwargs):
        """The CompiledGraph a call with these Tensors uses; it takes the non-static inputs only."""
        variant, dynamic = self._variant(args, kwargs)
        return variant.compile(*dynamic)

    def compiled_inputs(self, *args) -> list:
        """The inputs the CompiledGraph of `compile(*args)` takes: those not read as shape data."""
        return self._variant(args, {})[1]

    def _nested(self, *inputs):
        variant, dynamic = self._variant(inputs, {})
        return variant.construct(*dynamic)

    def _variant(self, args, kwargs):
        if kwargs:
            raise OnnxInputError(f"inputs are positional, in the model's order ({', '.join(self.input_names)}); "
                                 f"got keyword argument(s) {', '.join(map(repr, kwargs))}")
        self._check_count(args)
        if active_trace() is None:
            self._check_args(args, kwargs)
        self._check_each(args)
        static, dynamic = {}, []
        for x, spec in zip(args, self.spec.inputs):
            if not spec.static:
                dynamic.append(x)
            elif isinstance(x, SymbolicTensor):
                raise OnnxInputError(f"input {spec.name!r} is read as shape data, so it must be a concrete "
                                     "Tensor, not a value computed inside a traced construct")
            else:
                static[spec.name] = np.asarray(x.asnumpy())
        key = tuple((a.dtype.str, a.shape, a.tobytes()) for a in static.values())
        variant = self._variants.get(key)
        if variant is None:
            variant = self._variants[key] = _Variant(self, static)
        return variant, dynamic

    # -- inputs -------------------------------------------------------------------------------------
    def _check_count(self, inputs) -> None:
        specs = self.spec.inputs
        if len(inputs) < len(specs):
            missing = ", ".join(repr(s.name) for s in specs[len(inputs):])
            raise OnnxInputError(f"missing input(s) {missing}: the model takes {len(specs)} "
                                 f"({', '.join(map(str, specs))}), got {len(inputs)}")
        if len(inputs) > len(specs):
            raise OnnxInputError(f"the model takes {len(specs)} input(s) ({', '.join(map(str, specs))}), "
                                 f"got {len(inputs)}")

    def check_inputs(self, inputs) -> None:
        """OnnxInputError naming the input unless `inputs` match the model's declared inputs."""
        self._check_count(inputs)
        self._check_each(inputs)

    def _check_each(self, inputs) -> None:
        bound: dict[str, tuple[int, str]] = {}
        for x, spec in zip(inputs, self.spec.inputs):
            if x.dtype != spec.dtype:
                raise OnnxInputError(f"input {spec.name!r}: dtype {x.dtype.value}, the model declares "
                                     f"{spec.dtype.value}")
            if spec.dims is None:
                continue
            if len(x.shape) != len(spec.dims):
                raise OnnxInputError(f"input {spec.name!r}: shape {list(x.shape)} has rank {len(x.shape)}, "
                                     f"the model declares {spec}")
            for axis, (got, want) in enumerate(zip(x.shape, spec.dims)):
                if isinstance(want, int) and got != want:
                    raise OnnxInputError(f"input {spec.name!r}: shape {list(x.shape)}, the model declares "
                                         f"dim {axis} = {want} ({spec})")
                if isinstance(want, str):
                    first = bound.setdefault(want, (got, spec.name))
                    if first[0] != got:
                        raise OnnxInputError(f"input {spec.name!r}: dim {axis} ({want!r}) is {got}, but "
                                             f"input {first[1]!r} gave {want!r} = {first[0]}")

    @property
    def dim_names(self) -> list[str]:
        """The names of the model's dynamic input dims (ONNX dim_params), sorted."""
        return sorted({d for spec in self.spec.inputs for d in spec.dims or () if isinstance(d, str) and d})

    def random_inputs(self, seed: int = 0, dims: dict[str, int] | None = None) -> list[Tensor]:
        """Random Tensors matching the declared inputs; `dims` sizes named dynamic dims (each must be one
        of `dim_names`: a misspelt name is an error, not a size silently unused), DEFAULT_DIM the others."""
        rng = np.random.default_rng(seed)
        dims = dims or {}
        names = self.dim_names
        for name in sorted(set(dims) - set(names)):
            near = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise OnnxInputError(f"dim {name!r}: the model has no dynamic dim of that name{hint}; its dynamic dims: "
                                 f"{', '.join(map(repr, names)) or 'none'}")
        limit = max_device_memory()
        out = []
        for spec in self.spec.inputs:
            if spec.static:
                raise OnnxInputError(f"input {spec.name!r} is read as shape data; random values make no "
                                     "sense there: give concrete inputs (e.g. --inputs FILE.npz)")
            if spec.dims is None:
                raise OnnxInputError(f"input {spec.name!r} declares no shape; give concrete inputs")
            shape = []
            for axis, d in enumerate(spec.dims):
                if not isinstance(d, int):   # a dynamic dim: its size given by name, else DEFAULT_DIM
                    d = dims.get(d, DEFAULT_DIM) if d else DEFAULT_DIM
                shape.append(d)
            check_shape(shape, spec.dtype, limit, f"input {spec.name!r}")
            out.append(Tensor(_random(rng, spec, tuple(shape))))
        return out


DEFAULT_DIM = 1   # the size of a dynamic dim of random inputs that `dims` does not size (as ONNX Runtime's tools)


class _Variant(Cell):
    """The model with its static inputs bound to values; construct takes the other inputs."""

    def __init__(self, owner: OnnxCell, static: dict[str, np.ndarray]):
        super().__init__()
        object.__setattr__(self, "spec", owner.spec)
        object.__setattr__(self, "static", static)
        self._params.update(owner._params)  # the same Parameter objects: set_data on the owner's works
        dynamic = [s for s in owner.spec.inputs if not s.static]
        _set_construct(self, dynamic, lambda *inputs: replay(self.spec, self.static, dynamic, inputs,
                                                             dict(self.parameters_and_names())))
        # the model's dim_params (and unnamed dims) are symbolic sizes: one compile for all their sizes
        object.__setattr__(self, "_declared", _declaration(dynamic))

    def __call__(self, *args, **kwargs):
        if active_trace() is None:
            return self.compile(*args, **kwargs)(*args)
        return super().__call__(*args, **kwargs)

    def compile(self, *args, **kwargs):
        """The CompiledGraph of these inputs: one for every size of the model's dynamic dims; a model whose
        graph cannot keep them symbolic (arithmetic on its shapes the converters do not follow) compiles
        per input shape instead, with one DynamicShapeWarning saying why."""
        if self._declared is None:
            return super().compile(*args, **kwargs)
        try:
            return super().compile(*args, **kwargs)
        except (OnnxInputError, InputShapeError, InputDTypeError):
            raise
        except GraphKernelError as e:
            warnings.warn(f"ONNX model {self.spec.name!r}: its dynamic dims cannot stay symbolic ({e}); it compiles "
                          "once per input shape instead", DynamicShapeWarning, stacklevel=3)
            object.__setattr__(self, "_declared", None)
            return super().compile(*args, **kwargs)


class DynamicShapeWarning(UserWarning):
    """An ONNX model whose dynamic dims compile per shape, not once (the warning says why)."""


def _declaration(specs: list[InputSpec]) -> Declaration | None:
    """The dynamic dims of the model's inputs: a dim_param is a named size (one name, one size in every
    input), a dim without value or name a size of its own; None when every dim is static."""
    out = []
    for spec in specs:
        if spec.dims is None or all(isinstance(d, int) for d in spec.dims):
            out.append(None)
            continue
        dims = tuple(d if isinstance(d, int) else None for d in spec.dims)
        names = tuple(_size_name(d) if isinstance(d, str) and d else None for d in spec.dims)
        out.append(DimSpec(spec.name, dims, spec.dtype, symbols=names))
    return Declaration(tuple(out), None, "the model's dim_params") if any(s is not None for s in out) else None


def _size_name(param: str) -> str:
    """A dim_param as the name of a symbolic size: an identifier that is no word of the IR's text."""
    name = re.sub(r"\W", "_", param)
    if not name or name[0].isdigit() or name in RESERVED or name == "symbols":
        name = "d_" + name
    return name


def replay(spec: ModelSpec, static: dict, input_specs: list[InputSpec], inputs, params: dict):
    """Convert every node of the model inside the active trace; returns what construct returns."""
    trace = active_trace()
    env: dict = dict(spec.constants)
    env.update(static)
    env.update({s.name: _operand(trace, x) for s, x in zip(input_specs, inputs)})
    b = Builder(trace)

    def lookup(name: str, where: str):
        if not name:
            return None
        if name not in env and name in params:
            env[name] = trace.parameter(params[name])
        if name not in env:
            raise OnnxImportError(f"{where}: {name!r} is not computed by any earlier node, nor a graph input "
                                  "or initializer")
        return env[name]

    for node in spec.nodes:
        where = f"{node.op_type} node {node.name!r}"
        info = NodeInfo(node.op_type, node.name, node.version, node.attrs,
                        [lookup(n, where) for n in node.inputs], len(node.outputs))
        b.node = info
        # a scope of the node's name without empty parts: `/matmul_2/MatMul` gives Default/matmul_2/MatMul/...
        trace.scope.append("/".join(part for part in node.name.split("/") if part) or node.op_type)
        try:
            outs = node.converter.fn(b, info)
        except OnnxImportError:
            raise
        except ResourceLimitError as e:  # stays a MemoryError, now naming the ONNX node
            raise ResourceLimitError(f"{info.where()}: {e}") from None
        except GraphKernelError as e:
            raise OnnxImportError(f"{info.where()}: {e}") from None
        except (TypeError, ValueError, IndexError, KeyError) as e:  # inputs or attributes of a form we missed
            raise OnnxImportError(f"{info.where()}: cannot convert it ({type(e).__name__}: {e})") from e
        finally:
            trace.scope.pop()
        for name, value in zip(node.outputs, outs):
            if name:
                env[name] = value
    results = [_result(lookup(name, "graph output")) for name in spec.outputs]
    return results[0] if len(results) == 1 else tuple(results)


def _operand(trace, x):
    """A traced value for construct's argument (a concrete Tensor, inside another Cell, is a constant)."""
    if isinstance(x, SymbolicTensor):
        return x.value
    return trace.parameter(x) if isinstance(x, Parameter) else x.asnumpy()


def _result(x):
    return Tensor(x) if isinstance(x, np.ndarray) else SymbolicTensor(x)


def _random(rng, spec: InputSpec, shape: tuple[int, ...]) -> np.ndarray:
    if spec.dtype.is_float:
        return rng.standard_normal(shape).astype(spec.dtype.np)
    if spec.dtype.value == "bool":
        return rng.random(shape) < 0.5
    return rng.integers(0, 4, shape).astype(spec.dtype.np)


def load(source):
    """An OnnxCell running the model `source` (a path, bytes or an onnx.ModelProto).

    What can be raised (all GraphKernelErrors; tests/test_fuzz_onnx.py holds mutated models to this):
      by load:            OnnxImportError     unreadable, truncated or non-ONNX data, text that is not
                                              UTF-8, an onnx.checker failure, an opset, op, type or
                                              declared dim graphkernel does not take (names the file,
                                              field, node, op or tensor)
                          ResourceLimitError  an initializer larger than max_device_memory
      by the first call   OnnxInputError      inputs unlike the declared ones (count, dtype, dims)
      at a new signature  OnnxImportError     a node that cannot be converted at these shapes and
      (conversion):                           values, naming op type, node and op version
                          ResourceLimitError  a tensor larger than max_device_memory, naming it
      by a run:           ExecutionError      a node failing on the data (a Gather index out of range)
    """
    model, base_dir = read_model(source)
    check_fields(model, from_file=base_dir is not None)
    check_model(model, os.fspath(source) if base_dir is not None else None)
    return OnnxCell(model_spec(model, base_dir))
