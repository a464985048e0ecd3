"""`graphkernel report DIR` and `--dump_as_html`: the stage dumps of each compiled graph as one
self-contained HTML page, and an index across the graphs.

    DIR/ (searched with its subdirectories)   6_validate.dot, hwopt_d_*_graph_<id>.dot, kernel_graph_<id>.dot,
                                               compile_<id>.json (graphkernel/observation/compile_record.py)
    -> DIR/.../report_<id>.html   per graph: a stage selector over the stages drawn as SVG by Graphviz's dot;
                                  composites (the shaded clusters) open on a click to their primitives,
                                  the fusion-log entries naming them and the kernel they run, with its
                                  source; the kernel table (block_dim, tile, UB bytes, bytes moved, times of
                                  a profile); the whole fusion log
    -> DIR/index.html             one row per graph, linking its page

A page needs nothing outside itself: the drawings are inline SVG, the script and the style inline and
pinned by a Content-Security-Policy that lets nothing else run or load. Model strings are untrusted:
every name reaches the page as escaped text. Graphviz's SVG is parsed and written back (comments,
scripts, links and event attributes dropped) before it is inlined. The same dumps give the same bytes.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import html
import os
import re
import urllib.parse
import xml.etree.ElementTree as ET

from ir.errors import GraphKernelError
from ir.printer import printable
from graphkernel.observation.compile_record import RecordError, load as load_record, record_stem
from graphkernel.observation.dump import DumpError, check_dot, write_atomic
from graphkernel.passes.pipeline import STAGE_DUMPS

STAGES = [*STAGE_DUMPS, "kernel_graph"]
STAGE_PATTERNS = {**STAGE_DUMPS, "kernel_graph": "kernel_graph_{id}"}
SVG_NS, XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
SVG_ELEMENTS = {"svg", "g", "title", "polygon", "polyline", "path", "ellipse", "circle", "rect", "line", "text",
                "a", "defs", "tspan"}
NAME_LIMIT = 200    # characters of a name shown in a table cell (the whole name is in its title)
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)


class ReportError(GraphKernelError, ValueError):
    """A report that cannot be made: no dumps in the directory, no Graphviz, a profile that cannot be read."""


# --- finding the dumps ---------------------------------------------------------------------------

def _stage_regex(stage: str) -> re.Pattern:
    if stage == "validate":
        return re.compile(r"6_validate(?:_(\d+))?\.dot")
    return re.compile(re.escape(STAGE_PATTERNS[stage]).replace(re.escape("{id}"), r"(\d+)") + r"\.dot")


_REGEXES = [(stage, _stage_regex(stage)) for stage in STAGES]


def find_graphs(directory: str, recursive: bool = True) -> dict[tuple[str, int], dict[str, str]]:
    """{(subdirectory relative to `directory`, graph id): {stage: .dot file name}}, every directory below
    `directory` searched (recursive=False: `directory` alone), in a sorted order."""
    found: dict[tuple[str, int], dict[str, str]] = {}
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(dirs) if recursive else []
        rel = os.path.relpath(root, directory)
        for name in sorted(files):
            for stage, regex in _REGEXES:
                m = regex.fullmatch(name)
                if m:
                    graph_id = int(m.group(1) or 0)
                    found.setdefault((rel, graph_id), {})[stage] = name
                    break
    return dict(sorted(found.items()))


# --- drawing ------------------------------------------------------------------------------------

def svg_of(dot_text: str, what: str) -> str:
    """Graphviz's SVG of a .dot text."""
    import graphviz   # a third-party import on first use, as graphkernel.observation.dump.render does
    try:
        return graphviz.pipe("dot", "svg", dot_text.encode("utf-8", "backslashreplace")).decode("utf-8")
    except graphviz.ExecutableNotFound:
        raise ReportError("the report needs Graphviz's `dot` program, which cannot be run (it is an OS package; "
                          "Debian: apt-get install graphviz)") from None
    except graphviz.CalledProcessError as e:
        err = e.stderr.decode(errors="replace") if e.stderr else str(e)
        raise ReportError(f"dot failed on {what}: {printable(err, 500)}") from None


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _clean(element: ET.Element) -> None:
    """Drop what an SVG drawing needs not: elements outside SVG_ELEMENTS, links, event and style attributes."""
    for child in list(element):
        if _local(child.tag) not in SVG_ELEMENTS:
            element.remove(child)
        else:
            _clean(child)
    for attr in list(element.attrib):
        name = _local(attr).lower()
        if name.startswith("on") or name in ("href", "style") or attr == f"{{{XLINK_NS}}}href":
            del element.attrib[attr]


