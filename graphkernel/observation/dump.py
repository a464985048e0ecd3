"""Stage dumps (`save_graphs`): a `.dot` per stage and the compile record (`compile_<id>.json`,
graphkernel/observation/compile_record.py); with --dump_as_text the IR text and the fusion log.

Beside them, where MindSpore 2.x scripts look for its graph-kernel dumps (MindSpore 2.10 on the CPU
writes these): `verbose_ir_files/graph_kernel/NNNN_<MindSpore's pass>_<graph id>.ir`, the IR text after
each graph-kernel stage, numbered in order, and, with --dump_as_text, `graph_kernel_dump/
graph_kernel_cluster_<graph id>.txt`, the source nodes of each composite ("Source nodes of <composite> =
..."); MindSpore writes that folder into the working directory, here it is under save_graphs_path. Files are written whole or not at all (a temporary file renamed into place), into a directory
that is created if missing; a path that cannot be written is an error naming it. File names go
through ir.filenames (safe_filename, path_in): whatever the stem, the file stays in the directory.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from ir.dot import to_dot
from ir.errors import GraphKernelError
from ir.filenames import UnsafePathError, path_in, safe_filename
from ir.graph import Graph
from ir.printer import print_graph


class DumpError(GraphKernelError, OSError):
    """A dump directory or file that cannot be written."""


def ensure_dir(path: str, what: str = "save_graphs_path") -> str:
    if os.path.exists(path) and not os.path.isdir(path):
        raise DumpError(f"{what} {path!r} is not a directory (a file of that name exists)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise DumpError(f"{what} {path!r} cannot be created: {e.strerror}") from None
    if not os.path.isdir(path) or not os.access(path, os.W_OK):
        raise DumpError(f"{what} {path!r} is not a writable directory")
    return path


def write_atomic(path: str, text: str) -> None:
    """`text` into `path` whole or not at all; characters UTF-8 cannot hold (a lone surrogate in a
    name) are written as backslash escapes."""
    directory = os.path.dirname(path) or "."
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path)[-20:])
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        raise DumpError(f"cannot write {path!r}: {e.strerror}") from None


# our graph-kernel stages, named as MindSpore 2.10 names the pass doing the same in its dump file names
MINDSPORE_STAGES = {"expand": "stage1_cluster_graph_kernel_expander", "precision": "stage2_highlevelopt1_precision",
                    "simplify": "stage2_highlevelopt1_arithmetic_simplify",
                    "fuse_basic": "stage1_cluster_graph_kernel_cluster",
                    "composite": "stage3_split_graph_kernel_splitter"}
MINDSPORE_IR_DIR = os.path.join("verbose_ir_files", "graph_kernel")
MINDSPORE_CLUSTER_DIR = "graph_kernel_dump"


def cluster_text(graph: Graph) -> str:
    """MindSpore's graph_kernel_cluster dump of a compiled graph: each composite and its source nodes."""
    out = []
    for node in graph.nodes:
        if node.subgraph is None:
            continue
        out.append(f"Source nodes of {node.name or node.op} = {node.op}")
        names = {v: f"input_{i}" for i, v in enumerate(node.subgraph.inputs)}
        for inner in node.subgraph.nodes:
            for k, v in enumerate(inner.outputs):
                names[v] = f"{inner.name or inner.op}:{k}" if len(inner.outputs) > 1 else (inner.name or inner.op)
            if inner.op == "Const":
                continue
            args = ", ".join(names.get(v, "?") for v in inner.inputs)
            types = ", ".join(str(t) for t in inner.types)
            out.append(f"  {inner.name or inner.op} = {inner.op}({args}) -> {types}")
        out.append("=======================")
    return "\n".join(out) + "\n"


def stage_filename(stage_pattern: str, graph_id: int) -> str:
    if stage_pattern == "6_validate":
        return "6_validate" if graph_id == 0 else f"6_validate_{graph_id}"
    return stage_pattern.format(id=graph_id)


class StageDumper:
    """Writes each stage's graph; remembers what it wrote (CompiledGraph.dump_files)."""

    def __init__(self, directory: str | None, graph_id: int, as_text: bool, patterns: dict[str, str]):
        self.directory = ensure_dir(directory) if directory is not None else None
        self.graph_id, self.as_text, self.patterns = graph_id, as_text, patterns
        self.files: list[str] = []
        self.mindspore_count = 0   # the NNNN of MindSpore's verbose_ir_files/graph_kernel names

    def write(self, stem: str, dot: str | None = None, text: str | None = None, record: str | None = None,
              subdir: str | None = None, text_suffix: str = ".ir") -> None:
        if self.directory is None:
            return
        directory = self.directory if subdir is None else ensure_dir(os.path.join(self.directory, subdir))
        for suffix, content in ((".dot", dot), (text_suffix, text if self.as_text or subdir else None), (".json", record)):
            if content is not None:
                try:
                    path = path_in(directory, safe_filename(stem) + suffix)
                except UnsafePathError as e:
                    raise DumpError(str(e)) from None
                write_atomic(path, content)
                self.files.append(path)

    def __call__(self, stage: str, graph: Graph) -> None:
        if self.directory is None:
            return
        stem = stage_filename(self.patterns[stage], self.graph_id)
        text = print_graph(graph)
        self.write(stem, to_dot(graph, title=stem), text)
        if stage in MINDSPORE_STAGES:   # where MindSpore 2.x writes its graph-kernel passes' IR
            self.write(f"{self.mindspore_count:04d}_{MINDSPORE_STAGES[stage]}_{self.graph_id:04d}", text=text,
                       subdir=MINDSPORE_IR_DIR)
            self.mindspore_count += 1

    def write_clusters(self, graph: Graph) -> None:
        """MindSpore's --dump_as_text cluster dump of the compiled graph (graph_kernel_dump/)."""
        if self.directory is not None and self.as_text:
            self.write(f"graph_kernel_cluster_{self.graph_id}", text=cluster_text(graph),
                       subdir=MINDSPORE_CLUSTER_DIR, text_suffix=".txt")


def check_dot(needed_by: str) -> None:
    """DumpError unless Graphviz's `dot` program can be run (what `needed_by` needs)."""
    if shutil.which("dot") is None:
        raise DumpError(f"{needed_by} needs Graphviz's `dot` program, which is not installed "
                        "(it is an OS package, not a Python one; Debian: apt-get install graphviz)")


def render(path: str, fmt: str = "png") -> str:
    """Render a .dot file with Graphviz's `dot`; returns the output path."""
    import graphviz
    if not os.path.isfile(path):
        raise DumpError(f"no such .dot file: {path!r}")
    try:
        return graphviz.render("dot", fmt, path, outfile=os.path.splitext(path)[0] + "." + fmt)
    except graphviz.ExecutableNotFound:
        raise DumpError("Graphviz's `dot` program is not installed (Debian: apt-get install graphviz); "
                        f"cannot render {path!r}") from None
    except graphviz.CalledProcessError as e:
        raise DumpError(f"dot failed on {path!r}: {e.stderr.decode(errors='replace') if e.stderr else e}") from None
