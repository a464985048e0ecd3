"""A call against declared dynamic shapes: does it fit, what is its compile key, what does the trace see.

    spec_of(tensor, name)            the InputSpec a set_inputs / enable_dynamic Tensor declares:
                                     Tensor(shape=[None, 128], dtype=...) a dynamic dim, shape=None (or
                                     [-2]) any rank; a Tensor with data declares its static shape
    fitted_signature(decl, args)     the call's compile key with every declared dynamic dim as None (so
                                     every fitting shape shares one compile); an InputShapeError or
                                     InputDTypeError naming the input, its declared and its given shape
    input_types(decl, args, names)   the types the trace gives the inputs: a dynamic dim is a named
                                     symbolic size (ir/symbolic.py: s0, s1, ...) whose representative
                                     value is the range's upper bound when it has one, else this call's
                                     size; any rank: every dim of the call's rank dynamic

Symbols are numbered in the order of the arguments and their axes; a declaration's dims are
independent sizes (two None dims are two symbols, as MindSpore's -1 dims are), tied together where the
graph needs them equal (ir.symbolic.same_size, checked at each new shape).
"""
from __future__ import annotations

from ir.dtypes import as_dtype
from ir.errors import GraphKernelError
from ir.graph import TensorType
from ir.symbolic import Dim
from graphkernel.settings.dynamic_shapes import Declaration, DynamicShapeSettingError, InputSpec
from graphkernel.tensor import Tensor
from graphkernel.tracing.arguments import ArgumentError, Mutable, signature


class InputShapeError(GraphKernelError, ValueError):
    """A call whose input does not fit the shape its declaration (set_inputs, gears, ranges) allows."""


class InputDTypeError(GraphKernelError, TypeError):
    """A call whose input's dtype is not the declared one."""


ANY_RANK = -2    # MindSpore's spelling of a dynamic rank in a shape
ANY_DIM = -1


def spec_of(tensor, name: str, where: str) -> InputSpec | None:
    """The InputSpec a declaration entry makes: a Tensor declares its shape (None dims dynamic), anything
    else (a constant, None) declares nothing at its position."""
    if not isinstance(tensor, Tensor):
        return None
    shape = tensor.declared_shape
    if shape is None:
        return InputSpec(name, None, tensor.dtype)
    return InputSpec(name, tuple(None if d is None else int(d) for d in shape), tensor.dtype)


def fitted_signature(decl: Declaration, args, names=()) -> tuple:
    """The compile key of a call under `decl`, checking that every declared input fits."""
    specs = decl.specs
    sig = list(signature(args) or ())
    gear_values = [None] * len(decl.gears[0]) if decl.gears is not None else None
    for k, a in enumerate(args):
        spec = specs[k] if k < len(specs) else None
        if spec is None:
            continue
        if isinstance(a, Tensor) and a.is_declaration:
            raise ArgumentError(f"{_label(k, spec, names)}: a Tensor declaring the shape {list(a.shape)} holds no data: "
                                "declare shapes with set_inputs, call with Tensors of data")
        if not isinstance(a, Tensor):
            if isinstance(a, Mutable):
                raise InputShapeError(f"{_label(k, spec, names)}: declared {spec.text()} by {decl.origin}, given a "
                                      "mutable; declare a mutable's Tensors by passing them as Tensors")
            continue
        shape = a.shape
        if spec.dtype is not None and a._dtype is not spec.dtype:
            raise InputDTypeError(f"{_label(k, spec, names)}: declared {spec.text()} by {decl.origin}, given "
                                  f"{a._dtype.value}{list(shape)}: the dtype differs")
        if spec.shape is None:
            sig[k] = ("any rank", len(shape), a._dtype)
            continue
        if len(shape) != len(spec.shape):
            raise InputShapeError(f"{_label(k, spec, names)}: declared {spec.text()} by {decl.origin}, given "
                                  f"{a._dtype.value}{list(shape)}: rank {len(shape)}, declared rank {len(spec.shape)}")
        for axis, (d, want) in enumerate(zip(shape, spec.shape)):
            if want is None:
                lo, hi = spec.range_of(axis)
                if d < lo or (hi is not None and d > hi):
                    raise InputShapeError(
                        f"{_label(k, spec, names)}: declared {spec.text()} by {decl.origin}, given "
                        f"{a._dtype.value}{list(shape)}: dim {axis} is {d}, outside its range "
                        f"{lo}~{'inf' if hi is None else hi}")
                if gear_values is not None:
                    gear_values[spec.gear_columns[spec.dynamic_axes.index(axis)]] = d
            elif d != want:
                raise InputShapeError(f"{_label(k, spec, names)}: declared {spec.text()} by {decl.origin}, given "
                                      f"{a._dtype.value}{list(shape)}: dim {axis} is {d}, declared {want}")
        sig[k] = ("dynamic", spec.shape, spec.ranges, a._dtype)
    if gear_values is not None and tuple(gear_values) not in decl.gears:
        gears = "; ".join(",".join(map(str, g)) for g in decl.gears)
        raise InputShapeError(f"the call's dynamic dims are {','.join(map(str, gear_values))}, not one of the gears "
                              f"of {decl.origin} ({gears}): declared {_declared(decl, names)}, given "
                              f"{_given(args)}")
    return tuple(sig)


