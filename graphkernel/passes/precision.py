"""precision(graph, opts): Casts per precision_mode, so chosen float32 ops run in float16 while the
graph's inputs and outputs keep their dtypes (graphkernel/precision/modes.py has the table of modes).
The modes that name bfloat16 (allow_fp32_to_bf16, allow_mix_precision_bf16) decide as their float16
twins and lower to bfloat16: read "float16" below as the mode's low dtype (`low_dtype`).

Note on the algorithm. One walk in execution order gives every node a decision:
    F16     its float32 inputs are read in float16, so its float32 results come out float16
            (force_fp16; an op lacking float32 under allow_fp32_to_fp16; a white-list op; a gray op
            whose float inputs include a LOWERED value and no KEPT one)
    KEEP    every input is read in its original dtype (black list; allow_fp32_to_fp16 for ops that
            have float32; a gray op with a KEPT input)
    FOLLOW  a gray op fed by NEUTRAL values only: original dtypes, and its results stay NEUTRAL
    AS_IS   an op whose result dtype is an attribute (Cast) under force_fp16 or allow_fp32_to_fp16:
            reads its input as it is (casting it to float16 first would only lose bits)
    a customize_dtypes rule: input i read in the rule's i-th dtype, result i cast to its i-th dtype
Every original value keeps its representations {dtype: value} and a state:
    LOWERED  float16 standing for a float32 value        KEPT  float32 kept on purpose
    NEUTRAL  graph inputs, constants, results of Casts (their dtype is the user's) and FOLLOW ops
Reading a value in a dtype it lacks emits one Cast, shared by every reader; graph outputs are read in
their original dtype. In a training graph, what uses the gradients outside the backward (loss-scale
unscaling and overflow check, clipping, the optimizer's updates) is KEEP: master weights, optimizer state
and updates stay float32 (ir/autodiff.py after_gradients), inside the branches of an If too (an optimizer
under `if not overflow:` reads the gradients as captures: those count as gradients in the branch).

A primitive an expander made from a composite op (named `.../Softmax-op3/Exp-1`, or `Softmax/Exp-1`
when the composite had no name) is governed by that composite op's list or customize_dtypes entry when
it has one (outermost first): the black LayerNorm keeps its whole expansion float32, where float16 would
overflow the sum of squares of a row above 65504. The Cast pairs left where a float16 op feeds a float32 one are plain
ops: simplify removes the exact ones and fusion fuses the rest.
"""
from __future__ import annotations

import re

from ir.autodiff import gradient_taint
from ir.dtypes import DType
from ir.errors import IRError
from ir.graph import Graph, Node, Value
from ir.ops import OPS, branches, is_host, make_node
from ir.ops.control import with_branches
from graphkernel.settings.options import CompileOptions
from graphkernel.precision import (ALLOW_FP32_TO_FP16, BLACK, FORCE_FP16, GRAY, WHITE,
                                   PrecisionConfigError, default_list, lacks_fp32, low_dtype, pass_runs, rules_of)
from graphkernel.precision.lists import default_lists

F16, BF16, F32 = DType.float16, DType.bfloat16, DType.float32
HALVES = (F16, BF16)
LOWERED, KEPT, NEUTRAL = "lowered", "kept", "neutral"
F16_DECISION, KEEP, FOLLOW, AS_IS = "f16", "keep", "follow", "as-is"
_SCOPE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)(?:-(?:op)?\d+)?$")


def expanded_from(node: Node) -> tuple[tuple[str, str], ...]:
    """(op type, scope name) of each composite op `node` was expanded from, outermost first."""
    parts = node.name.split("/")
    out = []
    for i, part in enumerate(parts[:-1]):
        m = _SCOPE.match(part)
        if m and m.group(1) in OPS and OPS[m.group(1)].expandable:
            out.append((m.group(1), "/".join(parts[: i + 1])))
    return tuple(out)


