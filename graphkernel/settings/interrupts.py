"""Signals held while a step updates its Parameters, and the count of steps that completed.

Python runs a signal's handler in the main thread between two bytecodes: a Ctrl-C (SIGINT, whose
handler raises KeyboardInterrupt) can stop a compiled training step between two of its kernel
launches, after some Parameters were written and before the others. A step holds them instead:

    with HELD:                  SIGINT, SIGTERM, SIGHUP and SIGALRM, when their handler is a Python
        ...                     function (Ctrl-C's KeyboardInterrupt, a handler of the user's), are
                                recorded, not handled; when the outermost block ends, each recorded
                                one is raised again: its handler runs (its exception is raised) after
                                the block, never inside. Blocks nest (only the outermost holds);
                                another thread holds nothing (Python runs handlers in the main thread
                                only). A signal whose action is the system's (SIGTERM's default: the
                                process ends) is left alone.
    step_committed()            a step that updates Parameters calls it once they are all written
    committed_steps()           how many such steps this thread has completed: Model.train compares it
                                across an interrupted step to keep its step counter right

A step holds for the length of one call (a few milliseconds to a second): a Ctrl-C is answered at the
end of the step it arrives in.
"""
from __future__ import annotations

import _signal   # signal's C module: signal.getsignal/signal wrap every result in an enum (~5 us a call)
import signal
import threading

# The signals whose Python handlers conventionally end or interrupt a run: Ctrl-C, a polite kill, a
# closed terminal, a timeout alarm (checked every step: each costs a lookup, ~0.15 us)
HELD_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM")
                     if hasattr(signal, name))

_MAIN = threading.main_thread().ident
_get_ident = threading.get_ident
_getsignal, _setsignal = _signal.getsignal, _signal.signal


class _Held:
    """The context manager `HELD` (one instance: the state is the main thread's)."""

    __slots__ = ("depth", "saved", "pending")

    def __init__(self):
        self.depth = 0
        self.saved: list = []      # (signal, the handler to put back)
        self.pending: list = []    # signals that arrived while held, in order

    def _record(self, signum, frame):
        self.pending.append(signum)

    def __enter__(self):
        if _get_ident() != _MAIN:
            return self
        if self.depth == 0:
            record = self._record
            try:
                for s in HELD_SIGNALS:
                    handler = _getsignal(s)
                    if callable(handler) and handler != record:
                        _setsignal(s, record)
                        self.saved.append((s, handler))
            except BaseException:   # a signal not held yet raised in between: put back what we took
                self._restore()
                raise
        self.depth += 1
        return self

    def __exit__(self, *exc):
        if _get_ident() != _MAIN:
            return False
        self.depth -= 1
        if self.depth == 0:
            self._restore()
            if self.pending:
                pending, self.pending = dict.fromkeys(self.pending), []
                for s in pending:   # each handler now runs as if the signal came just now
                    signal.raise_signal(s)
        return False

    def _restore(self):
        saved, self.saved = self.saved, []
        for s, handler in saved:
            _setsignal(s, handler)


HELD = _Held()

_local = threading.local()


def step_committed() -> None:
    """Count one completed Parameter-updating step of this thread."""
    _local.count = getattr(_local, "count", 0) + 1


def committed_steps() -> int:
    """The Parameter-updating steps this thread has completed."""
    return getattr(_local, "count", 0)
