"""The compile cache: a compiled graph kept on disk, so a second process running the same network skips
the pass pipeline (MindSpore's switch: `set_context(enable_compile_cache=True, compile_cache_path=DIR)`,
or MS_COMPILER_CACHE_ENABLE=1 and MS_COMPILER_CACHE_PATH in the environment).

    key     sha256 of: the traced graph's text (ir.print_graph: every node, attribute, constant, shape,
            dtype and scope name), the CompileOptions (as text the same in every process, without
            where the compile writes and --compile_mode), and the digest of graphkernel's own sources
            (every .py file of the graphkernel, ir and kernels packages)
    entry   <path>/graphkernel_graphs/<key>.ir: the graph after the pipeline, as IR text (parsed
            back by ir.parse_graph: text, never pickle, so a cache file cannot run code)
    a hit   compile_graph skips the pipeline: the kernels are the cache's (kernels/cache.py), the
            stages are the traced graph and the final one, the fusion log is empty

The key is the traced graph, not the network's Python source: MindSpore keys on the source files and the
inputs, which cannot see a changed global, a config value or a helper module; a trace sees everything
construct did, so a changed network or a changed graphkernel never reuses a stale graph. The trace is
cheap next to the passes and the kernels (docs/kernels.md: 0.2% of a cold first step of the official
BERT at one layer, 2.3% of the 24-layer BERT-large's). With save_graphs on, the pipeline runs (its
dumps are what was asked for).

Writes are atomic (a temporary file renamed), the directory is private (0700); an entry that does not
parse, or whose file another user owns, is ignored and rewritten.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import tempfile
import warnings

import ir
import kernels
from ir.errors import IRError
from ir.graph import Graph
from ir.parser import parse_graph
from ir.printer import print_graph


_PACKAGES = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(ir.__file__)),
             os.path.dirname(os.path.abspath(kernels.__file__)))   # graphkernel, ir, kernels

SUBDIR = "graphkernel_graphs"


class CompileCacheWarning(RuntimeWarning):
    """The compile cache could not be read or written; the graph compiles as without it."""


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """sha256 over every .py file of graphkernel, ir and kernels (path and bytes): any change of the
    package, a new version or a local edit, changes every key."""
    h = hashlib.sha256()
    for root in _PACKAGES:
        for folder, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    h.update(os.path.relpath(path, root).encode() + b"\0")
                    with open(path, "rb") as f:
                        h.update(f.read())
    return h.hexdigest()


def cache_dir(enabled: bool | None, path: str | None) -> str | None:
    """The compile cache's directory for the context's enable_compile_cache and compile_cache_path (None:
    MS_COMPILER_CACHE_ENABLE=1 and MS_COMPILER_CACHE_PATH decide), or None when the cache is off."""
    if enabled is None:
        enabled = os.environ.get("MS_COMPILER_CACHE_ENABLE", "") == "1"
    if not enabled:
        return None
    base = path or os.environ.get("MS_COMPILER_CACHE_PATH") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                             "graphkernel")
    return os.path.join(base, SUBDIR)


# CompileOptions fields that say where a compile writes, not what it computes: not part of the key
_WHERE = ("compile_cache_dir", "save_graphs", "save_graphs_path", "data_dump", "cache_mode", "cache_dir",
          "cache_lock_timeout")


def key_of(graph: Graph, opts) -> str:
    """sha256 of the package's sources, the options that decide the graph, and the traced graph."""
    defaults = {f.name: f.default for f in dataclasses.fields(opts) if f.name in _WHERE}
    flags = dataclasses.replace(opts.flags, compile_mode=None)   # when kernels build, not what the graph is
    h = hashlib.sha256()
    for part in (source_digest(), canonical(dataclasses.replace(opts, flags=flags, **defaults)), print_graph(graph)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def canonical(value) -> str:
    """A value's text, the same in every process: a set's items sorted (a frozenset of strings
    iterates in an order that changes with each process's string hashing)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = (f"{f.name}={canonical(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__name__}({', '.join(fields)})"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(canonical(v) for v in value)) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(canonical(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{canonical(k)}: {canonical(v)}" for k, v in value.items())) + "}"
    return repr(value)


def load(directory: str, key: str) -> Graph | None:
    """The cached final graph of `key`, or None (missing, unreadable, not ours, or not parsing)."""
    path = os.path.join(directory, key + ".ir")
    try:
        st = os.lstat(path)
        if not os.path.isfile(path) or os.path.islink(path) or st.st_uid != os.getuid():
            return None
        with open(path, encoding="utf-8") as f:
            return parse_graph(f.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, IRError) as e:
        warnings.warn(f"compile cache entry {path!r} is unusable ({type(e).__name__}: {e}); the graph "
                      "compiles anew", CompileCacheWarning, stacklevel=3)
        return None


def store(directory: str, key: str, graph: Graph) -> None:
    """Write the final graph of `key` (atomically; a failure warns and changes nothing)."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(print_graph(graph))
            os.replace(tmp, os.path.join(directory, key + ".ir"))
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        warnings.warn(f"compile cache {directory!r} cannot be written ({e}); the graph is not kept",
                      CompileCacheWarning, stacklevel=3)