def input_types(decl: Declaration, args) -> list[TensorType | None]:
    """Per call argument, the symbolic type of its Tensor (None: not declared, traced as given)."""
    return _input_types(decl, args)[0]


def prepared_sizes(decl: Declaration, args) -> list[dict]:
    """The sizes a compile under `decl` plans ahead (CompiledGraph.prepare), so that no call of a declared
    shape builds a kernel: every gear; a range's lower and upper bounds (where it has them)."""
    _, symbols = _input_types(decl, args)
    if not symbols:
        return []
    if decl.gears is not None:
        return [{name: gear[spec.gear_columns[spec.dynamic_axes.index(axis)]] for name, spec, axis in symbols}
                for gear in decl.gears]
    if all(spec.ranges is None for _, spec, _ in symbols):
        return []   # set_inputs: no bounds to plan for
    ranges = [(1, None) if spec.shape is None else spec.range_of(axis) for _, spec, axis in symbols]
    out = [{name: lo for (name, _, _), (lo, _) in zip(symbols, ranges)}]
    if all(hi is not None for _, hi in ranges):
        out.append({name: hi for (name, _, _), (_, hi) in zip(symbols, ranges)})
    return out


def _input_types(decl: Declaration, args) -> tuple[list, list]:
    out: list = []
    symbols: list = []     # (name, spec, axis) of every symbol, in order
    count = 0
    named: dict = {}       # a named size (an ONNX dim_param) met before: the same Dim
    taken = {n for s in decl.specs if s is not None for n in s.symbols if n}
    for k, a in enumerate(args):
        spec = decl.specs[k] if k < len(decl.specs) else None
        if spec is None or not isinstance(a, Tensor):
            out.append(None)
            continue
        shape = []
        for axis, d in enumerate(a.shape):
            dynamic = spec.shape is None or spec.shape[axis] is None
            if not dynamic:
                shape.append(d)
                continue
            lo, hi = (1, None) if spec.shape is None else spec.range_of(axis)
            hint = hi if hi is not None else d   # gears: their largest value (the column's range)
            name = spec.symbols[axis] if spec.symbols and spec.shape is not None else None
            if name in named:
                shape.append(named[name])
                continue
            if name is None:
                while f"s{count}" in taken:
                    count += 1
                name = f"s{count}"
                count += 1
            named[name] = Dim.symbol(name, hint)
            shape.append(named[name])
            symbols.append((name, spec, axis))
        out.append(TensorType(tuple(shape), a.dtype))
    return out, symbols


def declaration_of(entries, names: list[str], origin: str) -> Declaration:
    """The Declaration of set_inputs' positional entries (one per construct argument)."""
    specs = tuple(spec_of(t, names[k] if k < len(names) else f"input{k}", origin) for k, t in enumerate(entries))
    return Declaration(specs, None, origin)


def _label(k: int, spec: InputSpec, names) -> str:
    name = names[k] if k < len(names) and names[k] else spec.name
    return f"input {k} ({name})" if name else f"input {k}"


def _declared(decl: Declaration, names) -> str:
    return ", ".join(f"{_label(k, s, names)} {s.text()}" for k, s in enumerate(decl.specs) if s is not None)


def _given(args) -> str:
    return ", ".join(f"{a.dtype.value}{list(a.shape)}" for a in args if isinstance(a, Tensor))


def check_declared_dtype(dtype):
    """A placeholder Tensor's dtype: required (MindSpore: a dynamic shape needs a dtype)."""
    if dtype is None:
        raise DynamicShapeSettingError("a Tensor declaring a dynamic shape needs its dtype: Tensor(shape=[None, 128], "
                                       "dtype=ms.float32)")
    return as_dtype(dtype)
