"""The ops a traced program uses to ask for gradients; the autodiff stage (ir/autodiff.py) removes them.

    Gradient(seed_0..seed_k-1, wrt_0..wrt_m-1[, sens_0..sens_k-1]) {seeds=k, sens}
        one result per wrt value, of its type: the gradient of the seeds (the function's outputs) with
        respect to it, each seed weighted by its sens (given as inputs when `sens`, else 1: a seed must
        then hold one element). The forward computation is already in the graph, before this node.
    StopGradient(x)
        x itself; no gradient flows through it.

A Gradient node has no reference: the pipeline replaces every one before anything runs.
"""
from __future__ import annotations

from ir.errors import IRError, ShapeError
from ir.ops.checks import fmt, is_bool, is_int
from ir.ops.registry import Api, Attr, Form, OpDef, Pattern, Precision, no_gradient, register


def split_gradient_inputs(inputs, attrs):
    """(seeds, wrt, sens) of a Gradient node's inputs."""
    k = attrs["seeds"]
    m = len(inputs) - 2 * k if attrs["sens"] else len(inputs) - k
    return inputs[:k], inputs[k:k + m], inputs[k + m:]


def _gradient_infer(types, attrs):
    k = attrs["seeds"]
    if k < 1:
        raise ShapeError(f"needs at least one seed, got seeds={k}")
    seeds, wrt, sens = split_gradient_inputs(types, attrs)
    if len(wrt) < 1:
        raise ShapeError(f"needs at least one value to differentiate with respect to ({len(types)} inputs, "
                         f"seeds={k}, sens={attrs['sens']})")
    for i, t in enumerate(seeds):
        if not t.dtype.is_float:
            raise ShapeError(f"seed {i} is {t}: only a float result has a gradient")
        if not attrs["sens"] and t.size != 1:
            raise ShapeError(f"seed {i} is {t}, not a scalar: a gradient without sens needs one element")
    for i, (t, s) in enumerate(zip(seeds, sens)):
        if s != t:
            raise ShapeError(f"sens {i} is {s}, the output it weights is {t}: they must match")
    for i, t in enumerate(wrt):
        if not t.dtype.is_float:
            raise ShapeError(f"input {i} to differentiate is {t} {fmt(t.shape)}: only a float value has a gradient")
    return tuple(wrt)


def _no_reference(arrays, attrs):
    raise IRError("a Gradient node has no reference: the autodiff stage replaces it before anything runs")


register(OpDef("Gradient", Pattern.OPAQUE, None, _gradient_infer, _no_reference,
               (Attr("seeds", check=is_int), Attr("sens", False, is_bool)),
               doc="the gradient of its seeds with respect to its wrt inputs; replaced by the autodiff stage",
               domain="any", precision=Precision("gray", True, "replaced before precision runs"),
               api=Api(primitive=False)))

register(OpDef("StopGradient", Pattern.OPAQUE, 1, lambda types, attrs: (types[0],),
               lambda a, attrs: a[0].copy(), doc="its input; no gradient flows through it", domain="any",
               precision=Precision("gray", True, "removed by the autodiff stage"),
               grad=no_gradient, api=Api(functional="stop_gradient", forms=(Form("ops", "stop_gradient", ("value",)),))))


class BpropGraph:
    """A Cell's own bprop as an attribute: the graph (inputs..., out..., dout..., parameters...) ->
    (one cotangent per input); equal by identity, printed as an opaque token the parser refuses."""

    __slots__ = ("graph", "label")

    def __init__(self, graph, label: str):
        object.__setattr__(self, "graph", graph)
        object.__setattr__(self, "label", label)

    def __setattr__(self, key, value):
        raise AttributeError("BpropGraph is immutable")

    def __eq__(self, other):
        return isinstance(other, BpropGraph) and other.graph is self.graph

    def __hash__(self):
        return hash(id(self.graph))

    def ir_text(self) -> str:
        return f"<bprop {self.label}@{id(self.graph):#x}>"

    __repr__ = ir_text


def _bprop_infer(types, attrs):
    n, m = attrs["inputs"], attrs["outputs"]
    if n + m > len(types):
        raise ShapeError(f"inputs={n} and outputs={m} need {n + m} operands, got {len(types)}")
    return tuple(types[n:n + m])


def _bprop_grad(b, node, douts):
    """The Cell's bprop graph, inlined on (inputs, out, dout, parameters); the construct's own outputs
    (operands n..n+m) get no cotangent, so nothing flows through the ops of construct."""
    n, m = node.attr("inputs"), node.attr("outputs")
    graph = node.attr("bprop").graph
    args, outs, params = node.inputs[:n], node.inputs[n:n + m], node.inputs[n + m:]
    douts = [d if d is not None else b.fill(0, v.type) for v, d in zip(outs, douts)]
    values = dict(zip(graph.inputs, (*args, *outs, *douts, *params)))
    for inner in graph.nodes:
        added = b.add(inner.replace(inputs=tuple(values[v] for v in inner.inputs)))
        values.update(zip(inner.outputs, added.outputs))
    return tuple(values[v] for v in graph.outputs) + (None,) * (m + len(params))


register(OpDef("Bprop", Pattern.OPAQUE, None, _bprop_infer, lambda a, attrs: tuple(
                   x.copy() for x in a[attrs["inputs"]:attrs["inputs"] + attrs["outputs"]]),
               (Attr("inputs", check=is_int), Attr("outputs", check=is_int), Attr("bprop")),
               doc="the results of a Cell whose gradient its own bprop gives; removed by the autodiff stage",
               domain="any", grad=_bprop_grad, precision=Precision("gray", True, "removed by the autodiff stage"),
               api=Api(primitive=False)))
