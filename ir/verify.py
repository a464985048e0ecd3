"""`verify(graph)`: the IR's well-formedness checker, run after every pass in tests.

Checks, in one pass over the nodes (no recursion per node; a composite's subgraph is checked as a
graph of its own, and composites may not nest):
  - graph inputs are distinct results of "Input" nodes, which do not appear among the nodes;
  - every node appears once, and reads only graph inputs and results of earlier nodes of this graph
    (not later ones: use before def; not another graph's: foreign values);
  - graph outputs are defined;
  - every op is registered under its canonical name, its attrs are exactly what `make_node` makes of
    them (checked and canonical) and its result types exactly what `make_node` infers;
  - a Composite holds a verified subgraph whose input types are the composite's input types and whose
    output types are the composite's result types;
  - an If holds two verified branches (closed graphs, no Assign among their nodes) taking the types
    of its captures and returning its result types; it is not inside a composite.
Errors are VerifyError naming the node by position, op and name. A primitive's signature (op, attrs,
input and result types) found well-formed once is not inferred again (`_WELL_FORMED`), so verifying
after every pass stays cheap on big graphs.
"""
from __future__ import annotations

import struct

from ir.errors import IRError, VerifyError
from ir.graph import Graph, Node, TensorType, Value
from ir.ops import branches, canonical_name, get, make_node
from ir.printer import describe

COMPOSITE = "Composite"


def _where(node: Node, position: int, context: str) -> str:
    return f"{context}node {position} {describe(node)}"


class _Where:
    """`_where` made only when a message needs it: verify runs after every pass on every node."""

    __slots__ = ("node", "position", "context")

    def __init__(self, node: Node, position: int, context: str):
        self.node, self.position, self.context = node, position, context

    def __str__(self) -> str:
        return _where(self.node, self.position, self.context)


# Signatures of primitive nodes found well-formed: whether a primitive is well-formed depends only on its
# op, attrs, input types, result types and having no subgraph, so a node of a known signature (a rebuilt copy, the same op
# repeated down a chain, the next pass's graph) is not inferred again. Bounded: cleared when full.
_WELL_FORMED: set = set()
_WELL_FORMED_MAX = 1 << 16


def _typed(value):
    """An attr value as a key that tells types apart: True, 1, 1.0 and -0.0 are equal in Python, but only
    some are a valid attr (a perm of -0.0 must not pass because a perm of 0 did); floats by their bits."""
    if isinstance(value, tuple):
        return tuple(_typed(v) for v in value)
    if isinstance(value, float):
        return float, struct.pack("<d", value)
    return type(value), value


def _signature(node: Node) -> tuple:
    attrs = tuple((key, _typed(value)) for key, value in node.attrs)
    return node.op, attrs, tuple(v.type for v in node.inputs), node.types, node.subgraph is None


def _types(values) -> str:
    return "(" + ", ".join(str(v.type) for v in values) + ")"


def _check_inputs(graph: Graph, context: str) -> set[Value]:
    defined: set[Value] = set()
    for i, v in enumerate(graph.inputs):
        if not isinstance(v, Value):
            raise VerifyError(f"{context}graph input {i} is {v!r}, not an IR Value")
        if v.node.op != "Input" or v.node.inputs or len(v.node.outputs) != 1:
            raise VerifyError(f"{context}graph input {i} is a result of {describe(v.node)}, not of an Input node")
        if v in defined:
            raise VerifyError(f"{context}graph input {i} appears twice among the graph inputs")
        if not isinstance(v.type, TensorType):
            raise VerifyError(f"{context}graph input {i} has type {v.type!r}, not a TensorType")
        defined.add(v)
    return defined


def _explain_undefined(v, position_of: dict[Node, int]) -> str:
    if not isinstance(v, Value):
        return f"is {v!r}, not an IR Value"
    if v.node in position_of:
        if not 0 <= v.index < len(v.node.outputs):
            return f"refers to result {v.index} of node {position_of[v.node]}, which has no such result"
        return (f"is result {v.index} of node {position_of[v.node]} {describe(v.node)}, "
                "which does not come before this use (use before def)")
    return f"is a value from another graph (a result of {describe(v.node)} that this graph does not define)"


def _check_primitive(node: Node, where: str) -> None:
    try:
        opdef = get(node.op)
    except IRError as e:
        raise VerifyError(f"{where}: {e}") from None
    if node.op != opdef.name:
        raise VerifyError(f"{where}: op {node.op} is an alias; the IR spells it {canonical_name(node.op)}")
    if node.subgraph is not None:
        raise VerifyError(f"{where}: only a {COMPOSITE} node may hold a subgraph")
    try:
        expected = make_node(node.op, node.inputs, node.attr_dict)
    except Exception as e:  # a bad attr may make a check or an inference fail in any way
        raise VerifyError(f"{where}: {type(e).__name__}: {e}") from e
    if expected.attrs != node.attrs:
        raise VerifyError(f"{where}: attrs {dict(node.attrs)} are not what the op makes of them: "
                          f"{dict(expected.attrs)} (checked, with defaults and canonical axes)")
    if expected.types != node.types:
        raise VerifyError(f"{where}: result types ({', '.join(map(str, node.types))}) differ from the "
                          f"inferred ({', '.join(map(str, expected.types))}) for inputs {_types(node.inputs)}")


def _check_known_primitive(node: Node, where) -> None:
    """`_check_primitive`, skipped for a signature found well-formed before."""
    signature = _signature(node)
    try:
        if signature in _WELL_FORMED:
            return
    except TypeError:  # an unhashable attr: checked every time
        signature = None
    _check_primitive(node, where)
    if signature is not None:
        if len(_WELL_FORMED) >= _WELL_FORMED_MAX:
            _WELL_FORMED.clear()
        _WELL_FORMED.add(signature)


