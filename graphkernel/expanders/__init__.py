"""Expanders: composite ops (OpDef.expandable) rewritten into primitives, one module per op, as
MindSpore's Python expanders are.

    expand(graph, opts): every node whose op is expandable and `opts.expand_enabled(op)` is replaced by
    EXPANDERS[op](node, inputs, b) -> the values standing for the node's results
    (repeated until no such node is left: an expansion may itself hold expandable ops)

`b` is an `ir.GraphBuilder` emitting into the rewritten graph, its nodes named after the node replaced
(`<node name>/<Op>-<k>`, k counting within one expansion: MindSpore scope names, metadata only).

Every expansion is checked: its result types must equal the types the op inferred, else an IRError names
the expander. Disabled ops (`--disable_expand_ops=Softmax`) stay as opaque single-op kernels, and so do the ops whose row
says `expand_by_default=False` (BatchNorm) unless `--enable_expand_ops` names them.
"""
from __future__ import annotations

from typing import Callable

from ir.builder import GraphBuilder
from ir.errors import IRError
from ir.graph import Graph, Node, Value
from ir.ops import OPS
from graphkernel.expanders.adam_weight_decay import expand_adam_weight_decay
from graphkernel.expanders.arg_max_with_value import expand_arg_max_with_value
from graphkernel.expanders.batch_norm import expand_batch_norm
from graphkernel.expanders.batch_norm_grad import expand_batch_norm_grad
from graphkernel.expanders.bias_add import expand_bias_add
from graphkernel.expanders.bias_add_grad import expand_bias_add_grad
from graphkernel.expanders.dropout_grad import expand_dropout_grad
from graphkernel.expanders.equal_count import expand_equal_count
from graphkernel.expanders.erfc import expand_erfc
from graphkernel.expanders.extremum_grad import expand_maximum_grad, expand_minimum_grad
from graphkernel.expanders.float_status import expand_float_status, expand_get_float_status, expand_zeros
from graphkernel.expanders.fast_gelu import expand_fast_gelu
from graphkernel.expanders.fast_gelu_grad import expand_fast_gelu_grad
from graphkernel.expanders.gelu import expand_gelu
from graphkernel.expanders.gelu_grad import expand_gelu_grad
from graphkernel.expanders.identity import expand_identity
from graphkernel.expanders.layer_norm import expand_layer_norm
from graphkernel.expanders.layer_norm_grad import expand_layer_norm_grad
from graphkernel.expanders.log_softmax import expand_log_softmax
from graphkernel.expanders.log_softmax_grad import expand_log_softmax_grad
from graphkernel.expanders.ones_like import expand_ones_like
from graphkernel.expanders.reduce_mean import expand_reduce_mean
from graphkernel.expanders.relu import expand_relu
from graphkernel.expanders.relu_grad import expand_relu_grad
from graphkernel.expanders.selection import expand_add_n, expand_argmax, expand_one_hot
from graphkernel.expanders.shape_ops import expand_reshape, expand_tile, expand_zeros_like
from graphkernel.expanders.sigmoid import expand_sigmoid
from graphkernel.expanders.sigmoid_cross_entropy import expand_sigmoid_cross_entropy
from graphkernel.expanders.sigmoid_cross_entropy_grad import expand_sigmoid_cross_entropy_grad
from graphkernel.expanders.sigmoid_grad import expand_sigmoid_grad
from graphkernel.expanders.softmax import expand_softmax
from graphkernel.expanders.softmax_grad import expand_softmax_grad
from graphkernel.expanders.softmax_grad_ext import expand_softmax_grad_ext
from graphkernel.expanders.sqrt_grad import expand_sqrt_grad
from graphkernel.expanders.softmax_cross_entropy import expand_softmax_cross_entropy
from graphkernel.expanders.softsign import expand_softsign
from graphkernel.expanders.sparse_softmax_cross_entropy import expand_sparse_softmax_cross_entropy
from graphkernel.expanders.square import expand_square
from graphkernel.expanders.square_sum_all import expand_square_sum_all
from graphkernel.expanders.squared_difference import expand_squared_difference
from graphkernel.expanders.strided_slice import expand_strided_slice
from graphkernel.expanders.tanh_grad import expand_tanh_grad
from graphkernel.settings.options import CompileOptions

Expander = Callable[[Node, tuple[Value, ...], GraphBuilder], tuple[Value, ...]]

