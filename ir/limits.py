"""Memory limits: declared shapes checked against a byte limit before anything is allocated.

A model can declare a tensor of 10^12 elements in a few bytes: a graph input's dims, an initializer's
dims, the target shape of a Reshape, BroadcastTo or Expand, a ConstantOfShape. Every place that is
about to turn a declared shape into memory (the tracer, the ONNX frontend, the executor's buffer plan)
asks here first, and a shape over the limit is a ResourceLimitError naming the value, its shape, its
elements and bytes, and the limit:

    check_shape(shape, dtype, limit, what)    one tensor; `what` names it for the message
    check_node(node, limit)                   every result of a node
    check_graph(graph, limit)                 every input and every node result, composites' included
    check_reference_peak(graph, limit)        the values the reference interpreter holds at once

Sizes are Python ints: a product of dims never wraps around as numpy's int64 product would (a shape
crafted to wrap to a small size is caught too). `limit=None` checks nothing (no limit set).
"""
from __future__ import annotations

import math

from ir.dtypes import as_dtype
from ir.errors import GraphKernelError
from ir.graph import Graph, Node
from ir.printer import describe, quote

SETTING = "max_device_memory"   # the context key and the environment variable that set the limit
ENV = "GRAPHKERNEL_MAX_DEVICE_MEMORY"


class ResourceLimitError(GraphKernelError, MemoryError):
    """A declared tensor, or a program's buffers, would take more memory than the limit allows."""


def tensor_bytes(shape, dtype) -> int:
    """Exact bytes of a tensor of `shape` and `dtype` (Python ints, no overflow)."""
    return math.prod(int(d) for d in shape) * as_dtype(dtype).itemsize


def format_bytes(n: int) -> str:
    """`1536` -> `1.5 KiB`: a size a person reads at a glance (the exact count sits next to it)."""
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} bytes"  # unreachable: PiB ends the loop


def over_limit_message(what: str, nbytes: int, limit: int) -> str:
    """`what` needs more than the limit: the figures, and how to raise the limit."""
    return (f"{what} needs {nbytes} bytes ({format_bytes(nbytes)}), more than the limit of {limit} bytes "
            f"({format_bytes(limit)}); if that is intended, raise it with context.set_context({SETTING}=...) "
            f"or the environment variable {ENV}")


def check_shape(shape, dtype, limit: int | None, what: str) -> None:
    """ResourceLimitError when a tensor of `shape` and `dtype` would exceed `limit` bytes."""
    if limit is None:
        return
    elements = math.prod(map(int, shape))
    nbytes = elements * as_dtype(dtype).itemsize
    if nbytes > limit:
        dims = ",".join(str(int(d)) for d in shape)
        raise ResourceLimitError(over_limit_message(
            f"{what}: {as_dtype(dtype).short}[{dims}] ({elements} elements)", nbytes, limit))


def check_node(node: Node, limit: int | None, context: str = "") -> None:
    """Every result of `node` within the limit; the message names the node (op and scope name)."""
    if limit is None:
        return
    for i, t in enumerate(node.types):
        if math.prod(map(int, t.shape)) * t.dtype.itemsize > limit:  # the message only when it fails
            what = f"{context}{describe(node)}" + (f" result {i}" if len(node.types) > 1 else "")
            check_shape(t.shape, t.dtype, limit, what)


def check_graph(graph: Graph, limit: int | None, context: str = "") -> None:
    """Every graph input and node result within the limit (one pass; composites' subgraphs too)."""
    if limit is None:
        return
    for i, v in enumerate(graph.inputs):
        check_shape(v.shape, v.dtype, limit, f"{context}graph input {i}" + (
            f" {quote(v.node.name)[:200]}" if v.node.name else ""))
    for node in graph.nodes:
        check_node(node, limit, context)
        if node.subgraph is not None:
            check_graph(node.subgraph, limit, f"{context}{describe(node)}: ")


def reference_peak_bytes(graph: Graph) -> int:
    """The most bytes of computed values alive at once while ir.interpret runs `graph`: a node's results
    join the live set (a composite's subgraph peaks on its own), a value leaves after its last use unless
    it is an output. The caller's inputs are not counted: they are the caller's memory."""
    last: dict = {}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            last[v] = i
    outputs = set(graph.outputs)
    live = peak = 0
    for i, node in enumerate(graph.nodes):
        results = sum(tensor_bytes(t.shape, t.dtype) for t in node.types)
        inner = reference_peak_bytes(node.subgraph) if node.subgraph is not None else results
        peak = max(peak, live + max(results, inner))
        live += sum(tensor_bytes(v.shape, v.dtype) for v in node.outputs if v in last or v in outputs)
        live -= sum(tensor_bytes(v.shape, v.dtype) for v in set(node.inputs)
                    if last[v] == i and v not in outputs and v.node.op != "Input")
    return peak


def check_reference_peak(graph: Graph, limit: int | None) -> None:
    """ResourceLimitError when one reference run of `graph` would hold more than `limit` bytes at once."""
    if limit is None:
        return
    peak = reference_peak_bytes(graph)
    if peak > limit:
        raise ResourceLimitError(over_limit_message(
            "one call of this graph on the numpy reference (the values alive at once)", peak, limit))
