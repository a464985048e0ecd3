"""MindSpore 2.10's dynamic shapes of `jit` functions: `enable_dynamic` and `jit(dynamic=1)`.

    @enable_dynamic(y=Tensor(shape=None, dtype=ms.float32))     shapes declared ahead, by argument name
    @jit                                                         (a Tensor, or a tuple/list of Tensors;
    def f(x, y): ...                                             each shape with a None, or None: any rank)

    @jit(dynamic=1)                                              the first call compiles for its shapes;
    def f(x): ...                                                a call whose Tensors' dims differ from the
                                                                 first's compiles once with those dims
                                                                 dynamic (a rank that differs: any rank)

Both make a Declaration (graphkernel/settings/dynamic_shapes.py) for the function's Cell, as set_inputs
does for a Cell. enable_dynamic checks its arguments as MindSpore 2.10 does.
"""
from __future__ import annotations

import inspect
import types

from ir.errors import GraphKernelError
from graphkernel.settings.dynamic_shapes import Declaration, DynamicShapeSettingError, InputSpec
from graphkernel.tensor import Tensor

class DynamicShapeTypeError(GraphKernelError, TypeError):
    """enable_dynamic given something that is not a Tensor declaration (MindSpore 2.10: a TypeError)."""


DYNAMIC_ATTR = "__graphkernel_enable_dynamic__"   # {argument index: (name, declaration)} on the function


def enable_dynamic(**kwargs):
    """MindSpore 2.10's `enable_dynamic`: declare the dynamic shapes of a `jit` function's arguments by
    name: a Tensor (or a tuple/list of Tensors) with at least one None dim, or shape None (any rank)."""
    if not kwargs:
        raise DynamicShapeSettingError("enable_dynamic: give at least one argument's shape (the input cannot be "
                                       "empty)")
    for name, arg in kwargs.items():
        tensors = list(arg) if isinstance(arg, (tuple, list)) else [arg]
        if not tensors or not all(isinstance(t, Tensor) for t in tensors):
            raise DynamicShapeTypeError(f"enable_dynamic: argument {name!r} must be a Tensor, or a tuple or list of "
                                        f"Tensors, got {type(arg).__name__}")
        for t in tensors:
            shape = t.declared_shape
            if shape is not None and None not in shape:
                raise DynamicShapeTypeError(f"enable_dynamic: the shape of argument {name!r} must have at least one "
                                            f"None (a dynamic dim), or be None (any rank); got {list(t.shape)}")

    def decorator(func):
        if not isinstance(func, (types.FunctionType, types.MethodType)):
            raise DynamicShapeSettingError(f"enable_dynamic decorates a function or method made by jit, got "
                                           f"{type(func).__name__}")
        inner = inspect.unwrap(func)
        names = [n for n in inspect.signature(inner).parameters if n != "self"]
        if len(kwargs) > len(names):
            raise DynamicShapeSettingError(f"enable_dynamic: {len(kwargs)} arguments declared, the function takes "
                                           f"{len(names)} ({', '.join(names)})")
        declared = {}
        for name, value in kwargs.items():
            if name not in names:
                raise DynamicShapeSettingError(f"enable_dynamic: the function has no argument {name!r} (its arguments: "
                                               f"{', '.join(names)})")
            declared[names.index(name)] = (name, value)
        setattr(inner, DYNAMIC_ATTR, declared)
        return func
    return decorator


def declared_for(fn, declared: dict, args, tree) -> Declaration:
    """The Declaration over the flat Tensors of a call (jit passes tuples of Tensors flat)."""
    specs: list = []
    for k, arg in enumerate(args):
        entry = declared.get(k)
        leaves = _leaves(arg)
        decl = None if entry is None else (list(entry[1]) if isinstance(entry[1], (tuple, list)) else [entry[1]])
        if decl is not None and len(decl) != len(leaves):
            raise DynamicShapeSettingError(f"enable_dynamic: argument {entry[0]!r} declares {len(decl)} Tensors, the "
                                           f"call gives {len(leaves)}")
        for j in range(len(leaves)):
            if decl is None:
                specs.append(None)
            else:
                t = decl[j]
                shape = t.declared_shape
                name = entry[0] if len(leaves) == 1 else f"{entry[0]}[{j}]"
                specs.append(InputSpec(name, None if shape is None else tuple(shape), t.dtype))
    return Declaration(tuple(specs), None, "enable_dynamic")


def _leaves(x) -> list:
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in _leaves(item)]
    return [x]


def generalize(cell, flat: list) -> None:
    """jit(dynamic=1): remember the first call's Tensors; from a call whose dims differ, declare those
    dims dynamic (any rank where the rank differs), widening a declaration made before."""
    seen = [(a.shape, a.dtype) if isinstance(a, Tensor) else None for a in flat]
    if cell.first_call is None:
        object.__setattr__(cell, "first_call", seen)
        return
    first = cell.first_call
    if len(first) != len(seen) or seen == first:
        return
    old = cell._declared.specs if cell._declared is not None else (None,) * len(seen)
    specs, changed = [], False
    for k, (now, then) in enumerate(zip(seen, first)):
        spec = old[k] if k < len(old) else None
        if now is None or then is None or now[1] != then[1]:
            specs.append(spec)
            continue
        shape = now[0]
        if spec is not None and spec.shape is None:
            specs.append(spec)
        elif len(shape) != len(then[0]) or (spec is not None and len(spec.shape) != len(shape)):
            specs.append(InputSpec(f"input{k}", None, now[1]))
            changed = True
        else:
            base = spec.shape if spec is not None else then[0]
            dims = tuple(None if d is None or d != n else d for d, n in zip(base, shape))
            if spec is None or dims != spec.shape:
                changed = changed or None in dims
            specs.append(InputSpec(f"input{k}", dims, now[1]) if None in dims else spec)
    if changed:
        cell.set_declaration(Declaration(tuple(specs), None, "jit(dynamic=1)"))