EXPANDERS: dict[str, Expander] = {
    "ArgMaxWithValue": expand_arg_max_with_value,
    "BatchNorm": expand_batch_norm,
    "BatchNormGrad": expand_batch_norm_grad,
    "BiasAdd": expand_bias_add,
    "BiasAddGrad": expand_bias_add_grad,
    "DropoutGrad": expand_dropout_grad,
    "EqualCount": expand_equal_count,
    "FastGeLU": expand_fast_gelu,
    "FastGeLUGrad": expand_fast_gelu_grad,
    "Identity": expand_identity,
    "Erfc": expand_erfc,
    "OnesLike": expand_ones_like,
    "Softsign": expand_softsign,
    "SquareSumAll": expand_square_sum_all,
    "SquaredDifference": expand_squared_difference,
    "MaximumGrad": expand_maximum_grad,
    "MinimumGrad": expand_minimum_grad,
    "SigmoidCrossEntropyWithLogits": expand_sigmoid_cross_entropy,
    "SigmoidCrossEntropyWithLogitsGrad": expand_sigmoid_cross_entropy_grad,
    "SoftmaxCrossEntropyWithLogits": expand_softmax_cross_entropy,
    "SparseSoftmaxCrossEntropyWithLogits": expand_sparse_softmax_cross_entropy,
    "SqrtGrad": expand_sqrt_grad,
    "TanhGrad": expand_tanh_grad,
    "GeLU": expand_gelu,
    "GeLUGrad": expand_gelu_grad,
    "LayerNorm": expand_layer_norm,
    "LayerNormGrad": expand_layer_norm_grad,
    "LogSoftmax": expand_log_softmax,
    "LogSoftmaxGrad": expand_log_softmax_grad,
    "ReduceMean": expand_reduce_mean,
    "ReLU": expand_relu,
    "ReluGrad": expand_relu_grad,
    "Sigmoid": expand_sigmoid,
    "SigmoidGrad": expand_sigmoid_grad,
    "Softmax": expand_softmax,
    "SoftmaxGrad": expand_softmax_grad,
    "SoftmaxGradExt": expand_softmax_grad_ext,
    "Square": expand_square,
    "Squeeze": expand_reshape,
    "ExpandDims": expand_reshape,
    "Tile": expand_tile,
    "ZerosLike": expand_zeros_like,
    "AddN": expand_add_n,
    "AdamWeightDecay": expand_adam_weight_decay,
    "FloatStatus": expand_float_status,
    "NPUAllocFloatStatus": expand_zeros,
    "NPUClearFloatStatus": expand_zeros,
    "NPUClearFloatStatusV2": expand_zeros,
    "NPUGetFloatStatus": expand_get_float_status,
    "NPUGetFloatStatusV2": expand_get_float_status,
    "Argmax": expand_argmax,
    "OneHot": expand_one_hot,
    "StridedSlice": expand_strided_slice,
}

MAX_ROUNDS = 8  # expansions nest at most this deep


def _wanted(node: Node, opts: CompileOptions) -> bool:
    d = OPS.get(node.op)
    return (node.subgraph is None and d is not None and d.expandable
            and opts.expand_enabled(node.op, d.expand_by_default))


def expand_node(node: Node, inputs: tuple[Value, ...], emit) -> tuple[Value, ...]:
    """The expansion of one node, its result types checked against the node's."""
    expander = EXPANDERS.get(node.op)
    if expander is None:
        raise IRError(f"op {node.op} is marked expandable but graphkernel.expanders has no expander for it")
    results = tuple(expander(node, inputs, GraphBuilder(scope=node.name or node.op, emit=emit)))
    got = tuple(v.type for v in results)
    if got != node.types:
        where = f"{expander.__module__}.{expander.__name__}"
        raise IRError(f"expander {where} gave {', '.join(map(str, got)) or 'nothing'} for {node.op}"
                      f"{' (' + node.name + ')' if node.name else ''}, which infers "
                      f"{', '.join(map(str, node.types))}")
    return results


def expand(graph: Graph, opts: CompileOptions) -> Graph:
    """The graph with every enabled composite op replaced by primitives."""
    for _ in range(MAX_ROUNDS):
        if not any(_wanted(n, opts) for n in graph.nodes):
            return graph
        graph = graph.rewrite(lambda node, inputs, emit:
                              expand_node(node, inputs, emit) if _wanted(node, opts) else None)
    raise IRError(f"expansion did not finish after {MAX_ROUNDS} rounds: "
                  f"{sorted({n.op for n in graph.nodes if _wanted(n, opts)})} still expandable")
