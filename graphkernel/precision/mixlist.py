"""modify_mixlist (CANN's format): a JSON file that edits the default black/white/gray lists.

    {
      "black-list": {                 // black: stays float32
        "to-remove": ["Xlog1py"],     // black -> gray
        "to-add": ["Matmul", "Cast"]  // white or gray -> black
      },
      "white-list": {                 // white: float16 under allow_mix_precision
        "to-remove": ["Conv2D"],      // white -> gray
        "to-add": ["Bias"]            // black or gray -> white
      }
    }

Rules (CANN's worked examples, op A white by default):
    {"black-list": {"to-add": ["A"]}}                                   -> A black (leaves white)
    {"black-list": {"to-add": ["A"]}, "white-list": {"to-remove": ["A"]}} -> A black
    {"white-list": {"to-remove": ["A"]}}                                -> A gray
i.e. removals apply first (an op removed from the list it is on goes gray), then additions (an op added
to a list leaves the other one). `//` line comments are accepted, and so is one string naming several
ops separated by commas ("Matmul, Cast"), as CANN's options allow. Op names are ours or CANN's (through
the alias table of lists.py); a name that is neither warns and is ignored, as CANN's example's Conv2D, Bias and
Xlog1py do. A missing file, bad JSON, an unknown key, a non-string name or a contradiction (one op added
to both lists, or added to and removed from one) is a PrecisionConfigError naming the file, line or key.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from graphkernel.settings.config_file import PrecisionConfigError, load_json, parsed_once, read_text
from graphkernel.precision.lists import BLACK, GRAY, WHITE, default_list, resolve, unknown_name

KEY = "modify_mixlist"
SECTIONS = {"black-list": BLACK, "white-list": WHITE}
ACTIONS = ("to-add", "to-remove")


@dataclass(frozen=True)
class Mixlist:
    path: str
    overrides: tuple[tuple[str, str], ...]   # (op, list) for every op whose list the file changes

    def lists(self) -> dict[str, str]:
        return dict(self.overrides)


def _load(path: str) -> dict:
    doc = load_json(read_text(path, KEY, PrecisionConfigError), path, KEY, PrecisionConfigError,
                    line_comments=True)
    if not isinstance(doc, dict):
        raise PrecisionConfigError(f"{KEY} file {path!r}: expected an object with \"black-list\" and/or "
                                   "\"white-list\"")
    return doc


def _entries(path: str, doc: dict) -> dict[tuple[str, str], dict[str, str]]:
    """{(section, action): {op: the key it was named at}} with names resolved to our ops."""
    entries: dict[tuple[str, str], dict[str, str]] = {}
    for section, body in doc.items():
        if section not in SECTIONS:
            raise PrecisionConfigError(f"{KEY} file {path!r}: unknown key {section!r}; accepted: "
                                       f"{', '.join(SECTIONS)}")
        if not isinstance(body, dict):
            raise PrecisionConfigError(f"{KEY} file {path!r}: {section} must be an object with "
                                       f"{' and/or '.join(ACTIONS)}")
        for action, names in body.items():
            where = f"{section}.{action}"
            if action not in ACTIONS:
                raise PrecisionConfigError(f"{KEY} file {path!r}: unknown key {section}.{action!r}; "
                                           f"accepted: {', '.join(ACTIONS)}")
            if not isinstance(names, list):
                raise PrecisionConfigError(f"{KEY} file {path!r}: {where} must be a list of op names")
            ops = entries.setdefault((section, action), {})
            for i, name in enumerate(names):
                if not isinstance(name, str):
                    raise PrecisionConfigError(f"{KEY} file {path!r}: {where}[{i}] is {name!r}, not an op "
                                               "name")
                for one in filter(None, (n.strip() for n in name.split(","))):  # "Matmul, Cast" too
                    op = resolve(one)
                    if op is None:
                        warnings.warn(f"{KEY} file {path!r}: {where}[{i}] {unknown_name(one)} (ignored)", UserWarning,
                                      stacklevel=2)
                        continue
                    ops[op] = f"{where}[{i}] {one!r}"
    return entries


def _check_contradictions(path: str, entries) -> None:
    def clash(a, b):
        for op in entries.get(a, {}).keys() & entries.get(b, {}).keys():
            raise PrecisionConfigError(f"{KEY} file {path!r}: {entries[a][op]} and {entries[b][op]} "
                                       f"contradict each other (both name {op})")
    clash(("black-list", "to-add"), ("white-list", "to-add"))
    for section in SECTIONS:
        clash((section, "to-add"), (section, "to-remove"))


@parsed_once
def read_mixlist(path: str) -> Mixlist:
    """The list changes a modify_mixlist file makes to the defaults."""
    entries = _entries(path, _load(path))
    _check_contradictions(path, entries)
    final: dict[str, str] = {}
    added = {op for (_, action), ops in entries.items() if action == "to-add" for op in ops}
    for section, lst in SECTIONS.items():
        for op, where in entries.get((section, "to-remove"), {}).items():
            if default_list(op) == lst:
                final[op] = GRAY
            elif op not in added:
                warnings.warn(f"{KEY} file {path!r}: {where}: {op} is not on the {section} (it is "
                              f"{default_list(op)}); nothing to remove", UserWarning, stacklevel=2)
    for section, lst in SECTIONS.items():
        for op in entries.get((section, "to-add"), {}):
            final[op] = lst
    return Mixlist(path, tuple(sorted((op, lst) for op, lst in final.items() if lst != default_list(op))))
