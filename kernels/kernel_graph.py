"""kernel_graph_dot(program, title) -> str: the `kernel_graph_<id>.dot` dump.

One node per launch, labelled with the name of the node it computes (a composite's `Fused_<ops>_<n>`),
its op types, the generated kernel it runs, block_dim and the shapes it reads and writes; host
launches are drawn apart. One edge per buffer from the launch that writes it to each launch that
reads it; graph inputs and outputs are nodes of their own. With host ops (mixed compute) or
collectives (plum) each device subgraph is a dashed cluster, host ops, collectives and copies outside. An If's launch has a
dashed cluster per branch beside it, holding the launches of that branch. Deterministic: the same
program gives the same bytes.
"""
from __future__ import annotations

from ir.dot import dot_string, style_lines
from ir.ops.host import device_regions
from kernels.executor import Conditional

NL = "\n"
LINE_LIMIT = 1000   # characters of one label line (a node name may be 10 KB)


def _quote(text: str) -> str:
    """`text` (lines joined by newlines) as a quoted DOT string: ir.dot's escaping, as names are untrusted."""
    return dot_string(*text.split(NL), limit=LINE_LIMIT)


def _shapes(types) -> str:
    return ", ".join(str(t) for t in types)


def kernel_graph_dot(program, title: str) -> str:
    lines = [f"digraph {_quote(title)} {{", *style_lines(title)]   # the stage dumps' style
    producer: dict = {}
    for k, v in enumerate(program.graph.inputs):
        lines.append(f"  in{k} [label={_quote('input %d%s%s' % (k, NL, v.type))}, shape=ellipse, fillcolor=\"#e0e0e0\"];")
        producer[v] = f"in{k}"
    _launches(program, "k", producer, lines, "  ")
    aliases = {n.out: n.inputs[0] for n in _all_nodes(program.graph) if n.op == "Reshape"}
    lines += _device_clusters(program)
    for k, v in enumerate(program.graph.outputs):
        lines.append(f"  out{k} [label={_quote('output %d%s%s' % (k, NL, v.type))}, shape=ellipse, fillcolor=\"#e0e0e0\"];")
        src = _source(v, producer, aliases)
        if src is not None:
            lines.append(f"  {src} -> out{k} [label={_quote(str(v.type))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _launches(program, prefix: str, producer: dict, lines: list, indent: str) -> None:
    """One node per step of `program`, named `<prefix><k>`, and the edges into it; an If's step is a node
    beside a dashed cluster per branch holding the branch's own launches (its Program's steps)."""
    # a Reshape is a view: its result comes from whoever wrote its input
    aliases = {n.out: n.inputs[0] for n in _all_nodes(program.graph) if n.op == "Reshape"}
    for k, step in enumerate(program.steps):
        info = step.info
        ident = f"{prefix}{k}"
        colour = {"host": "lightgoldenrod1", "copy": "palegreen", "comm": "plum"}.get(info.target) or (
            "lightblue" if len(info.op_types) > 1 else "lightgrey")
        kernel = f"\nkernel {info.kernel}" if info.kernel else ""
        label = (f"{info.name}\n{'+'.join(info.op_types)}{kernel}\nblock_dim={info.block_dim}"
                 f"\nin: {_shapes(info.inputs)}\nout: {_shapes(info.outputs)}")
        lines.append(f"{indent}{ident} [label={_quote(label)}, fillcolor={colour}];")
        edges = set()
        for v in step.values_in:
            src = _source(v, producer, aliases)
            if src is not None and src not in edges:
                edges.add(src)
                lines.append(f"{indent}{src} -> {ident} [label={_quote(str(v.type))}];")
        if isinstance(step.fn, Conditional):
            for key, branch in zip(("then", "else"), step.fn.programs):
                inner = {bv: _source(v, producer, aliases) for bv, v in zip(branch.graph.inputs, step.values_in[1:])}
                lines.append(f"{indent}subgraph cluster_{ident}_{key} {{ label={_quote(f'{key}: {info.name}')}; "
                             "style=dashed;")
                _launches(branch, f"{ident}_{key}_", inner, lines, indent + "  ")
                lines.append(f"{indent}}}")
        for v in step.values_out:
            producer[v] = ident


def _device_clusters(program) -> list[str]:
    """With host ops or collectives in the graph: one cluster per device subgraph; host ops, collectives
    and copies stay outside."""
    if not any(s.info.target in ("host", "comm") for s in program.steps):
        return []
    regions = device_regions(program.graph)
    members: dict[int, list[str]] = {}
    for k, step in enumerate(program.steps):
        region = regions.get(step.values_out[0].node) if step.values_out and step.info.target == "device" else None
        if region is not None:
            members.setdefault(region, []).append(f"k{k}")
    return [f"  subgraph cluster_device_{r} {{ label={_quote(f'device subgraph {r}')}; style=dashed; "
            f"{'; '.join(ks)}; }}" for r, ks in sorted(members.items())]


def _all_nodes(graph):
    for node in graph.nodes:
        yield node
        if node.subgraph is not None:
            yield from _all_nodes(node.subgraph)


def _source(v, producer, aliases):
    seen = 0
    while v not in producer and v in aliases and seen < 1000:
        v, seen = aliases[v], seen + 1
    return producer.get(v)