def _title(g: ET.Element) -> str:
    t = g.find(f"{{{SVG_NS}}}title")
    return (t.text or "") if t is not None else ""


def _texts(g: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in g.iter(f"{{{SVG_NS}}}text")]


def _tooltip(g: ET.Element) -> str:
    for a in g.iter(f"{{{SVG_NS}}}a"):
        return a.get(f"{{{XLINK_NS}}}title", "")
    return ""


def annotate(svg: str, stage_index: int, launch_of: dict[str, int]) -> tuple[str, list[dict]]:
    """The drawing made safe, its composites and kernel-graph launches marked clickable; and the
    composites found: [{panel, name, members: [(op, types, name)]}]."""
    root = ET.fromstring(svg)
    _clean(root)
    for element in root.iter():   # ids unique across the stages of one page
        if "id" in element.attrib:
            element.set("id", f"s{stage_index}-{element.get('id')}")
    groups = list(root.iter(f"{{{SVG_NS}}}g"))
    nodes = {_title(g): g for g in groups if g.get("class") == "node"}
    inside: dict[str, list[tuple[int, ET.Element]]] = {}   # ir.dot names cluster K's primitives cK_n<i>
    for title, g in nodes.items():
        m = re.fullmatch(r"c(\d+)_n(\d+)", title)
        if m:
            inside.setdefault(m.group(1), []).append((int(m.group(2)), g))
    composites = []
    for g in groups:
        m = re.fullmatch(r"cluster_(\d+)", _title(g)) if g.get("class") == "cluster" else None
        if m is None or m.group(1) not in inside:
            continue   # a branch of an If, a device subgraph: no composite
        members = [node for _, node in sorted(inside[m.group(1)], key=lambda item: item[0])]
        panel = f"s{stage_index}-c{m.group(1)}"
        texts = _texts(g)
        composites.append({"panel": panel, "name": _tooltip(g) or (texts[0] if texts else ""),
                           "members": [_member(n) for n in members]})
        for k, target in enumerate([g, *members]):
            target.set("data-panel", panel)
            target.set("class", target.get("class") + " clickable")
            if k == 0:
                target.set("tabindex", "0")
                target.set("role", "button")
    for title, g in nodes.items():
        if title in launch_of:
            g.set("data-panel", f"launch-{launch_of[title]}")
            g.set("class", "node clickable")
            g.set("tabindex", "0")
            g.set("role", "button")
    return ET.tostring(root, encoding="unicode"), composites


def _member(g: ET.Element) -> tuple[str, str, str]:
    """(op, types, its scope name or a constant's value) of a primitive drawn by ir.dot."""
    texts = _texts(g)
    op = texts[0] if texts else ""
    types = texts[1] if len(texts) > 1 else ""
    return op, types, _tooltip(g) or " ".join(texts[2:])


# --- profile ------------------------------------------------------------------------------------

def read_profile(path: str) -> list[dict]:
    """The rows of a Profiler's kernel_details.csv: `path` is the file, its profiler/ directory, or the
    Profiler's output_path."""
    for candidate in (path, os.path.join(path, "kernel_details.csv"),
                      os.path.join(path, "profiler", "kernel_details.csv")):
        if os.path.isfile(candidate):
            try:
                with open(candidate, newline="", encoding="utf-8") as f:
                    rows = list(csv.DictReader(f))
            except (OSError, UnicodeDecodeError, csv.Error) as e:
                raise ReportError(f"cannot read the profile {candidate!r}: {e}") from None
            if rows and not {"graph_id", "name", "calls", "avg_time_us"} <= set(rows[0]):
                raise ReportError(f"{candidate!r} is not a Profiler's kernel_details.csv")
            return rows
    raise ReportError(f"no kernel_details.csv at {path!r} (give a Profiler's output_path)")


