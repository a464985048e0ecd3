"""The data dump's settings (dump_path, dump_step, dump_layer), checked by set_context: plain parsers
that know nothing of the context or of compiled graphs; and `DataDumpOptions`, the settings of the
data dump and the overflow check as one compile takes them (CompileOptions.data_dump; the compiler
hands them to graphkernel/observation/datadump.py and overflow.py).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ir.errors import GraphKernelError


class DumpSettingError(GraphKernelError, ValueError):
    """A dump setting that does not parse; set_context reports it as a ContextError naming the key."""


@dataclass(frozen=True)
class DataDumpOptions:
    """enable_dump and enable_dump_debug with their settings, as set_context checked them."""
    enable_dump: bool = False
    enable_dump_debug: bool = False
    path: str | None = None            # dump_path
    mode: str = "output"               # dump_mode: input | output | all
    steps: tuple[tuple[int, int], ...] | None = None   # dump_step parsed (parse_steps); None: every step
    layer: str | None = None           # dump_layer: names separated by spaces; None: every launch
    data: str = "tensor"               # dump_data: tensor | stats
    debug_mode: str = "all"            # dump_debug_mode: aicore_overflow | atomic_overflow | all


def check_dump_path(value):
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise DumpSettingError(f"got {value!r}; accepted: a directory path (created if missing)")
    return ensure_directory(os.path.abspath(os.fspath(value)), DumpSettingError)


def ensure_directory(path: str, error=OSError) -> str:
    """Create `path` if missing and make sure a file can be written in it (else `error` names it)."""
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".graphkernel-write-test-{os.getpid()}")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise error(f"dump directory {path!r} cannot be created or written: "
                    f"{e.strerror or type(e).__name__}") from None
    return path


def parse_steps(text: str) -> tuple[tuple[int, int], ...]:
    """'0|3-5|10' -> ((0, 0), (3, 5), (10, 10)); a bad part raises DumpSettingError naming it."""
    ranges = []
    for part in text.split("|"):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if m is None or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            why = "a range must run upwards" if m is not None else "not a step number or a range lo-hi"
            raise DumpSettingError(f"bad part {part!r} in {text!r} ({why}); accepted: step numbers and "
                               "ranges separated by '|', e.g. '0|5|10' or '0|3-5|10'")
        lo = int(m.group(1))
        ranges.append((lo, int(m.group(2)) if m.group(2) is not None else lo))
    return tuple(ranges)


def check_dump_step(value):
    if value is None:
        return None
    if not isinstance(value, str):
        raise DumpSettingError(f"got {value!r}; accepted: a string such as '0|5|10' or '0|3-5|10', or None")
    parse_steps(value)
    return value.replace(" ", "")


def check_dump_layer(value):
    if value is None:
        return None
    if not isinstance(value, str):
        raise DumpSettingError(f"got {value!r}; accepted: names separated by spaces, or None")
    return " ".join(value.split()) or None
