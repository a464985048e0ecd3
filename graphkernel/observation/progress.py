"""A compile's progress on a terminal: kernels built / total and cache hits, as a tqdm bar.

    graph 3 kernels:  37%|███▋      | 44/120 [00:05<00:08, 8.9kernel/s, cache hits 30]

kernels.lower reports each generated kernel as it is ready (`update(origin)`: "compiled", "disk",
"memory", ...); "disk" and "memory" are cache hits. The bar shows only when the stream is a terminal and
the build has taken `delay` seconds (a quick compile prints nothing), and it clears itself when done, so
logs and pipes never see it.
"""
from __future__ import annotations

import sys

CACHE_HITS = ("disk", "memory")
DELAY_SECONDS = 1.0


class CompileProgress:
    def __init__(self, total: int, label: str, stream=None, delay: float | None = None):
        stream = sys.stderr if stream is None else stream
        delay = DELAY_SECONDS if delay is None else delay
        self.total, self.done, self.hits = total, 0, 0
        self.bar = None
        if total and getattr(stream, "isatty", lambda: False)():
            from tqdm import tqdm   # a third-party import on first use: `import graphkernel` stays quick
            self.bar = tqdm(total=total, desc=label, unit="kernel", file=stream, delay=delay, leave=False,
                            dynamic_ncols=True)

    def update(self, origin: str) -> None:
        self.done += 1
        self.hits += origin in CACHE_HITS
        if self.bar is not None:
            self.bar.set_postfix_str(f"cache hits {self.hits}", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> "CompileProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
