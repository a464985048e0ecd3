"""MindSpore 2.x's function namespaces, generated from the op table: `ops.<name>` (every row's
`api.functional`, and its `api.forms` in "ops"), `mint.<name>` and `mint.nn.functional.<name>` (its forms
there; `ops.extend`, 2.3-2.6's home of the mint forms, is the same functions). Each function has
MindSpore's parameter names, in its order, as a real signature (`inspect.signature(ops.sum)` is `(input,
dim=None, keepdim=False)`), and calls the row's primitive: the tensors, then the attributes, split
between construction (`P.ReduceSum(keep_dims=...)`) and the call (`(x, axis)`) as the row says.

An attribute parameter defaults to the attribute's default (MindSpore's), or to None standing for it
where that is a tuple (axes: None is every axis).
The tensors of a row's own functional are named `input` and `other` (MindSpore 2.x's names) unless the
row's `api.inputs` names them.
"""
from __future__ import annotations

import inspect

from ir.ops import OPS, Form, OpDef
from ir.ops.registry import REQUIRED
from graphkernel.ops import operations

SPACES = ("ops", "mint", "mint.nn.functional")


def default_form(d: OpDef) -> Form:
    """The `ops.<functional>` form of a row: its tensors, then the call's attributes, then the others."""
    n = d.arity if d.arity is not None else 1
    tensors = d.api.inputs[:n] if d.api.inputs else ("input", "other", "third")[:n]
    made = [a.name for a in d.attrs if a.name not in d.api.call_attrs]
    return Form("ops", d.api.functional, tuple(tensors) + tuple(d.api.call_attrs) + tuple(made))


def _signature(d: OpDef, form: Form) -> inspect.Signature:
    names = {a.name: a for a in d.attrs}
    params, keyword_only = [], False
    for p in form.params:
        star = p.startswith("*")
        pname, _, attr = p.lstrip("*").partition("=")
        attr = attr or pname
        if star:
            params.append(inspect.Parameter(pname, inspect.Parameter.VAR_POSITIONAL))
            keyword_only = True
        elif attr in names:
            kind = inspect.Parameter.KEYWORD_ONLY if keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
            required = names[attr].default is REQUIRED and attr not in dict(form.fixed)
            default = names[attr].default
            default = None if isinstance(default, (tuple, list)) or default is REQUIRED else default
            params.append(inspect.Parameter(pname, kind, **({} if required else {"default": default})))
        else:
            params.append(inspect.Parameter(pname, inspect.Parameter.POSITIONAL_OR_KEYWORD))
    return inspect.Signature(params)


def function(d: OpDef, form: Form):
    """`form` of row `d` as a function of MindSpore's signature, calling P.<d.name>."""
    cls = getattr(operations, d.name)
    names = {a.name for a in d.attrs}

    def fn(*args, **kwargs):
        tensors, attrs = form.bind(names, args, kwargs)
        made = {k: v for k, v in attrs.items() if k not in d.api.call_attrs}
        call = {k: v for k, v in attrs.items() if k in d.api.call_attrs}
        return cls(**made)(*tensors, **call)

    where = form.where if form.where != "Tensor" else "ops"
    fn.__name__ = fn.__qualname__ = form.name
    fn.__module__ = f"graphkernel.{where}"
    fn.__signature__ = _signature(d, form)
    fn.__doc__ = f"{where}.{form.name}{fn.__signature__}: P.{d.name}. {cls.__doc__}"
    return fn


def namespace(where: str) -> dict:
    """name -> function of one namespace, from every row of the op table."""
    out = {}
    for d in OPS.values():
        if where == "ops" and d.api.functional:
            out[d.api.functional] = function(d, default_form(d))
        for form in d.api.forms:
            if form.where == where:
                out[form.name] = function(d, form)
    return out


def generated_names() -> dict:
    """What this module and Tensor generate from the op table: "functions" (their paths, "ops.sum",
    "mint.nn.functional.softmax") and "methods" (Tensor method names); tests/mindspore_data/record.py
    asks MindSpore 2.10 about each."""
    methods = {d.api.method for d in OPS.values() if d.api.method}
    methods |= {f.name for d in OPS.values() for f in d.api.forms if f.where == "Tensor"}
    return {"functions": sorted(f"{w}.{n}" for w in SPACES for n in namespace(w)), "methods": sorted(methods)}
