"""MindSpore's in-place optimizer primitives (ir/ops/optimizer_updates.py) as primitives in float32, each
result rounded once to its output's dtype: one elementwise kernel per update, which writes the
Parameters in place when the step assigns them (kernels/in_place.py)."""
from __future__ import annotations

from ir.builder import GraphBuilder
from ir.dtypes import DType
from ir.graph import Node, Value
from graphkernel.expanders.registry import expands


def _wide(b: GraphBuilder, x: Value) -> Value:
    return b.cast(x, DType.float32)


def _scalar(b: GraphBuilder, x: Value) -> Value:
    x = b.cast(x, DType.float32)
    return x if x.shape == () else b.op("Reshape", x, shape=())


def _out(b: GraphBuilder, node: Node, values) -> tuple[Value, ...]:
    return tuple(b.cast(x, t.dtype) for x, t in zip(values, node.types))


@expands("ApplyMomentum")
def expand_apply_momentum(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    var, acc, grad = (_wide(b, inputs[i]) for i in (0, 1, 3))
    lr, mom = _scalar(b, inputs[2]), _scalar(b, inputs[4])
    g = b.op("Mul", grad, b.scalar(node.attr("gradient_scale"), DType.float32))
    acc_new = b.op("Add", b.op("Mul", acc, mom), g)
    step = b.op("Add", g, b.op("Mul", acc_new, mom)) if node.attr("use_nesterov") else acc_new
    return _out(b, node, (b.op("Sub", var, b.op("Mul", lr, step)), acc_new))


@expands("Adam")
def expand_adam(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    var, m, v, g = (_wide(b, inputs[i]) for i in (0, 1, 2, 9))
    b1p, b2p, lr, b1, b2, eps = (_scalar(b, x) for x in inputs[3:9])
    one = b.scalar(1, DType.float32)
    m_new = b.op("Add", b.op("Mul", b1, m), b.op("Mul", b.op("Sub", one, b1), g))
    v_new = b.op("Add", b.op("Mul", b2, v), b.op("Mul", b.op("Sub", one, b2), b.op("Mul", g, g)))
    step = b.op("RealDiv", b.op("Mul", lr, b.op("Sqrt", b.op("Sub", one, b2p))), b.op("Sub", one, b1p))
    top = m_new
    if node.attr("use_nesterov"):
        top = b.op("Add", b.op("Mul", b1, m_new), b.op("Mul", b.op("Sub", one, b1), g))
    var_new = b.op("Sub", var, b.op("RealDiv", b.op("Mul", step, top), b.op("Add", b.op("Sqrt", v_new), eps)))
    return _out(b, node, (var_new, m_new, v_new))


@expands("FusedCastAdamWeightDecay")
def expand_fused_cast_adam_weight_decay(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    var, m, v = (_wide(b, x) for x in inputs[:3])
    lr, b1, b2, eps, decay, norm = (_scalar(b, x) for x in (*inputs[3:8], inputs[9]))
    g = b.op("RealDiv", _wide(b, inputs[8]), norm)
    one = b.scalar(1, DType.float32)
    m_new = b.op("Add", b.op("Mul", m, b1), b.op("Mul", g, b.op("Sub", one, b1)))
    v_new = b.op("Add", b.op("Mul", v, b2), b.op("Mul", b.op("Mul", g, g), b.op("Sub", one, b2)))
    update = b.op("Add", b.op("RealDiv", m_new, b.op("Add", b.op("Sqrt", v_new), eps)), b.op("Mul", decay, var))
    return _out(b, node, (b.op("Sub", var, b.op("Mul", lr, update)), m_new, v_new))


@expands("LambApplyOptimizerAssign")
def expand_lamb_apply_optimizer_assign(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    g, v, m, var = (_wide(b, x) for x in inputs[:4])
    b1, sub1, b2, sub2, eps, steps, use, decay = (_scalar(b, x) for x in inputs[4:])
    one = b.scalar(1, DType.float32)
    v_new = b.op("Add", b.op("Mul", v, b2), b.op("Mul", b.op("Mul", g, g), sub2))
    m_new = b.op("Add", b.op("Mul", m, b1), b.op("Mul", g, sub1))
    b1_t = b.op("Exp", b.op("Mul", b.op("Log", b1), steps))
    b2_t = b.op("Exp", b.op("Mul", b.op("Log", b2), steps))
    m_hat = b.op("RealDiv", m_new, b.op("Sub", one, b1_t))
    v_hat = b.op("RealDiv", v_new, b.op("Sub", one, b2_t))
    update = b.op("Add", b.op("RealDiv", m_hat, b.op("Add", b.op("Sqrt", v_hat), eps)),
                  b.op("Mul", b.op("Mul", var, decay), use))
    return _out(b, node, (update, v_new, m_new))


@expands("LambApplyWeightAssign")
def expand_lamb_apply_weight_assign(node: Node, inputs: tuple[Value, ...], b: GraphBuilder) -> tuple[Value, ...]:
    w_norm, g_norm, lr = (_scalar(b, x) for x in inputs[:3])
    update, var = _wide(b, inputs[3]), _wide(b, inputs[4])
    zero, one = b.scalar(0, DType.float32), b.scalar(1, DType.float32)
    both = b.op("LogicalAnd", b.op("Greater", w_norm, zero), b.op("Greater", g_norm, zero))
    ratio = b.op("Select", both, b.op("RealDiv", w_norm, b.op("Select", both, g_norm, one)), one)
    return _out(b, node, (b.op("Sub", var, b.op("Mul", b.op("Mul", lr, ratio), update)),))
