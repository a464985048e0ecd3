"""`to_dot(graph, title) -> str`: a Graphviz picture of a graph, a pure function of the graph.

    digraph G {                                   in0, in1 ...   graph inputs (ellipses)
      in0 [...]; n0 [label="Mul\\nf32[4,4]\\n<scope name>", tooltip="<scope name>", fillcolor=...];
      subgraph cluster_0 { label="Fused_Mul_Add_0"; c0_n0 [...]; c0_n1 [...]; }
      in0 -> n0; n0 -> c0_n0; ...                 one edge per use of a value
      out0 [...]; c0_n1 -> out0;                  graph outputs (ellipses)
    }

An If is a node of its own, each branch a cluster beside it (`then`, `else`) whose nodes read the If's
captures and whose results flow into the If. A composite is a cluster holding its primitives; an edge
into a composite goes to the primitives that read the value, an edge out of it leaves from the
primitive that computes the value. Node
fill colours come from a SHA-256 of the op name, ids from positions, so the same graph always gives
the same bytes. Every label is escaped (names are untrusted) and no record shapes are used.
"""
from __future__ import annotations

import colorsys
import hashlib

from ir.graph import Branch, Graph, Node, Value
from ir.printer import format_attr, printable

LABEL_NAME_LIMIT = 60     # characters of a scope name shown under the op
TOOLTIP_LIMIT = 2000
_ATTRS = 'fontname="Helvetica", fontsize=10'


def op_color(op: str) -> str:
    """A light fill colour, the same for the same op name in every run."""
    digest = hashlib.sha256(str(op).encode("utf-8", "surrogatepass")).digest()
    hue = int.from_bytes(digest[:2], "big") / 65536.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.28, 0.97)
    return "#%02x%02x%02x" % (round(r * 255), round(g * 255), round(b * 255))


