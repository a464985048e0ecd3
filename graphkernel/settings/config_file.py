"""Reading the user's configuration files (fusion_switch_file, modify_mixlist, customize_dtypes).

    @parsed_once                      # one parse (and one round of warnings) per file version:
    def read_x(path) -> X: ...        # keyed by (absolute path, mtime, size), so set_context and every
                                      # compile after it share the parse, and an edited file is re-read
    text = read_text(path, "modify_mixlist")   # ConfigFileError naming the key and the file
    doc = load_json(text, path, "modify_mixlist", line_comments=True)   # line and column; duplicate keys

Every error here names the context key, the file and, where there is one, the line and the JSON key.
"""
from __future__ import annotations

import functools
import json
import os

from ir.errors import GraphKernelError


class ConfigFileError(GraphKernelError, ValueError):
    """A configuration file (or setting) that cannot be used as given."""


class PrecisionConfigError(ConfigFileError):
    """A precision mode, mixlist or customize_dtypes file that cannot be used as given."""


def read_text(path: str, key: str, error: type = ConfigFileError) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise error(f"{key} file {path!r}: cannot read it ({reason})") from None


def strip_line_comments(text: str) -> str:
    """`text` without `//` comments outside JSON strings (newlines kept, so line numbers hold)."""
    out, i, in_string = [], 0, False
    while i < len(text):
        c = text[i]
        if in_string:
            if c == "\\":
                out.append(text[i:i + 2])
                i += 2
                continue
            in_string = c != '"'
        elif c == '"':
            in_string = True
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        out.append(c)
        i += 1
    return "".join(out)


def load_json(text: str, path: str, key: str, error: type = ConfigFileError, line_comments: bool = False):
    """The JSON document in `text` (read from `path` for the `key` setting), `//` comments first removed
    if `line_comments`. An error names the file, the line and column, and a key given twice in one
    object (json.loads would keep the last one silently)."""
    def unique(pairs):
        seen = set()
        for name, _ in pairs:
            if name in seen:
                raise error(f"{key} file {path!r}: key {name!r} appears twice in one object")
            seen.add(name)
        return dict(pairs)

    try:
        return json.loads(strip_line_comments(text) if line_comments else text, object_pairs_hook=unique)
    except json.JSONDecodeError as e:
        lines = text.splitlines()
        line = lines[e.lineno - 1] if 0 < e.lineno <= len(lines) else ""
        hint = " (a // comment runs to the end of its line)" if line_comments and "//" in line else ""
        raise error(f"{key} file {path!r}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
                    f"{hint}") from None


def file_version(path: str) -> tuple | None:
    """(absolute path, mtime, size) of a file, None if it cannot be read: what tells an edit apart."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.path.abspath(path), st.st_mtime_ns, st.st_size


def parsed_once(parse):
    """Memoize `parse(path)` per file version; errors are not memoized (they recur until fixed)."""
    results: dict[tuple, object] = {}

    @functools.wraps(parse)
    def read(path: str):
        path = os.fspath(path)
        version = file_version(path)
        if version is None:
            return parse(path)  # reports the missing file
        if version not in results:
            results[version] = parse(path)
        return results[version]

    return read
