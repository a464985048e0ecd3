"""Partition: split a graph holding host ops into device subgraphs joined by explicit copies.

    x --> Mul --> PyFunc --> Exp --> y           x --> Mul --> CopyToHost --> PyFunc --> CopyToDevice --> Exp --> y
                                         =>            [device subgraph 0]      host        [device subgraph 1]

Host ops are PyFunc, HostCall (ops traced inside `graphkernel.host_scope()`) and any op of pattern
HOST (`ir.ops.is_host`). Collectives (ir/ops/collective.py, placement "comm") are HOST ops too and split
the device work the same way, but they need no mix_compile_mode and no copies: they read and write the
device's buffers (a host op reading a collective's result gets a CopyToHost, as from device work). Without `mix_compile_mode` a graph that mixes host ops with device work is
refused here, at compile time, naming the host op: CANN's "compute fully sunk to the device"
default. A graph that runs entirely on the host (a PyFunc called on its own, as
PYNATIVE_MODE does) needs no device and passes.

With mix_compile_mode every value a host op reads from a device op goes through one CopyToHost, and
every value a device op reads from a host op through one CopyToDevice (graph inputs and constants
live on both sides: no copy). The copies are real (`np.copy` in the lowering) and show in
`program.kernels` with target "copy". The device subgraphs themselves are `ir.ops.host.device_regions`:
fusion never merges across a host op, because host ops and copies are never clustered (fusion_rules
`admit`) and a composite on both sides of one would be a cycle (`Clusters.creates_cycle`).
"""
from __future__ import annotations

from ir.errors import GraphKernelError
from ir.graph import Graph, Node, Value
from ir.ops import make_node, placement
from ir.printer import describe
from graphkernel.settings.options import CompileOptions

_NO_COPY = ("Input", "Const")   # values that live on both sides


class MixedComputeError(GraphKernelError):
    """Host ops next to device work while mix_compile_mode is off."""


def host_label(node: Node) -> str:
    """`PyFunc (Default/PyFunc-op0)`, or `Mul (Default/Mul-op1) in host_scope` for a HostCall."""
    if node.op == "HostCall":
        return f"{describe(node).replace('HostCall', node.attr('host_op'), 1)} in host_scope"
    return describe(node)


def side(node: Node) -> str:
    """The side of the boundary a node's values live on: a collective ("comm") works on the device's
    buffers, so it is device-side (no copies between it and device work)."""
    where = placement(node)
    return "device" if where == "comm" else where


def check_mix_compile_mode(graph: Graph, opts: CompileOptions) -> None:
    hosts = [n for n in graph.nodes if placement(n) == "host"]
    device = [n for n in graph.nodes if n.op not in _NO_COPY and side(n) == "device"]
    if not hosts or not device or opts.mix_compile_mode:
        return
    more = f" (and {len(hosts) - 1} more host op(s))" if len(hosts) > 1 else ""
    raise MixedComputeError(
        f"{host_label(hosts[0])}{more} runs on the host, but the rest of the graph runs on the device and "
        "mix_compile_mode is off (compute is fully sunk to the device by default). Set "
        "context.set_context(mix_compile_mode=True) to keep host ops on the host and run the rest as "
        "device subgraphs.")


def insert_copies(graph: Graph) -> Graph:
    """The graph with a CopyToHost/CopyToDevice on every value that crosses the boundary."""
    copies: dict[tuple[Value, str], Value] = {}

    def crossing(v: Value, to: str, emit) -> Value:
        if v.node.op in _NO_COPY or side(v.node) == to or side(v.node) == "copy":
            return v
        key = (v, to)
        if key not in copies:
            op = "CopyToHost" if to == "host" else "CopyToDevice"
            suffix = f"#{v.index}" if len(v.node.outputs) > 1 else ""
            copies[key] = emit(make_node(op, (v,), name=f"{v.node.name or v.node.op}{suffix}/{op}")).out
        return copies[key]

    def visit(node: Node, inputs: tuple[Value, ...], emit):
        to = side(node)
        if node.op in _NO_COPY or to == "copy":
            return None
        new = tuple(crossing(v, to, emit) for v in inputs)
        return None if new == inputs else node.replace(inputs=new)

    return graph.rewrite(visit)


def partition(graph: Graph, opts: CompileOptions) -> Graph:
    """Refuse host ops without mix_compile_mode; with it, make every crossing an explicit copy."""
    check_mix_compile_mode(graph, opts)
    if not any(placement(n) == "host" for n in graph.nodes):
        return graph
    return insert_copies(graph)