def _check_composite(node: Node, where: str, inside_composite: bool) -> None:
    sub = node.subgraph
    if inside_composite:
        raise VerifyError(f"{where}: a {COMPOSITE} may not be nested inside another composite's subgraph")
    if not isinstance(sub, Graph):
        raise VerifyError(f"{where}: a {COMPOSITE} node needs a subgraph, has {sub!r}")
    _verify(sub, f"{where}: in its subgraph: ", inside_composite=True)
    if tuple(v.type for v in node.inputs) != tuple(v.type for v in sub.inputs):
        raise VerifyError(f"{where}: input types {_types(node.inputs)} differ from its subgraph's input "
                          f"types {_types(sub.inputs)}")
    if node.types != tuple(v.type for v in sub.outputs):
        raise VerifyError(f"{where}: result types ({', '.join(map(str, node.types))}) differ from its "
                          f"subgraph's output types {_types(sub.outputs)}")


def _check_branches(node: Node, where, inside_composite: bool) -> None:
    for label, branch in zip(("then", "else"), branches(node)):
        if inside_composite:
            raise VerifyError(f"{where}: an If may not be inside a composite's subgraph")
        _verify(branch, f"{where}: in its {label} branch: ", inside_composite=False)
        assign = next((n for n in branch.nodes if n.op == "Assign"), None)
        if assign is not None:
            raise VerifyError(f"{where}: its {label} branch holds an Assign ({describe(assign)}); a branch "
                              "returns a Parameter's new value and the enclosing graph assigns it")


def _verify(graph: Graph, context: str, inside_composite: bool) -> None:
    if not isinstance(graph, Graph):
        raise VerifyError(f"{context}expected a Graph, got {type(graph).__name__}")
    defined = _check_inputs(graph, context)
    input_nodes = {v.node for v in graph.inputs}
    position_of: dict[Node, int] = {}
    for i, node in enumerate(graph.nodes):
        if not isinstance(node, Node):
            raise VerifyError(f"{context}node {i} is {node!r}, not a Node")
        if node in position_of:
            raise VerifyError(f"{_where(node, i, context)}: the same node already appears as node "
                              f"{position_of[node]} (each value must be defined once)")
        position_of[node] = i
    for i, node in enumerate(graph.nodes):
        where = _Where(node, i, context)
        if node.op == "Input" or node in input_nodes:
            raise VerifyError(f"{where}: Input nodes belong in graph.inputs, not among the nodes")
        if not all(isinstance(t, TensorType) for t in node.types):
            raise VerifyError(f"{where}: result types {node.types!r} are not all TensorTypes")
        for k, v in enumerate(node.inputs):
            if not isinstance(v, Value) or v not in defined:
                raise VerifyError(f"{where}: input {k} {_explain_undefined(v, position_of)}")
        if node.op == COMPOSITE:
            _check_composite(node, where, inside_composite)
        else:
            _check_known_primitive(node, where)
            _check_branches(node, where, inside_composite)
            _check_bucket(node, where)
        defined.update(node.outputs)
    for k, v in enumerate(graph.outputs):
        if not isinstance(v, Value) or v not in defined:
            raise VerifyError(f"{context}graph output {k} {_explain_undefined(v, position_of)}")
    _check_assigns(graph, context, position_of, inside_composite)


def _check_bucket(node: Node, where) -> None:
    """An AllReduceWait of a token its graph's AllReduceStart made gives back that start's gradients: the
    shapes it declares are theirs, in their order (its dtypes are the bucket's: float32 or float64)."""
    token = node.inputs[0] if node.op == "AllReduceWait" and node.inputs else None
    if token is None or token.node.op != "AllReduceStart":
        return
    started = [tuple(v.shape) for v in token.node.inputs]
    declared = [tuple(s) for s in node.attr("shapes")]
    if declared != started:
        raise VerifyError(f"{where}: declares the bucket's gradients of shapes {declared}, its AllReduceStart "
                          f"started gradients of shapes {started}")


def _check_assigns(graph: Graph, context: str, position_of: dict, inside_composite: bool) -> None:
    """An Assign writes a graph input; its result is a graph output, after the others, read by no node."""
    assigns = [n for n in graph.nodes if n.op == "Assign"]
    if not assigns:
        return
    if inside_composite:
        raise VerifyError(f"{_where(assigns[0], position_of[assigns[0]], context)}: an Assign may not be "
                          "inside a composite")
    inputs = set(graph.inputs)
    written: dict[Value, Node] = {}
    for node in assigns:
        where = _where(node, position_of[node], context)
        ref = node.inputs[0]
        if ref not in inputs:
            raise VerifyError(f"{where}: input 0 must be a graph input (the Parameter it updates), is a "
                              f"result of {ref.node.op}")
        if ref in written:
            raise VerifyError(f"{where}: graph input {ref.node.attr('index')} is already assigned by "
                              f"node {position_of[written[ref]]}")
        written[ref] = node
        if node.out not in graph.outputs:
            raise VerifyError(f"{where}: its result must be a graph output (else the update is lost)")
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            if v.node.op == "Assign":
                raise VerifyError(f"{_where(node, i, context)}: reads the result of an Assign (node "
                                  f"{position_of[v.node]}); read the assigned value instead")
    kinds = [v.node.op == "Assign" for v in graph.outputs]
    if kinds != sorted(kinds):
        raise VerifyError(f"{context}graph output {kinds.index(False, kinds.index(True))} follows an Assign: "
                          "the Assigns come after the outputs the caller asked for")


def verify(graph: Graph) -> Graph:
    """Raise VerifyError if the graph breaks a rule of the IR; return it unchanged otherwise."""
    _verify(graph, "verify: ", inside_composite=False)
    return graph
