"""Mixed compute for ONNX: an op graphkernel does not convert runs on the host through `onnx.reference`.

    load(model) with mix_compile_mode=True:
        CumSum node "c"  ->  PyFunc(x) {fn=<function onnx.CumSum['c']@0x...>, ...}  (pattern HOST)
                             fn: a one-node ReferenceEvaluator, fed the node's constant inputs too
    load(model) with mix_compile_mode off:
        OnnxImportError naming the op and node, saying mix_compile_mode=True would run it on the host

The node's output types come from ONNX shape inference on the one-node model at the call's input
shapes; when inference leaves a dim or a type unknown, from running the node once at trace time on
zeros of the input shapes. An op whose output shape depends on its data, such as NonZero, then fails
at run time with the PyFunc's "result has shape ..." error naming the node; a Shape or Size of such an
output, or of anything computed from it, is refused at compile time (it would fold a guess). A node
whose inputs are all constants is computed at once, as the Builder folds constant ops.
mix_compile_mode is read when the model is loaded.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ir.dtypes import DType
from ir.graph import TensorType
from graphkernel import context
from graphkernel.onnx.builder import Builder, NodeInfo, dtype_of, is_const, shape_of
from graphkernel.onnx.converters import lookup
from graphkernel.onnx.registry import Converter
from graphkernel.onnx.types import OnnxImportError, to_dtype, to_onnx_type


def find_converter(proto, version: int | None, name: str, opset: int) -> Converter:
    """Our converter for the node; else, with mix_compile_mode, one that runs it on the host."""
    try:
        return lookup(proto.op_type, proto.domain, version, name, opset)
    except OnnxImportError as e:
        if version is None:  # no schema for it: onnx.reference could not run it either
            raise
        if not context.get_context("mix_compile_mode"):
            raise OnnxImportError(f"{e}. Set context.set_context(mix_compile_mode=True) before loading to run "
                                  "it on the host (through onnx.reference) and the rest on the device") from None
    return Converter(proto.op_type, partial(run_on_host, proto=proto, opset=opset), (), 0)


class OnnxNodeFunction:
    """A one-node ReferenceEvaluator as a PyFunc's function: the dynamic inputs in, the outputs out."""

    def __init__(self, evaluator, const_feeds: dict, dynamic_names: list[str], out_dtypes: list[DType],
                 label: str):
        self.evaluator, self.const_feeds, self.dynamic_names = evaluator, const_feeds, dynamic_names
        self.out_dtypes = out_dtypes
        self.__qualname__ = label

    def __call__(self, *arrays):
        feeds = dict(self.const_feeds)
        feeds.update((n, np.array(a)) for n, a in zip(self.dynamic_names, arrays))
        outs = self.evaluator.run(None, feeds)
        return tuple(np.asarray(o, dtype=d.np) for o, d in zip(outs, self.out_dtypes))


def outer_scope_names(proto) -> tuple[str, ...]:
    """Names the node's subgraphs (If branches, Loop and Scan bodies, at any depth) read from the graph
    around the node: implicit inputs, which the one-node model must declare as graph inputs too."""
    from onnx import AttributeProto
    found: list[str] = []

    def subgraphs(node):
        for a in node.attribute:
            if a.type == AttributeProto.GRAPH:
                yield a.g
            elif a.type == AttributeProto.GRAPHS:
                yield from a.graphs

    def walk(graph, defined: set):
        defined = defined | {v.name for v in graph.input} | {t.name for t in graph.initializer}
        for node in graph.node:
            found.extend(n for n in node.input if n and n not in defined and n not in found)
            for sub in subgraphs(node):
                walk(sub, defined)
            defined = defined | set(node.output)

    for sub in subgraphs(proto):
        walk(sub, set())
    return tuple(n for n in found if n not in proto.input)


def _one_node_model(proto, inputs: list, opset: int):
    """A model of the node alone; `inputs` are its explicit inputs, then its outer-scope names' values."""
    from onnx import TypeProto, helper
    slots = list(proto.input) + list(outer_scope_names(proto))
    names = [n for n, x in zip(slots, inputs) if n and x is not None]
    graph_inputs = [helper.make_tensor_value_info(n, to_onnx_type(dtype_of(x)), list(shape_of(x)))
                    for n, x in zip(slots, inputs) if n and x is not None]
    outputs = [helper.make_value_info(n, TypeProto()) for n in proto.output if n]
    imports = [helper.make_opsetid("", opset)]
    if proto.domain not in ("", "ai.onnx"):
        imports.append(helper.make_opsetid(proto.domain, 1))
    graph = helper.make_graph([proto], f"host_{proto.op_type}", graph_inputs, outputs)
    return helper.make_model(graph, opset_imports=imports), names