def dot_string(*lines: str, limit: int = LABEL_NAME_LIMIT) -> str:
    """A quoted DOT string showing the non-empty lines (the first up to 200 characters, or `limit`):
    the one escaper of every .dot writer (ir.dot, kernels.kernel_graph), as names are untrusted."""
    shown = [printable(line, max(200, limit) if i == 0 else limit) for i, line in enumerate(lines) if line]
    body = "\\n".join(t.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;") for t in shown)
    # Graphviz reads backslash-quote as an escaped quote even after an escaped backslash
    return '"' + body + (" " if body.endswith("\\") else "") + '"'


class _Writer:
    def __init__(self):
        self.lines: list[str] = []
        self.edges: list[str] = []
        self.clusters = 0
        self.undefined = 0

    def node(self, indent: str, ident: str, node: Node) -> None:
        types = ", ".join(str(t) for t in node.types) or "()"
        value = ""
        if node.op == "Const" and node.types and node.types[0].size == 1:
            try:
                value = format_attr(node.attr("value"))  # f32[](2.0): show the element only
                value = value[value.index("(") + 1:-1] if value.endswith(")") else value
            except Exception:  # a malformed value still gets a picture
                value = "?"
        tooltip = f", tooltip={dot_string(node.name, limit=TOOLTIP_LIMIT)}" if node.name else ""
        self.lines.append(f"{indent}{ident} [label={dot_string(str(node.op), types, value, node.name)}"
                          f'{tooltip}, fillcolor="{op_color(node.op)}"];')

    def tail(self, env: dict[Value, tuple[str, int, int]], v, indent: str) -> tuple[str, int, int]:
        """(dot id, result index, number of results) of the node that computes v."""
        if isinstance(v, Value) and v in env:
            return env[v]
        ident = f"undefined{self.undefined}"
        self.undefined += 1
        what = f"{v.node.op}#{v.index}" if isinstance(v, Value) else type(v).__name__
        self.lines.append(f"{indent}{ident} [label={dot_string('undefined value', what)}, style=dashed];")
        return ident, 0, 1

    def edge(self, source: tuple[str, int, int], head: str) -> None:
        ident, index, count = source
        label = f' [label="{index}"]' if count > 1 else ""
        self.edges.append(f"  {ident} -> {head}{label};")

    def body(self, graph: Graph, env: dict[Value, tuple[str, int, int]], prefix: str, indent: str) -> None:
        """Nodes of `graph` (its inputs already in env), their edges; composites as clusters."""
        for i, node in enumerate(graph.nodes):
            ident = f"{prefix}n{i}"
            sub = node.subgraph
            if sub is None:
                self.node(indent, ident, node)
                for v in node.inputs:
                    self.edge(self.tail(env, v, indent), ident)
                for key, value in node.attrs:
                    if isinstance(value, Branch):
                        self.branch(node, key, value.graph, env, ident, indent)
                for k, v in enumerate(node.outputs):
                    env[v] = (ident, k, len(node.outputs))
                continue
            cluster = self.clusters
            self.clusters += 1
            inner: dict[Value, tuple[str, int, int]] = {}
            for sv, v in zip(sub.inputs, node.inputs):
                inner[sv] = self.tail(env, v, indent)
            self.lines.append(f"{indent}subgraph cluster_{cluster} {{")
            self.lines.append(f"{indent}  label={dot_string(node.name or str(node.op))}; "
                              f"tooltip={dot_string(node.name, limit=TOOLTIP_LIMIT)};")
            self.lines.append(f'{indent}  style="rounded,filled"; fillcolor="#f5f5f5"; color="#7f7f7f";')
            if not sub.nodes:
                self.lines.append(f"{indent}  {ident} [label={dot_string(str(node.op), '(empty)')}, shape=plain];")
            self.body(sub, inner, f"c{cluster}_", indent + "  ")
            self.lines.append(f"{indent}}}")
            for k, v in enumerate(node.outputs):
                sv = sub.outputs[k] if k < len(sub.outputs) else None
                env[v] = self.tail(inner, sv, indent)


    def branch(self, node: Node, key: str, graph: Graph, env, ident: str, indent: str) -> None:
        """One branch of an If (`ident`) as a cluster: its inputs are the If's captures (inputs 1...)."""
        cluster = self.clusters
        self.clusters += 1
        inner = {bv: self.tail(env, v, indent) for bv, v in zip(graph.inputs, node.inputs[1:])}
        self.lines.append(f"{indent}subgraph cluster_{cluster} {{")
        self.lines.append(f"{indent}  label={dot_string(f'{key}: {node.name or node.op}')}; style=dashed;")
        if not graph.nodes:
            self.lines.append(f"{indent}  b{cluster} [label={dot_string(key, '(passes its inputs)')}, shape=plain];")
        self.body(graph, inner, f"b{cluster}_", indent + "  ")
        self.lines.append(f"{indent}}}")
        for v in graph.outputs:
            self.edge(self.tail(inner, v, indent), ident)


def style_lines(title: str = "") -> list[str]:
    """The drawing style every dump shares (stage dumps, kernels.kernel_graph): top to bottom, one sans
    font for nodes, edges and clusters, the title on top."""
    lines = ["  rankdir=TB;", f"  graph [{_ATTRS}];", f'  node [shape=box, style="rounded,filled", {_ATTRS}];',
             f"  edge [{_ATTRS}];"]
    return lines + ([f"  label={dot_string(title)}; labelloc=t;"] if title else [])


def to_dot(graph: Graph, title: str = "") -> str:
    """Graphviz text for the graph; identical graphs (names included) give identical bytes."""
    w = _Writer()
    w.lines += ["digraph G {", *style_lines(title)]
    env: dict[Value, tuple[str, int, int]] = {}
    for i, v in enumerate(graph.inputs):
        w.lines.append(f'  in{i} [shape=ellipse, fillcolor="#e0e0e0", '
                       f"label={dot_string(f'input {i}', str(v.type), v.node.name)}];")
        env[v] = (f"in{i}", 0, 1)
    w.body(graph, env, "", "  ")
    for i, v in enumerate(graph.outputs):
        shown = str(v.type) if isinstance(v, Value) else "?"
        w.lines.append(f'  out{i} [shape=ellipse, fillcolor="#e0e0e0", label={dot_string(f"output {i}", shown)}];')
        w.edge(w.tail(env, v, "  "), f"out{i}")
    return "\n".join(w.lines + w.edges + ["}"]) + "\n"