def _times(profile: list[dict] | None, graph_id: int) -> dict[str, tuple[int, float, int]]:
    """{launch name: (calls, total us, calls on the launch's stand-in)} of the graph's rows."""
    out: dict[str, tuple[int, float]] = {}
    for row in profile or ():
        if row.get("graph_id") == str(graph_id):
            calls, total, standin = out.get(row["name"], (0, 0.0, 0))
            out[row["name"]] = (calls + int(row["calls"] or 0), total + float(row["total_time_us"] or 0.0),
                                standin + int(row.get("standin_calls") or 0))
    return out


# --- the page -----------------------------------------------------------------------------------

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header, section.wide { padding: 0.5em 1em; }
header h1 { font-size: 1.3em; margin: 0.2em 0; }
nav { padding: 0.3em 1em; background: #f0f0f0; position: sticky; top: 0; z-index: 1; }
main { display: flex; gap: 1em; padding: 0 1em; align-items: flex-start; max-width: 100vw; box-sizing: border-box; }
.drawing { flex: 3; overflow: auto; max-height: 80vh; border: 1px solid #ddd; }
.drawing svg { display: block; }
#detail { flex: 2; min-width: 18em; max-height: 80vh; overflow: auto; }
.clickable { cursor: pointer; }
g.edge { pointer-events: none; }
.selected > polygon, .selected > a > polygon, .selected > g > a > polygon { stroke: #c00; stroke-width: 3; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
td.num { text-align: right; }
tr.refused td { color: #777; }
pre { background: #f8f8f8; padding: 0.5em; overflow: auto; max-height: 40em; font-size: 0.85em; }
""".strip()

SCRIPT = """
"use strict";
const select = document.getElementById("stage");
const stages = Array.from(document.querySelectorAll("section.stage"));
function closePanels() {
  for (const p of document.querySelectorAll("#detail > section")) p.hidden = true;
  for (const s of document.querySelectorAll(".selected")) s.classList.remove("selected");
  document.getElementById("hint").hidden = false;
}
function showStage(id) {
  for (const s of stages) s.hidden = s.id !== id;
  select.value = id;
  closePanels();
}
function openPanel(id, from) {
  closePanels();
  const panel = document.getElementById(id);
  if (!panel) return;
  panel.hidden = false;
  document.getElementById("hint").hidden = true;
  if (from) from.classList.add("selected");
}
select.addEventListener("change", () => showStage(select.value));
for (const [button, step] of [["prev", -1], ["next", 1]]) {
  document.getElementById(button).addEventListener("click", () => {
    const k = stages.findIndex(s => !s.hidden) + step;
    if (k >= 0 && k < stages.length) showStage(stages[k].id);
  });
}
for (const el of document.querySelectorAll("[data-panel]")) {
  const open = event => {
    event.stopPropagation();
    const id = el.getAttribute("data-panel");
    const head = el.getAttribute("role") === "button" ? el :
      document.querySelector(`[data-panel="${id}"][role="button"]`);
    openPanel(id, head);
  };
  el.addEventListener("click", open);
  el.addEventListener("keydown", event => { if (event.key === "Enter" || event.key === " ") open(event); });
}
showStage((stages.find(s => s.hasAttribute("data-first")) || stages[stages.length - 1]).id);
""".strip()


def _csp() -> str:
    digest = lambda text: base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()  # noqa: E731
    return (f"default-src 'none'; script-src 'sha256-{digest(SCRIPT)}'; style-src 'sha256-{digest(STYLE)}'; "
            "img-src data:")


def _e(text, limit: int | None = NAME_LIMIT) -> str:
    """Escaped text for an element or an attribute (quotes included), one printable line."""
    return html.escape(printable(text, limit), quote=True)


def _cell(text, limit: int = NAME_LIMIT) -> str:
    """A table cell whose whole text is its title when it is cut."""
    shown = _e(text, limit)
    title = f' title="{_e(text, None)}"' if len(printable(text)) > limit else ""
    return f"<td{title}>{shown}</td>"


def _head(title: str) -> list[str]:
    return ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_csp()}">',
            f"<title>{_e(title)}</title>", f"<style>{STYLE}</style>", "</head>", "<body>"]


def _figures(figures: dict) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(figures.items()))


def _log_rows(entries: list[dict]) -> list[str]:
    rows = ["<table>", "<tr><th>stage</th><th>decision</th><th>candidates</th><th>into</th><th>reason</th>"
            "<th>cost-model figures</th></tr>"]
    for r in entries:
        verdict = "fused" if r["accepted"] else "refused"
        rows.append(f'<tr class="{verdict}">{_cell(r["stage"])}<td>{verdict}</td>'
                    f'{_cell(" + ".join(r["candidates"]))}{_cell(", ".join(r["composites"]))}'
                    f'{_cell(r["reason"])}{_cell(_figures(r["figures"]), 1000)}</tr>')
    rows.append("</table>")
    return rows


KERNEL_COLUMNS = ("#", "name", "op types", "kernel", "variant", "target", "phase", "block_dim", "tile",
                  "UB bytes", "inputs", "outputs", "bytes")


def _kernel_table(launches: list[dict], times: dict | None) -> list[str]:
    timed = bool(times)
    heads = KERNEL_COLUMNS + (("calls", "avg us", "total us") if timed else ())
    rows = ["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    for la in launches:
        block = "" if la["block_dim"] is None else la["block_dim"]
        cells = [f'<td class="num">{la["index"]}</td>', _cell(la["name"]), _cell(" ".join(la["ops"])),
                 _cell(la["kernel"]), _cell(la["variant"] + (" (stand-in while it built)" if la.get("standin") else "")),
                 _cell(la["target"]), _cell(la["phase"]),
                 f'<td class="num">{block}</td>', f'<td class="num">{la["tile"] or ""}</td>',
                 f'<td class="num">{la["ub_bytes"] or ""}</td>', _cell(", ".join(la["inputs"])),
                 _cell(", ".join(la["outputs"])), f'<td class="num">{la["bytes"]}</td>']
        if timed:
            calls, total, standin = times.get(la["name"], (0, 0.0, 0))
            avg = f"{total / calls:.3f}" if calls else ""
            shown = f"{calls} ({standin} on stand-in)" if standin else (calls or "")
            cells += [f'<td class="num">{shown}</td>', f'<td class="num">{avg}</td>',
                      f'<td class="num">{f"{total:.3f}" if calls else ""}</td>']
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows.append("</table>")
    return rows


def _source(record: dict, kernel: str) -> list[str]:
    source = record.get("sources", {}).get(kernel) if record else None
    if not source:
        return []
    return [f"<details><summary>source of {_e(kernel)}</summary><pre><code>{html.escape(source)}</code></pre>"
            "</details>"]


def _composite_panel(c: dict, record: dict | None) -> list[str]:
    name = c["name"]
    out = [f'<section id="{c["panel"]}" class="composite" hidden>', f"<h3>{_e(name)}</h3>",
           f"<p>{len(c['members'])} primitives</p>", "<table>", "<tr><th>op</th><th>type</th><th>name or value</th></tr>"]
    out += [f"<tr>{_cell(op)}{_cell(types)}{_cell(member)}</tr>" for op, types, member in c["members"]]
    out.append("</table>")
    if record is not None:
        launches = [la for la in record["launches"] if la["name"] == name]
        for la in launches:
            out.append(f"<p>launch {la['index']}: kernel <code>{_e(la['kernel'] or '(none)')}</code>, "
                       f"{_e(la['variant'])}, block_dim {la['block_dim']}, tile {la['tile']}, "
                       f"UB {la['ub_bytes']} bytes</p>")
            out += _source(record, la["kernel"])
        entries = [r for r in record["fusion_log"]
                   if name in r["composites"] or name in r.get("earlier", ()) or name in r["candidates"]]
        out.append(f"<h4>fusion log: {len(entries)} {'entry' if len(entries) == 1 else 'entries'} naming it "
                   "(by this name or a later one)</h4>")
        if entries:
            out += _log_rows(entries)
    out.append("</section>")
    return out


def _launch_panel(la: dict, record: dict) -> list[str]:
    out = [f'<section id="launch-{la["index"]}" class="launch" hidden>', f"<h3>{_e(la['name'])}</h3>",
           f"<p>launch {la['index']}: {_e(' + '.join(la['ops']))}; kernel <code>{_e(la['kernel'] or '(none)')}"
           f"</code>; {_e(la['variant'])}; block_dim {la['block_dim']}; tile {la['tile']}; UB {la['ub_bytes']} "
           f"bytes; {la['bytes']} bytes moved</p>",
           f"<p>in: {_e(', '.join(la['inputs']), None)}<br>out: {_e(', '.join(la['outputs']), None)}</p>"]
    out += _source(record, la["kernel"])
    out.append("</section>")
    return out


def graph_page(graph_id: int, stage_files: dict[str, str], directory: str, record: dict | None,
               profile: list[dict] | None = None) -> str:
    """The HTML page of one compiled graph, from its stage dumps in `directory` and its record."""
    stages = [s for s in STAGES if s in stage_files]
    launch_of = record["kernel_graph_nodes"] if record else {}
    drawings, composites = [], []
    for k, stage in enumerate(stages):
        path = os.path.join(directory, stage_files[stage])
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                dot_text = f.read()
        except OSError as e:
            raise ReportError(f"cannot read {path!r}: {e.strerror}") from None
        svg, found = annotate(svg_of(dot_text, stage_files[stage]), k, launch_of if stage == "kernel_graph" else {})
        drawings.append((stage, stage_files[stage], svg))
        composites += found
    title = f"graph {graph_id}"
    lines = _head(f"{title}: graphkernel report")
    summary = "no compile record (compile_<id>.json): stage drawings only"
    if record is not None:
        accepted = sum(r["accepted"] for r in record["fusion_log"])
        summary = (f"target {record['target']}; graph-kernel fusion {'on' if record['enable_graph_kernel'] else 'off'}"
                   f" (opt_level {record['opt_level']}); {len(record['launches'])} launches; fusion log: "
                   f"{accepted} fused, {len(record['fusion_log']) - accepted} refused")
    lines += ["<header>", f"<h1>{_e(title)}</h1>", f"<p>{_e(summary, None)}</p>",
              '<p><a href="index.html">all graphs</a> &middot; <a href="#kernels">kernels</a> &middot; '
              '<a href="#fusion-log">fusion log</a></p>', "</header>"]
    options = "".join(f'<option value="stage-{k}">{_e(stem)}</option>' for k, (_, stem, _) in enumerate(drawings))
    lines += ['<nav><button id="prev" type="button">&larr;</button> <label>stage <select id="stage">'
              f"{options}</select></label> "
              '<button id="next" type="button">&rarr;</button> click a shaded composite to open it</nav>', "<main>"]
    lines.append('<div class="drawing">')
    # the page opens on the last stage with composites (else the last stage)
    first = max((int(c["panel"][1:].partition("-")[0]) for c in composites), default=len(drawings) - 1)
    for k, (stage, stem, svg) in enumerate(drawings):
        mark = " data-first" if k == first else ""
        lines += [f'<section class="stage" id="stage-{k}" data-stage="{_e(stage)}"{mark}>', f"<h2>{_e(stem)}</h2>",
                  svg, "</section>"]
    lines += ["</div>", '<aside id="detail">', '<p id="hint">Click a composite (a shaded cluster) or, in the '
              "kernel graph, a launch to see what it holds.</p>"]
    for c in composites:
        lines += _composite_panel(c, record)
    if record is not None:
        shown = set(launch_of.values())
        for la in record["launches"]:
            if la["index"] in shown:
                lines += _launch_panel(la, record)
    lines += ["</aside>", "</main>"]
    lines += ['<section class="wide" id="kernels">', "<h2>Kernels</h2>"]
    if record is None:
        lines.append("<p>not recorded</p>")
    else:
        times = _times(profile, graph_id) if profile is not None else None
        if profile is not None and not times:
            lines.append(f"<p>the profile holds no launch of graph {graph_id}</p>")
        lines += _kernel_table(record["launches"], times)
        sources = sorted(record.get("sources", {}))
        if sources:
            lines.append(f"<h3>{len(sources)} generated kernels</h3>")
            for kernel in sources:
                lines += _source(record, kernel)
    lines += ["</section>", '<section class="wide" id="fusion-log">', "<h2>Fusion log</h2>"]
    if record is None:
        lines.append("<p>not recorded</p>")
    elif record["fusion_switch"]:
        lines.append(f"<p>{_e(record['fusion_switch'], None)}</p>")
    if record is not None:
        lines += _log_rows(record["fusion_log"]) if record["fusion_log"] else ["<p>no fusion considered</p>"]
    lines += ["</section>", f"<script>{SCRIPT}</script>", "</body>", "</html>"]
    return "\n".join(lines) + "\n"


def page_name(graph_id: int) -> str:
    return f"report_{graph_id}.html"


def _record_in(directory: str, graph_id: int) -> dict | None:
    path = os.path.join(directory, record_stem(graph_id) + ".json")
    if not os.path.exists(path):
        return None
    try:
        return load_record(path)
    except RecordError as e:
        raise ReportError(str(e)) from None


def index_page(rows: list[tuple[str, int, dict | None, int]]) -> str:
    """rows: (page path relative to the index, graph id, record or None, stages drawn)."""
    lines = _head("graphkernel report")
    lines += ["<header>", "<h1>graphkernel report</h1>", f"<p>{len(rows)} compiled graphs</p>", "</header>",
              '<section class="wide">', "<table>", "<tr><th>page</th><th>graph</th><th>target</th><th>fusion</th>"
              "<th>stages</th><th>launches</th><th>fused</th><th>refused</th></tr>"]
    for page, graph_id, record, stages in rows:
        if record is None:
            facts = "<td></td><td></td><td class=\"num\">" + str(stages) + "</td><td></td><td></td><td></td>"
        else:
            accepted = sum(r["accepted"] for r in record["fusion_log"])
            facts = (f"{_cell(record['target'])}<td>{'on' if record['enable_graph_kernel'] else 'off'}</td>"
                     f'<td class="num">{stages}</td><td class="num">{len(record["launches"])}</td>'
                     f'<td class="num">{accepted}</td><td class="num">{len(record["fusion_log"]) - accepted}</td>')
        href = html.escape(urllib.parse.quote("/".join(page.split(os.sep))), quote=True)
        lines.append(f'<tr><td><a href="{href}">{_e(page)}</a></td><td class="num">{graph_id}</td>{facts}</tr>')
    lines += ["</table>", "</section>", "</body>", "</html>"]
    return "\n".join(lines) + "\n"


def write_page(directory: str, graph_id: int, profile: list[dict] | None = None) -> str:
    """Write report_<id>.html of graph `graph_id` from the dumps in `directory`; returns its path."""
    stage_files = find_graphs(directory, recursive=False).get((".", graph_id))
    if not stage_files:
        raise ReportError(f"no stage dumps of graph {graph_id} in {directory!r}")
    check_dot("--dump_as_html")
    path = os.path.join(directory, page_name(graph_id))
    write_atomic(path, graph_page(graph_id, stage_files, directory, _record_in(directory, graph_id), profile))
    return path


def write_report(directory: str, profile: list[dict] | None = None, pages: bool = True,
                 recursive: bool = True) -> list[str]:
    """Pages for every graph dumped in `directory` and (recursive) below it, and the index; pages=False:
    the index alone, of the pages already there. The paths written, the index last."""
    if not os.path.isdir(directory):
        raise ReportError(f"{directory!r} is not a directory of dumps")
    graphs = find_graphs(directory, recursive)
    if not graphs:
        raise ReportError(f"no stage dumps (6_validate.dot, hwopt_d_*.dot, kernel_graph_<id>.dot) in {directory!r}")
    written, rows = [], []
    try:
        # the compile records first: what is wrong with the dumps is said whether or not `dot` is there
        records = {key: _record_in(os.path.normpath(os.path.join(directory, key[0])), key[1]) for key in graphs}
        if pages:
            check_dot("graphkernel report")
        for (rel, graph_id), stage_files in graphs.items():
            where = os.path.normpath(os.path.join(directory, rel))
            record = records[rel, graph_id]
            page = os.path.normpath(os.path.join(rel, page_name(graph_id)))
            if pages:
                written.append(os.path.join(directory, page))
                write_atomic(written[-1], graph_page(graph_id, stage_files, where, record, profile))
            if os.path.exists(os.path.join(directory, page)):
                rows.append((page, graph_id, record, len(stage_files)))
        written.append(os.path.join(directory, "index.html"))
        write_atomic(written[-1], index_page(rows))
    except DumpError as e:
        raise ReportError(str(e)) from None
    return written