def _inferred_types(model) -> list[TensorType] | None:
    """Static output types from ONNX shape inference, or None when any is unknown."""
    from onnx import shape_inference
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=True)
    except Exception:  # inference not implemented or failing for this op: fall back to a run
        return None
    types = []
    for vi in inferred.graph.output:
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if not tt.elem_type or not tt.HasField("shape") or None in dims:
            return None
        types.append(TensorType(tuple(dims), to_dtype(tt.elem_type, f"output {vi.name!r}")))
    return types


def _reference_run(n: NodeInfo, evaluator, feeds: dict, out_names: list[str], why: str) -> list[np.ndarray]:
    """The node's outputs computed by onnx.reference, each a tensor of one of our dtypes.

    onnx.reference checks little and fails in every way on a malformed node (IndexError, TypeError,
    ZeroDivisionError, its own RuntimeTypeError, ...): any failure is an OnnxImportError naming the node."""
    from onnx.helper import np_dtype_to_tensor_dtype
    try:
        with np.errstate(all="ignore"):  # as the interpreter: NaN and Inf are results, not warnings
            outs = evaluator.run(None, feeds)
    except Exception as e:
        raise n.error(f"onnx.reference failed running it on the host {why} ({type(e).__name__}: "
                      f"{str(e)[:300]})") from None
    arrays = []
    for out, name in zip(outs, out_names):
        if not isinstance(out, (np.ndarray, np.generic)) or out.dtype.kind not in "biuf":
            raise n.error(f"output {name!r} is a {type(out).__name__}, not a tensor graphkernel takes")
        to_dtype(np_dtype_to_tensor_dtype(out.dtype), f"{n.where()}: output {name!r}")
        arrays.append(np.asarray(out))
    return arrays


def _run_types(n: NodeInfo, evaluator, feeds: dict, out_names: list[str]) -> list[TensorType]:
    """Output types from one trial run (on zeros of the dynamic inputs)."""
    from onnx.helper import np_dtype_to_tensor_dtype
    outs = _reference_run(n, evaluator, feeds, out_names, "on zeros, to learn its output types")
    return [TensorType(o.shape, to_dtype(np_dtype_to_tensor_dtype(o.dtype), name))
            for o, name in zip(outs, out_names)]


def run_on_host(b: Builder, n: NodeInfo, proto, opset: int) -> list:
    """Convert node `n` into a PyFunc running it through onnx.reference (or its values, if constant)."""
    from onnx.reference import ReferenceEvaluator
    model, names = _one_node_model(proto, n.inputs, opset)
    present = [x for x in n.inputs if x is not None]
    try:
        evaluator = ReferenceEvaluator(model)
    except Exception as e:  # onnx.reference has no implementation of it
        raise n.error(f"is not supported by graphkernel, and onnx.reference cannot run it on the host "
                      f"({type(e).__name__}: {e})") from None
    const_feeds = {name: x for name, x in zip(names, present) if is_const(x)}
    out_names = [o for o in proto.output if o]
    if len(const_feeds) == len(present):
        return _aligned(proto, _reference_run(n, evaluator, const_feeds, out_names, "on its constant inputs"))
    zeros = {name: np.zeros(shape_of(x), dtype_of(x).np) for name, x in zip(names, present) if not is_const(x)}
    types = _inferred_types(model)
    guessed = types is None
    if guessed:
        types = _run_types(n, evaluator, {**const_feeds, **zeros}, out_names)
    dynamic = [(name, x) for name, x in zip(names, present) if not is_const(x)]
    fn = OnnxNodeFunction(evaluator, const_feeds, [name for name, _ in dynamic], [t.dtype for t in types],
                          f"onnx.{proto.op_type}[{n.name!r}]")
    values = [b.value(x) for _, x in dynamic]
    attrs = dict(fn=fn, in_types=[v.dtype for v in values], in_shapes=[v.shape for v in values],
                 out_types=[t.dtype for t in types], out_shapes=[t.shape for t in types])
    outputs = b.ir.ops("PyFunc", *values, **attrs)
    if guessed:
        b.guessed.update(outputs)
    return _aligned(proto, list(outputs))


def _aligned(proto, results: list) -> list:
    """One entry per output slot of the node (None for an omitted optional output)."""
    it = iter(results)
    return [next(it) if name else None for name in proto.output]
