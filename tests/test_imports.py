"""The import graph of the three packages, read from the sources (ast), keeps its layers:

- `ir` imports neither `kernels` nor `graphkernel`; `kernels` does not import `graphkernel`;
- inside `graphkernel/` a module imports only from its own layer or the layers below (LAYERS, bottom
  first; docs/architecture.md draws them);
- no import cycle between project modules, counting imports inside functions too;
- no import inside a function between project modules, except the CLI's subcommands, which load on
  demand to keep `graphkernel --help` fast (LAZY_ALLOWED).

A module is named by its dotted path; `from graphkernel.ops import operations` is an import of the module
graphkernel.ops.operations, `from graphkernel.ops import Primitive` one of the package graphkernel.ops.
Importing a module also runs its parent packages' __init__ (below the three roots): the cycle check
counts those implicit imports too.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ir", "kernels", "graphkernel")   # each may import the ones before it

# graphkernel/'s layers, bottom first: (layer, folders and top-level modules). A module belongs to the layer of
# its longest matching prefix. A folder lies within one layer; the top level keeps few modules
# (TOP_LEVEL_BUDGET): MindSpore's public paths, the compile layer's three, and the package itself.
LAYERS = [
    ("settings", ["graphkernel.settings", "graphkernel.dtype", "graphkernel.precision"]),
    ("passes", ["graphkernel.passes", "graphkernel.expanders"]),
    ("context", ["graphkernel.context", "graphkernel.communication"]),
    ("observation", ["graphkernel.observation"]),
    ("values", ["graphkernel.tracing", "graphkernel.tensor"]),
    ("compile", ["graphkernel.compiler", "graphkernel.device", "graphkernel.compile_cache"]),
    ("api", ["graphkernel.ops", "graphkernel.mint", "graphkernel.nn", "graphkernel.train", "graphkernel.common", "graphkernel.cell",
             "graphkernel.gradients", "graphkernel.checkpoint", "graphkernel.assign", "graphkernel.bprop",
             "graphkernel.host"]),
    ("frontends", ["graphkernel.onnx"]),
    ("tools", ["graphkernel.tools", "graphkernel", "graphkernel.__main__"]),
]
TOP_LEVEL_BUDGET = 20

# (importer, imported) pairs allowed inside a function: the CLI's subcommands.
LAZY_ALLOWED = {("graphkernel.tools.cli", "graphkernel.tools.demo"), ("graphkernel.tools.cli", "graphkernel.observation.dump"),
                ("graphkernel.tools.cli", "graphkernel.tools.run"), ("graphkernel.tools.cli", "graphkernel.tools.bench.command"),
                ("graphkernel.tools.cli", "graphkernel.observation.report"), ("graphkernel.tools.cli", "graphkernel.tools.msrun")}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module a dotted name is, or is inside of (None: not ours)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in MODULES:
            return ".".join(parts)
        parts.pop()
    return None


def imports_of(module: str, source: str) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function) for every import statement of `module`."""
    package = module if MODULES.get(module, Path()).name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def targets(node) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join(anchor + ([node.module] if node.module else []))
        out = []
        for alias in node.names:
            sub = _resolve(f"{base}.{alias.name}")
            out.append(f"{base}.{alias.name}" if sub and sub != _resolve(base) else base)
        return out

    def walk(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for name in targets(child):
                    target = _resolve(name)
                    if target and target != module:
                        found.append((target, child.lineno, in_function))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(source), False)
    return found


def import_graph() -> dict[str, list[tuple[str, int, bool]]]:
    return {m: imports_of(m, p.read_text("utf-8")) for m, p in MODULES.items()}


def layer_of(module: str) -> int | None:
    best, layer = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, layer = len(prefix), i
    return layer


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop(); on_stack.discard(w); component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


GRAPH = import_graph()


def test_the_reader_sees_imports_of_every_kind():
    src = ("import ir.graph\nfrom kernels import lower\nfrom graphkernel.ops import operations as P\n"
           "from .tracing import trace\nfrom .passes import cse\n"
           "def f():\n    from graphkernel import context\n")
    got = imports_of("graphkernel.cell", src)
    assert got == [("ir.graph", 1, False), ("kernels.lower", 2, False), ("graphkernel.ops.operations", 3, False),
                   ("graphkernel.tracing.trace", 4, False), ("graphkernel.passes.cse", 5, False),
                   ("graphkernel.context", 7, True)]


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert cycles({"a": ["b"], "b": []}) == []