class _Lowering:
    """The state of one walk: the new nodes, each old value's representations and state."""

    def __init__(self, graph: Graph, opts: CompileOptions, tainted_inputs=()):
        self.mode = rules_of(opts.precision_mode)
        self.low = low_dtype(opts.precision_mode)   # float16, or bfloat16 under the modes naming it
        self.lists = {**default_lists(), **(opts.mixlist.lists() if opts.mixlist else {})}
        self.rules = opts.customize_dtypes
        self.nodes: list[Node] = []
        self.reps: dict[Value, dict[DType, Value]] = {v: {v.dtype: v} for v in graph.inputs}
        self.state: dict[Value, str] = {v: NEUTRAL for v in graph.inputs}
        self.opts = opts
        self.after_gradients, self.tainted = gradient_taint(graph, tainted_inputs)

    def read(self, v: Value, dtype: DType) -> Value:
        """`v` in `dtype`, casting its first representation once if it has none in that dtype."""
        reps = self.reps[v]
        if dtype not in reps:
            first = next(iter(reps.values()))
            reps[dtype] = self.emit_cast(first, dtype, v.node.name or v.node.op)
        return reps[dtype]

    def emit_cast(self, v: Value, dtype: DType, base: str) -> Value:
        node = make_node("Cast", (v,), {"dtype": dtype}, name=f"{base}/Cast-to-{dtype}")
        self.nodes.append(node)
        return node.out

    def list_of(self, node: Node) -> str:
        """The node's list, or the list of the outermost black or white composite it was expanded from."""
        for op in [op for op, _ in expanded_from(node)] + [node.op]:
            lst = self.lists.get(op, default_list(op))
            if lst != GRAY or op == node.op:
                return lst

    def decide(self, node: Node) -> str:
        if node.subgraph is not None or not node.inputs:
            return FOLLOW
        if is_host(node):  # a host op (PyFunc, host_scope) runs as declared/written, in every mode
            return KEEP
        if node in self.after_gradients:   # unscaling, overflow check, clipping, the optimizer: float32
            return KEEP
        fixed_dtype = "dtype" in node.attr_dict
        if self.mode == FORCE_FP16:
            return AS_IS if fixed_dtype else F16_DECISION
        if self.mode == ALLOW_FP32_TO_FP16:
            ops = [op for op, _ in expanded_from(node)] + [node.op]
            return F16_DECISION if any(lacks_fp32(op) for op in ops) else AS_IS if fixed_dtype else KEEP
        lst = self.list_of(node)
        if lst == WHITE:
            return F16_DECISION
        if lst == BLACK:
            return KEEP
        states = {self.state[v] for v in node.inputs if v.dtype.is_float}
        return KEEP if KEPT in states else F16_DECISION if LOWERED in states else FOLLOW

    def rule_for(self, node: Node):
        if self.rules is None:
            return None
        scopes = expanded_from(node)
        return self.rules.rule_for(node.name, tuple(op for op, _ in scopes) + (node.op,),
                                   tuple(name for _, name in scopes))

    def visit(self, node: Node) -> None:
        rule = self.rule_for(node)
        decision = KEEP if rule is not None else self.decide(node)
        inputs = tuple(self.read(v, self.input_dtype(v, i, decision, rule)) for i, v in enumerate(node.inputs))
        new = node if inputs == node.inputs else self.remake(node, inputs, rule)
        if branches(new):   # each branch on its own, knowing which captures carry gradients
            tainted = [k for k, v in enumerate(node.inputs[1:]) if v.node in self.tainted]
            new = with_branches(new, *(_precision(g, self.opts, [g.inputs[k] for k in tainted])
                                       for g in branches(new)))
        self.nodes.append(new)
        for i, (old, value) in enumerate(zip(node.outputs, new.outputs)):
            want = rule.output_dtype(i) if rule is not None else None
            if want is not None and value.dtype in (*HALVES, F32) and value.dtype != want:
                value = self.emit_cast(value, want, node.name or node.op)
            self.reps[old] = {value.dtype: value}
            self.state[old] = self.result_state(old, value, decision, node)

    def input_dtype(self, v: Value, i: int, decision: str, rule) -> DType:
        if rule is not None:
            want = rule.input_dtype(i)
            return want if want is not None and v.dtype in (*HALVES, F32) else v.dtype
        if decision == F16_DECISION and v.dtype == F32:
            return self.low
        if decision == AS_IS:
            return next(iter(self.reps[v]))   # its first representation
        return v.dtype

    def remake(self, node: Node, inputs: tuple[Value, ...], rule) -> Node:
        try:
            return make_node(node.op, inputs, node.attr_dict, name=node.name)
        except IRError as e:
            if rule is None:
                raise
            raise PrecisionConfigError(f"customize_dtypes file {self.rules.path!r}, line {rule.line}: "
                                       f"cannot apply to {node.name or node.op}: {e}") from None

    def result_state(self, old: Value, value: Value, decision: str, node: Node) -> str:
        if old.dtype == F32 and value.dtype == self.low:
            return LOWERED
        if old.dtype == F32 and decision == KEEP and "dtype" not in node.attr_dict:
            return KEPT
        return NEUTRAL

    def finish(self, graph: Graph) -> Graph:
        outputs = tuple(self.read(v, v.dtype) for v in graph.outputs)
        return Graph(graph.inputs, self.nodes, outputs)


def precision(graph: Graph, opts: CompileOptions) -> Graph:
    """The graph with Casts placed per opts.precision_mode, the lists and customize_dtypes; inside an If,
    each branch the same way (its captures that carry gradients count as gradients inside it)."""
    if not pass_runs(opts.precision_mode):
        return graph
    return _precision(graph, opts, ())


precision.handles_branches = True   # the pipeline does not run it inside branches itself


def _precision(graph: Graph, opts: CompileOptions, tainted_inputs) -> Graph:
    walk = _Lowering(graph, opts, tainted_inputs)
    for node in graph.nodes:
        walk.visit(node)
    return walk.finish(graph)
