"""Reading the user's configuration files (fusion_switch_file, modify_mixlist, customize_dtypes).

    @parsed_once                      # one parse (and one round of warnings) per file version:
    def read_x(path) -> X: ...        # keyed by (absolute path, mtime, size), so set_context and every
                                      # compile after it share the parse, and an edited file is re-read
    text = read_text(path, "modify_mixlist")   # ConfigFileError naming the key and the file

Every error here names the context key, the file and, where there is one, the line and the JSON key.
"""
from __future__ import annotations

import functools
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


def parsed_once(parse):
    """Memoize `parse(path)` per file version; errors are not memoized (they recur until fixed)."""
    results: dict[tuple, object] = {}

    @functools.wraps(parse)
    def read(path: str):
        path = os.fspath(path)
        try:
            st = os.stat(path)
            version = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
        except OSError:
            return parse(path)  # reports the missing file
        if version not in results:
            results[version] = parse(path)
        return results[version]

    return read
