"""low_precision (--enable_low_precision, MindSpore 1.x-2.2's flag): fused kernels compute in float16.

Every composite whose subgraph holds a float32 value is rewritten so its work runs in float16 while its
interface stays as it was: each float32 input is cast to float16 where the kernel reads it, each op
computes on float16 operands (a float32 scalar constant becomes float16; a Cast to float32 becomes a Cast
to float16, or nothing when its input is float16 already) and each float32 result is cast back to
float32 where the kernel writes it:

    before:  Composite(x: f32, y: f32) { Mul(x, y) -> Add(_, 1.0) } -> f32
    after:   Composite(x: f32, y: f32) { Cast(x, f16), Cast(y, f16) -> Mul -> Add(_, f16 1.0) -> Cast(_, f32) } -> f32

So the casts show in the kernel table, and the results are float16 arithmetic's: within float16's tolerance
of the reference, not equal to the float32 path. This is the one switch with which fusion changes a
result (docs/precision.md). A reduction still accumulates a float16 input in float32 (kernels/emitters.py).
A composite whose rewrite would change a constant's value to an infinity, or whose ops refuse float16,
stays float32 (the fusion log says which). Ops outside composites (single-op kernels) keep their dtypes.
"""
from __future__ import annotations

import numpy as np

from ir.builder import constant_array
from ir.dtypes import DType
from ir.errors import IRError
from ir.graph import Graph, Literal, Node, Value
from ir.ops import make_node
from graphkernel.settings.options import CompileOptions
from graphkernel.passes.pass_context import PassContext

F16, F32 = DType.float16, DType.float32
STAGE = "low_precision"


class _Refused(Exception):
    """The composite stays float32; the message says why."""


def low_precision(graph: Graph, opts: CompileOptions) -> Graph:
    log = PassContext.current().log

    def visit(node: Node, inputs, emit):
        sub = node.subgraph
        if sub is None or not _has_float32(sub) or any(n.subgraph is not None for n in sub.nodes):
            return None
        try:
            lowered = lower_to_float16(sub)
        except _Refused as e:
            log.add(STAGE, (node.name,), False, f"stays float32: {e}")
            return None
        log.add(STAGE, (node.name,), True, "computes in float16")
        return node.replace(inputs=inputs, subgraph=lowered)

    return graph.rewrite(visit)


def _has_float32(sub: Graph) -> bool:
    return any(v.dtype == F32 for v in sub.inputs) or any(t.dtype == F32 for n in sub.nodes for t in n.types)


def lower_to_float16(sub: Graph) -> Graph:
    """The subgraph computing in float16, with its input and output types unchanged."""
    inputs = Graph.with_inputs([v.type for v in sub.inputs], [v.node.name for v in sub.inputs])
    nodes: list[Node] = []

    def add(node: Node) -> Node:
        nodes.append(node)
        return node

    def cast(v: Value, dtype: DType) -> Value:
        return add(make_node("Cast", (v,), {"dtype": dtype}, name=f"low_precision/Cast-{len(nodes)}")).out

    values = {old: (cast(new, F16) if new.dtype == F32 else new) for old, new in zip(sub.inputs, inputs)}
    for node in sub.nodes:
        ins = tuple(values[v] for v in node.inputs)
        if node.op == "Const" and node.out.dtype == F32:
            array = node.attr("value").array
            half = constant_array(array, F16)
            if not np.array_equal(np.isfinite(half), np.isfinite(np.asarray(array, np.float32))):
                raise _Refused(f"the constant {array.reshape(-1)[:1]} of {node.name or 'a Const'} overflows float16")
            values[node.out] = add(make_node("Const", (), {"value": Literal(half)}, name=node.name)).out
            continue
        if node.op == "Cast" and node.attr("dtype") == F32:
            values[node.out] = ins[0] if ins[0].dtype == F16 else cast(ins[0], F16)
            continue
        try:
            new = add(make_node(node.op, ins, node.attr_dict, name=node.name))
        except IRError as e:
            raise _Refused(f"{node.op} in float16: {e}") from None
        values.update(zip(node.outputs, new.outputs))
    outputs = []
    for old in sub.outputs:
        v = values[old]
        outputs.append(cast(v, old.dtype) if v.dtype != old.dtype else v)
    return Graph(inputs, nodes, outputs)