def test_packages_import_one_way():
    wrong = [f"{m}:{line} imports {t}" for m, edges in GRAPH.items() for t, line, _ in edges
             if PACKAGES.index(t.split(".")[0]) > PACKAGES.index(m.split(".")[0])]
    assert not wrong, "imports flow graphkernel -> kernels -> ir:\n" + "\n".join(wrong)


def test_every_graphkernel_module_has_a_layer():
    missing = sorted(m for m in MODULES if m.startswith("graphkernel") and layer_of(m) is None)
    assert not missing, f"give these modules a layer in tests/test_imports.py and docs/architecture.md: {missing}"


def test_no_upward_import():
    wrong = []
    for m, edges in GRAPH.items():
        if not m.startswith("graphkernel"):
            continue
        for t, line, _ in edges:
            if t.startswith("graphkernel") and layer_of(t) > layer_of(m):
                wrong.append(f"{m}:{line} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})")
    assert not wrong, "an import reaches up a layer:\n" + "\n".join(wrong)


def test_no_function_level_import_between_project_modules():
    wrong = [f"{m}:{line} imports {t} inside a function" for m, edges in GRAPH.items()
             for t, line, lazy in edges if lazy and (m, t) not in LAZY_ALLOWED]
    assert not wrong, "import project modules at the top of the module:\n" + "\n".join(wrong)


def test_lazy_imports_that_remain_say_why():
    for m, t in sorted(LAZY_ALLOWED):
        lines = MODULES[m].read_text("utf-8").splitlines()
        at = [line for t2, line, lazy in GRAPH[m] if t2 == t and lazy]
        assert at, f"{m} no longer imports {t} in a function: drop it from LAZY_ALLOWED"
        for line in at:
            near = " ".join(lines[max(0, line - 3): line])
            assert "#" in near, f"{m}:{line}: say in a comment why {t} is imported here"


def with_parent_packages(graph: dict[str, list[str]]) -> dict[str, list[str]]:
    """Importing a.b.c runs a.b's __init__ first: an edge to every package above the imported module
    (below the three roots, which are imported first) that does not hold the importer already."""
    out = {}
    for m, targets in graph.items():
        edges = set(targets)
        for t in targets:
            parts = t.split(".")
            for k in range(2, len(parts)):
                parent = ".".join(parts[:k])
                if parent in MODULES and not (m == parent or m.startswith(parent + ".")):
                    edges.add(parent)
        out[m] = sorted(edges)
    return out


def test_parent_packages_count():
    graph = with_parent_packages({"graphkernel.cell": ["graphkernel.ops.primitive"],
                                  "graphkernel.ops.functional": ["graphkernel.ops.operations"]})
    assert graph == {"graphkernel.cell": ["graphkernel.ops", "graphkernel.ops.primitive"],
                     "graphkernel.ops.functional": ["graphkernel.ops.operations"]}


def test_no_import_cycle():
    graph = {m: sorted({t for t, _, _ in edges}) for m, edges in GRAPH.items()}
    found = cycles(with_parent_packages(graph))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("layer", [name for name, _ in LAYERS])
def test_the_architecture_page_draws_every_layer(layer):
    assert f"**{layer}**" in (ROOT / "docs" / "architecture.md").read_text("utf-8")


def test_every_folder_lies_within_one_layer():
    """A folder of graphkernel/ is named in LAYERS as a whole: no module inside it is given a layer of its own."""
    folders = {p.parent for p in (ROOT / "graphkernel").rglob("__init__.py") if p.parent != ROOT / "graphkernel"}
    top_folders = {".".join(f.relative_to(ROOT).parts) for f in folders if f.parent == ROOT / "graphkernel"}
    named = [prefix for _, prefixes in LAYERS for prefix in prefixes]
    inner = [p for p in named if p.count(".") > 1]
    assert not inner, f"name folders and top-level modules in LAYERS, not modules inside a folder: {inner}"
    assert top_folders <= set(named), f"give these folders a layer: {sorted(top_folders - set(named))}"


