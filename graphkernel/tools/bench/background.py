"""A controlled background load for the benchmarks: `--background K[:nice]`.

    load = BackgroundLoad.parse("1:19")   K busy processes (`python -c "while True: pass"`), each at
                                          that nice value (default 0), started paused (SIGSTOP)
    with load:                            resumed (SIGCONT) for the block, paused again after: a
        ... timed steps ...               paused process takes no CPU, so quiet and loaded rounds can
                                          alternate within one run
    load.close()                          the processes are killed

A busy process of nice 0 takes a fair share of a core from every thread of the benchmark; one of nice 19
takes what is left over (Linux gives it ~1.5% of a core beside a nice-0 thread). The module uses the
standard library only: bench/official_bert_check.py loads it from its file in MindSpore's Python too.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

SETTLE_S = 0.2      # after resuming, before the first timed step: the scheduler has spread the load


class BackgroundLoadError(ValueError):
    """A --background value that is not K[:nice]."""


class BackgroundLoad:
    def __init__(self, processes: int, nice: int = 0):
        if processes < 0 or not -20 <= nice <= 19:
            raise BackgroundLoadError(f"--background: K >= 0 processes at nice -20..19, got {processes}:{nice}")
        self.processes, self.nice = processes, nice
        self._procs: list[subprocess.Popen] = []

    @classmethod
    def parse(cls, text: str) -> "BackgroundLoad":
        """K[:nice], e.g. "1" or "1:19"."""
        count, _, nice = text.partition(":")
        try:
            return cls(int(count), int(nice) if nice else 0)
        except ValueError:
            raise BackgroundLoadError(f"--background takes K[:nice] (busy processes, their nice value), "
                                      f"e.g. 1 or 1:19; got {text!r}") from None

    def label(self) -> str:
        return f"{self.processes} busy process{'es' if self.processes != 1 else ''} at nice {self.nice}"

    def _start(self) -> None:
        nice = self.nice
        for _ in range(self.processes):
            p = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                                 preexec_fn=(lambda: os.nice(nice)) if nice else None)
            os.kill(p.pid, signal.SIGSTOP)
            self._procs.append(p)

    def __enter__(self) -> "BackgroundLoad":
        if not self._procs:
            self._start()
        for p in self._procs:
            os.kill(p.pid, signal.SIGCONT)
        time.sleep(SETTLE_S)
        return self

    def __exit__(self, *exc) -> None:
        for p in self._procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGSTOP)

    def close(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self._procs.clear()
