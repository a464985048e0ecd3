"""The report pages (graphkernel/observation/report.py) and the compile record, checked offline: what a page holds,
that the same compile gives the same bytes, that a hostile name stays text, and the command line.
tests/test_report_browser.py loads a page in headless Chromium."""
import html
import json
import os
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from graphkernel import Profiler, Tensor, context
from graphkernel.observation.profiler import active_profiler
from graphkernel.tools.cli import main
from graphkernel.compiler import compile_graph, options_from_context
from graphkernel.tools.demo import NetCompositeFuse, run_demo
from graphkernel.observation.report import ReportError, find_graphs, read_profile, write_report
from ir import GraphBuilder
from requires import needs_dot

HOSTILE = "<script>alert(1)</script>\"'&amp;</textarea>"
X = np.arange(16, dtype=np.float32).reshape(4, 4) / 8


@pytest.fixture(autouse=True)
def no_profiler_left():
    yield
    if active_profiler() is not None:
        active_profiler().stop()


class Tags(HTMLParser):
    """Every start tag of a page and the text of its scripts."""

    def __init__(self):
        super().__init__()
        self.tags, self.scripts, self._in_script = [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def parse(text):
    tags = Tags()
    tags.feed(text)
    return tags


def compile_composite(path, flags=""):
    context.reset_graph_id()
    context.set_context(device_target="Ascend", enable_graph_kernel=True, save_graphs=True,
                        save_graphs_path=str(path), graph_kernel_flags=flags)
    return NetCompositeFuse().compile(Tensor(X))


@needs_dot
def test_dump_as_html_writes_the_page_and_the_index_with_the_dumps(tmp_path):
    compiled = compile_composite(tmp_path, "--dump_as_html")
    names = [os.path.basename(f) for f in compiled.dump_files]
    assert names[-3:] == ["compile_0.json", "report_0.html", "index.html"]
    page = (tmp_path / "report_0.html").read_text()
    tags = parse(page)
    # every stage drawn, in order, as inline SVG; one selector option per stage
    stems = [os.path.splitext(n)[0] for n in names if n.endswith(".dot")]
    options = [a["value"] for t, a in tags.tags if t == "option"]
    assert len(options) == len(stems) == page.count("<svg ") == 6
    assert [s for s in stems if s in page] == stems
    # the composite: a clickable cluster, its panel naming its primitives, its kernel and source, its log
    clusters = [a for t, a in tags.tags if t == "g" and a.get("role") == "button" and "cluster" in a["class"]]
    assert {a["data-panel"] for a in clusters} == {"s3-c0", "s4-c0"}   # fuse_basic and composite stages
    panel = page[page.index('<section id="s4-c0"'):]
    panel = panel[:panel.index("</section>")]
    assert "Fused_Mul_Add_Pow_0" in panel and "Default/Pow-op2" in panel and "Default/Mul-op0" in panel
    kernel = compiled.kernels[0]
    assert kernel.kernel in panel and html.escape(kernel.source) in panel
    assert "fusion log: 2 entries naming it" in panel and "cost model predicts a saving" in panel
    # the basic-fusion stage's composite had another name then (Fused_Mul_Add_0): its entry still shows
    basic = page[page.index('<section id="s3-c0"'):]
    basic = basic[:basic.index("</section>")]
    assert "<h3>Fused_Mul_Add_0</h3>" in basic and "fusion log: 1 entry naming it" in basic
    # the kernel table: block_dim, tile and UB bytes of the launch
    assert kernel.tile > 0 and 0 < kernel.ub_bytes <= 256 * 1024
    row = re.search(r"<tr><td class=\"num\">0</td>.*?</tr>", page[page.index('id="kernels"'):]).group(0)
    assert f">{kernel.block_dim}<" in row and f">{kernel.tile}<" in row and f">{kernel.ub_bytes}<" in row
    # the whole fusion log, refusals with their reason
    log = page[page.index('id="fusion-log"'):]
    assert log.count('<tr class="fused">') == 2 and "Pow is not an op of basic fusion" in log
    index = (tmp_path / "index.html").read_text()
    assert '<a href="report_0.html">' in index


@needs_dot
def test_the_same_compile_gives_the_same_bytes(tmp_path):
    for run in ("a", "b"):
        compile_composite(tmp_path / run, "--dump_as_html --dump_as_text")
    for name in ("compile_0.json", "report_0.html", "index.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    write_report(str(tmp_path / "a"))   # the command's pages are the compile's
    assert (tmp_path / "a" / "report_0.html").read_bytes() == (tmp_path / "b" / "report_0.html").read_bytes()


@needs_dot
def test_a_hostile_name_stays_text(tmp_path):
    """Scope names are model strings: a name made of markup reaches the page as escaped text only (graph 0
    fused: the name in a composite's panel; graph 1 unfused: in the kernel table too)."""
    context.reset_graph_id()
    for fusion in (True, False):
        b = GraphBuilder(namer=lambda op: f"{HOSTILE}/{op}")
        x = b.input((4, 4), name=HOSTILE)
        y = b.op("Exp", b.op("Mul", x, x))
        context.set_context(device_target="Ascend", enable_graph_kernel=fusion, save_graphs=True,
                            save_graphs_path=str(tmp_path), graph_kernel_flags="--dump_as_html")
        compile_graph(b.graph(y), options_from_context())
    shown = html.escape(f"{HOSTILE}/Mul", quote=True)
    for graph_id in (0, 1):
        page = (tmp_path / f"report_{graph_id}.html").read_text()
        tags = parse(page)
        assert [t for t, _ in tags.tags].count("script") == 1 and "alert" not in "".join(tags.scripts)
        assert "<textarea" not in page and "<script>alert" not in page
        assert not any(k.startswith("on") for _, attrs in tags.tags for k in attrs)
        assert shown in page     # shown, as text
        # the policy lets only the page's own script and style run
        (csp,) = [a["content"] for t, a in tags.tags if t == "meta" and a.get("http-equiv")]
        assert csp.startswith("default-src 'none'; script-src 'sha256-")
    fused = (tmp_path / "report_0.html").read_text()
    assert f"<td>{shown}</td>" in fused[fused.index('class="composite"'):]
    kernels = (tmp_path / "report_1.html").read_text()
    assert f"<td>{shown}</td>" in kernels[kernels.index('id="kernels"'):]
    record = json.loads((tmp_path / "compile_1.json").read_text(encoding="ascii"))
    assert [la["name"] for la in record["launches"]] == [f"{HOSTILE}/Mul", f"{HOSTILE}/Exp"]


@needs_dot
def test_report_command_on_the_demos_dumps_with_a_profile(tmp_path, capsys):
    """The demo's dumps (four directories of graph 0) give four pages and one index; a profile of the same
    compile puts its times into the kernel table."""
    run_demo(save_graphs_path=str(tmp_path / "dumps"), repeat=2, out=lambda *a: None, large=None)
    context.reset_graph_id()
    context.set_context(save_graphs=False, enable_graph_kernel=True, device_target="Ascend")
    net = NetCompositeFuse()
    net(Tensor(X))
    prof = Profiler(output_path=str(tmp_path / "prof"))
    net(Tensor(X))
    net(Tensor(X))
    prof.analyse(print_table=False)
    assert main(["report", str(tmp_path / "dumps"), "--profile", str(tmp_path / "prof")]) == 0
    assert "wrote 4 report pages" in capsys.readouterr().out
    index = (tmp_path / "dumps" / "index.html").read_text()
    links = re.findall(r'<a href="([^"]+)">', index)
    assert links == [f"{net}/fusion_{side}/report_0.html" for net in ("NetBasicFuse", "NetCompositeFuse")
                     for side in ("off", "on")]
    page = (tmp_path / "dumps" / "NetCompositeFuse" / "fusion_on" / "report_0.html").read_text()
    assert "<th>avg us</th>" in page
    row = re.search(r"<tr><td class=\"num\">0</td>.*?</tr>", page[page.index('id="kernels"'):]).group(0)
    assert ">Fused_Mul_Add_Pow_0<" in row and re.search(r'<td class="num">2</td><td class="num">[0-9.]+</td>', row)


def test_stages_are_found_by_their_dump_names(tmp_path):
    for name in ("6_validate.dot", "6_validate_3.dot", "hwopt_d_expand_end_graph_3.dot", "kernel_graph_0.dot",
                 "hwopt_d_expand_end_graph_0.ir", "notes.dot"):
        (tmp_path / name).write_text("digraph G {}\n")
    assert find_graphs(str(tmp_path)) == {
        (".", 0): {"validate": "6_validate.dot", "kernel_graph": "kernel_graph_0.dot"},
        (".", 3): {"validate": "6_validate_3.dot", "expand": "hwopt_d_expand_end_graph_3.dot"}}


@needs_dot
def test_dumps_without_a_record_still_give_the_drawings(tmp_path):
    compile_composite(tmp_path)
    os.remove(tmp_path / "compile_0.json")
    write_report(str(tmp_path))
    page = (tmp_path / "report_0.html").read_text()
    assert page.count("<svg ") == 6 and "no compile record" in page and 'data-panel="s4-c0"' in page


def test_errors_name_the_thing(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "is not a directory of dumps" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "no stage dumps" in capsys.readouterr().err
    with pytest.raises(ReportError, match="no kernel_details.csv"):
        read_profile(str(tmp_path))
    (tmp_path / "kernel_details.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ReportError, match="is not a Profiler's kernel_details.csv"):
        read_profile(str(tmp_path))
    (tmp_path / "6_validate.dot").write_text("digraph G {}\n")
    (tmp_path / "compile_0.json").write_text("{not json")
    assert main(["report", str(tmp_path)]) == 2
    assert "cannot read compile record" in capsys.readouterr().err


def test_without_graphviz_the_report_says_what_is_missing(tmp_path, monkeypatch, capsys):
    (tmp_path / "6_validate.dot").write_text("digraph G {}\n")
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "graphkernel report needs Graphviz's `dot`" in err and "apt-get install graphviz" in err
    assert not (tmp_path / "report_0.html").exists()