def test_the_top_level_stays_small():
    top = sorted(p.name for p in (ROOT / "graphkernel").glob("*.py"))
    assert len(top) <= TOP_LEVEL_BUDGET, f"graphkernel/ holds {len(top)} modules: move some into a folder: {top}"


@pytest.mark.parametrize("old", sorted(__import__("graphkernel").MOVED))
def test_moved_public_paths_still_import(old):
    import importlib
    import graphkernel
    new = graphkernel.MOVED[old]
    assert importlib.import_module(old) is importlib.import_module(new)
    assert getattr(graphkernel, old.rsplit(".", 1)[1]) is importlib.import_module(new)


# Where a module below the api layer may use graphkernel.context, (module, function, name): the one reader of
# the settings a compile takes, options_from_context (CompileOptions describes a whole compile: passes, compiler
# and device read it alone); PYNATIVE's one-op compile cache, keyed by the settings like a Cell's; the process's
# graph counter, which numbers compiles (no setting); and the memory limit a trace checks each traced shape
# against while construct runs, before anything compiles.
CONTEXT_READERS = {
    ("graphkernel.compiler", "options_from_context", "context.get_context"),
    ("graphkernel.compiler", "options_from_context", "context.enable_graph_kernel_set"),
    ("graphkernel.compiler", "options_from_context", "context.session_jit_level"),
    ("graphkernel.compiler", "options_from_context", "max_device_memory"),
    ("graphkernel.compiler", "run_eager", "context.compile_settings_id"),
    ("graphkernel.compiler", "compile_graph", "context.next_graph_id"),
    ("graphkernel.tracing.trace", "Trace._reset_run", "max_device_memory"),
    # a Tensor or Parameter made on the host, outside any compile, is checked against the limit set now
    ("graphkernel.tensor", "check_new", "max_device_memory"),
}


def context_uses(module: str, source: str) -> set[tuple[str, str, str]]:
    """(module, enclosing function, name) for every use of graphkernel.context in `source`: `context.f` through
    a name bound to the module, or a name imported from it."""
    tree = ast.parse(source)
    modules, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "graphkernel":
            modules |= {a.asname or a.name for a in node.names if a.name == "context"}
        elif isinstance(node, ast.ImportFrom) and node.module == "graphkernel.context":
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "graphkernel.context" and a.asname}
    found = set()

    def walk(node, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{where}.{child.name}" if where else child.name
            if isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name) and child.value.id in modules:
                found.add((module, where, f"context.{child.attr}"))
            elif isinstance(child, ast.Name) and child.id in names and isinstance(child.ctx, ast.Load):
                found.add((module, where, child.id))
            walk(child, inner)

    walk(tree, "")
    return found


def test_the_context_reader_finds_every_spelling():
    src = ("from graphkernel import context\nfrom graphkernel.context import max_device_memory as mdm\n"
           "x = context.get_context('core_num')\n"
           "class T:\n    def f(self):\n        return mdm()\n")
    assert context_uses("m", src) == {("m", "", "context.get_context"), ("m", "T.f", "mdm")}


def test_below_the_api_layer_only_options_from_context_reads_the_settings():
    """A compile does what its CompileOptions say: nothing below the api layer reads the context, but the
    places CONTEXT_READERS names (tests/test_pipeline_options.py runs a compile with the context locked)."""
    api, context_layer = ([name for name, _ in LAYERS].index(n) for n in ("api", "context"))
    found = set()
    for m, path in MODULES.items():
        if m.startswith("graphkernel") and layer_of(m) < api and layer_of(m) != context_layer:
            found |= context_uses(m, path.read_text("utf-8"))
    assert found <= CONTEXT_READERS, "read the CompileOptions, not the context:\n" + "\n".join(
        f"{m}: {fn or '<module>'} uses {name}" for m, fn, name in sorted(found - CONTEXT_READERS))
    assert CONTEXT_READERS <= found, f"no longer read, drop from CONTEXT_READERS: {sorted(CONTEXT_READERS - found)}"


def test_the_architecture_page_names_every_folder():
    """docs/architecture.md's table of sub-packages has a row per folder of graphkernel/ holding modules."""
    page = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    folders = sorted({p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "graphkernel").rglob("*.py")} -
                     {"graphkernel"})
    missing = [f for f in folders if f"| `{f}/` |" not in page]
    assert not missing, f"give these folders a row in docs/architecture.md: {missing}"
