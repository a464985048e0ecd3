"""Updates of a graph's inputs: how a training step writes its Parameters.

    Assign(ref, value)
        value, of ref's type; `ref` is a graph input (a Parameter's) and the Assign's result is a graph
        output and nothing else reads it. Its meaning is the caller's: after the call, the input `ref`
        holds `value`. The numpy reference returns the new value (a fresh array) and the caller copies
        it into the input's array; the executor makes the kernel computing `value` write straight into
        the input's buffer when that is safe (kernels/lower.py) and copies it there otherwise.

    assigned_inputs(graph) -> [(output index, input index)]   every Assign among the outputs

Graph outputs that are Assigns come after the outputs the caller asked for. Nothing reads an Assign's
result, so every reader of the old value runs before it wherever the Assigns are placed; the executor
and the reference run them last. `verify` checks the rules (ir/verify.py).
"""
from __future__ import annotations

from ir.errors import ShapeError
from ir.ops.registry import Api, OpDef, Pattern, Precision, register


def _assign_infer(types, attrs):
    ref, value = types
    if value != ref:
        raise ShapeError(f"the value {value} must have the type of the input it replaces, {ref}")
    return (ref,)


register(OpDef(
    "Assign", Pattern.OPAQUE, 2, _assign_infer, lambda a, attrs: a[1].copy(),
    doc="the graph input `ref` takes `value` after the call (a Parameter update)",
    domain="any", api=Api(primitive=False), moves_data=True,
    # black: both inputs are read in their own dtype (float32 master weights stay float32)
    precision=Precision("black", True, "a Parameter keeps its dtype"),
    grad=lambda b, node, douts: (None, None)))


def assigned_inputs(graph) -> list[tuple[int, int]]:
    """(output index, input index) of every graph output that is an Assign, in output order."""
    position = {v: i for i, v in enumerate(graph.inputs)}
    return [(k, position[v.node.inputs[0]]) for k, v in enumerate(graph.outputs) if v.node.op == "Assign"]
