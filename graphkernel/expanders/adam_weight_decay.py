"""AdamWeightDecay(var, m, v, lr, beta1, beta2, epsilon, decay, g) -> (var', m', v') in float32, each
rounded once to its input's dtype (ir/ops/updates.py): one elementwise kernel, which writes the three
Parameters in place when the step assigns them (kernels/in_place.py)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.dtypes import DType
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


@expands("AdamWeightDecay")
def expand_adam_weight_decay(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    var, m, v, g = (b.cast(x, DType.float32) for x in (inputs[0], inputs[1], inputs[2], inputs[8]))
    lr, beta1, beta2, eps, decay = (x if x.shape == () else b.op("Reshape", x, shape=()) for x in inputs[3:8])
    one = b.scalar(1, DType.float32)
    m_new = b.op("Add", b.op("Mul", m, beta1), b.op("Mul", g, b.op("Sub", one, beta1)))
    v_new = b.op("Add", b.op("Mul", v, beta2), b.op("Mul", b.op("Mul", g, g), b.op("Sub", one, beta2)))
    update = b.op("Add", b.op("RealDiv", m_new, b.op("Add", b.op("Sqrt", v_new), eps)), b.op("Mul", decay, var))
    var_new = b.op("Sub", var, b.op("Mul", lr, update))
    return tuple(b.cast(x, t.dtype) for x, t in zip((var_new, m_new, v_new), node.types))
