"""File names made from untrusted text (a model's node and scope names), kept inside their directory.

Every file graphkernel writes under a directory the user chose (data and overflow dumps, stage dumps,
kernel sources, profiler tables) gets its name from `safe_filename` and its path from `path_in`:

    safe_filename("Fused_Mul_Add_0")   ->  "Fused_Mul_Add_0"              a plain name is kept
    safe_filename("Default/Mul-op0")   ->  "Default_Mul-op0_<hash>"       changed: a hash of the original
    safe_filename("../../etc/passwd")  ->  "______etc_passwd_<hash>"      no '/', '.', NUL, non-ASCII
    safe_filename("CON"), ("")         ->  "CON_<hash>", "unnamed_<hash>" no device name, never empty
    safe_filename("a/b", hash_changes=False) -> "a_b"                     the caller adds a unique prefix
    path_in(dir, name + ".npy")        ->  dir/name.npy; UnsafePathError if it would resolve outside dir

A plain name is letters, digits, `_` and `-` (ASCII), at most NAME_LIMIT characters, not a Windows
device name (CON, NUL, COM1, ...) and not ending like a hashed name (`_` and HASH_CHARS hex digits).
Anything else is rewritten (each other character made `_`, the text cut to fit) and followed by `_`
and a hash of the original text, so two different names never share a file: kept names are
themselves, rewritten names differ in their hash, and a kept name never ends like a rewritten one.
Names that differ only in letter case stay apart on case-sensitive file systems only; the data dump
also prefixes every name with its launch index.
"""
from __future__ import annotations

import hashlib
import os
import re

from ir.errors import GraphKernelError

NAME_LIMIT = 100      # characters of a name part; suffixes like ".output.0.npy" come on top
HASH_CHARS = 12       # hex digits of the SHA-256 of the original name

_PLAIN = re.compile(r"[A-Za-z0-9_-]+")
_LOOKS_HASHED = re.compile(rf".*_[0-9a-f]{{{HASH_CHARS}}}")
_SUFFIX = re.compile(r"(\.[A-Za-z0-9_-]+)*")
# names Windows reserves for devices, with any extension (CON.txt is the console too)
_RESERVED = {"CON", "PRN", "AUX", "NUL", "CLOCK$"} | {f"{d}{i}" for d in ("COM", "LPT") for i in range(10)}


class UnsafePathError(GraphKernelError, ValueError):
    """A file name or path that would leave its directory (or could not be checked)."""


def name_hash(text: str) -> str:
    """HASH_CHARS hex digits identifying `text` (any str, lone surrogates included)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def is_plain(name: str) -> bool:
    """Whether `safe_filename` keeps `name` unchanged."""
    return (isinstance(name, str) and len(name) <= NAME_LIMIT and _PLAIN.fullmatch(name) is not None
            and name.upper() not in _RESERVED and _LOOKS_HASHED.fullmatch(name) is None)


def safe_filename(name: str, limit: int = NAME_LIMIT, *, hash_changes: bool = True) -> str:
    """A file-name part for `name` (see the module docstring): the name itself when plain, else its
    characters outside [A-Za-z0-9_-] made `_`, cut to fit `limit`, followed by `_` and a hash.

    hash_changes=False is for a caller that keeps its names apart itself (the data dump prefixes
    each name with its launch index): characters are still replaced, but the hash is added only
    when the name is cut, empty or a device name."""
    name = str(name)
    if is_plain(name) and len(name) <= limit:
        return name
    base = re.sub(r"[^A-Za-z0-9_-]", "_", name)
    if not hash_changes and base and len(base) <= limit and base.upper() not in _RESERVED:
        return base
    base = base[:max(1, limit - HASH_CHARS - 1)] or "unnamed"
    return f"{base}_{name_hash(name)}"


def path_in(directory: str | os.PathLike, filename: str) -> str:
    """`directory/filename`, after checking that `filename` is one plain component (a safe name and
    optional `.suffix` parts: no separator, no '..', no NUL) and that the path, symlinks resolved,
    stays inside `directory`. Raises UnsafePathError naming both otherwise."""
    directory = os.fspath(directory)
    stem, dot, suffix = filename.partition(".")
    if not (_PLAIN.fullmatch(stem) and _SUFFIX.fullmatch(dot + suffix)) or len(filename) > 255:
        raise UnsafePathError(f"file name {filename[:120]!r} is not a plain file name; "
                              f"not writing it into {directory!r}")
    path = os.path.join(directory, filename)
    root = os.path.realpath(directory)
    if os.path.commonpath([root, os.path.realpath(path)]) != root:
        raise UnsafePathError(f"{path!r} resolves outside {directory!r} (a symbolic link?); not writing it")
    return path
