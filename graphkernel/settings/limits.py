"""The memory limit every declared shape is checked against (ir/limits.py does the checking).

    context.set_context(max_device_memory="2GB")     MindSpore's key and format; an int means bytes
    GRAPHKERNEL_MAX_DEVICE_MEMORY=2GB                 the same, from the environment, when the key is unset
    neither                                           the machine's memory: physical RAM, or the cgroup's
                                                      memory.max when a container sets a smaller one

One tensor may not need more than the limit, nor may one call's buffers on the emulated device
(the executor's arena of temporaries plus its outputs). A tensor made on the host (Tensor, Parameter,
an initializer, ops.fill) is checked against the limit and against what the process may allocate
(`process_memory_limit`: its address-space and data limits, `ulimit -v` / `ulimit -d`) before its
memory is taken. The default is the machine's total memory, not
what happens to be free now: a compile must not succeed or fail with the load of the machine, and a
tensor larger than the machine's memory can never be allocated anyway.
"""
from __future__ import annotations

import functools
import os
import re

try:
    import resource
except ImportError:   # not a Unix: no per-process limits to read
    resource = None

from ir.errors import GraphKernelError
from ir.limits import ENV  # noqa: F401 - the variable's name, public here too

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*", re.IGNORECASE)
_CGROUP_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
_ACCEPTED = "accepted: a positive number of bytes or a string such as '3.5GB' (B, KB, MB, GB, TB)"


class MemorySettingError(GraphKernelError, ValueError):
    """A memory size that does not parse or is not positive."""


def parse_size(value) -> int:
    """Bytes of `value`: a positive int, or a string such as "3.5GB", "512MB", "1024" (units of 1024)."""
    if isinstance(value, bool):
        raise MemorySettingError(f"got {value!r}; {_ACCEPTED}")
    if isinstance(value, int):
        nbytes = value
    else:
        match = _SIZE.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            raise MemorySettingError(f"got {value!r}; {_ACCEPTED}")
        number, unit = match.groups()
        nbytes = int(float(number) * _UNITS[unit.upper()])
    if nbytes <= 0:
        raise MemorySettingError(f"got {value!r}; the limit must be positive")
    return nbytes


@functools.lru_cache(maxsize=None)
def machine_memory() -> int | None:
    """Bytes of memory this process can have: physical RAM, or a smaller cgroup limit; None if unknown."""
    sizes = []
    try:
        sizes.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        pass
    for path in _CGROUP_FILES:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            sizes.append(int(text))
    sizes = [s for s in sizes if s > 0]
    return min(sizes) if sizes else None


def process_memory_limit() -> int | None:
    """Bytes this process may allocate at most: the smaller of its address-space (RLIMIT_AS) and data
    (RLIMIT_DATA) limits, read now (a process may lower them while it runs); None when both are unlimited."""
    if resource is None:
        return None
    limits = []
    for which in ("RLIMIT_AS", "RLIMIT_DATA"):
        if hasattr(resource, which):
            soft = resource.getrlimit(getattr(resource, which))[0]
            if soft != resource.RLIM_INFINITY and soft > 0:
                limits.append(soft)
    return min(limits) if limits else None
