"""A failing rank ends the whole job, never a hang.

An MPI job whose rank raises and exits is stuck: its peers wait in their next collective for a rank that
is gone, and the failed rank itself waits in MPI_Finalize at exit (measured with MPICH 5 and Open MPI 5
alike: the job hangs until killed). So a process an MPI launcher started as one of several gets an
excepthook: an uncaught exception prints its traceback as Python does, headed by the rank, waits half a
second for the launcher to forward it, and then calls MPI_Abort on the world, which makes the launcher end
every rank at once with a non-zero exit: 0.7 s after the raise with Open MPI 5.0.11 (whose launcher then
prints its own "MPI_ABORT was invoked on rank r" notice), within a second with MPICH 5.0.2's Hydra (the
rank prints "Abort(1) on node r"). It is installed when graphkernel is imported
by such a process (so an error before init() ends the job too: MPI is initialized then, only to abort)
and again by init(). A KeyboardInterrupt ends the job the same way; `sys.exit(code)` is an ordinary
exit and is not intercepted.
"""
from __future__ import annotations

import os
import sys
import time
import traceback

_installed = [None]   # the hook we installed, so installing twice wraps once


def abort_job(code: int = 1) -> None:
    """End every rank of the job: MPI_Abort on the world (MPI is initialized here if it was not)."""
    try:
        from mpi4py import MPI   # the optional extra; only a launched process gets here
        MPI.COMM_WORLD.Abort(code)
    except Exception:  # noqa: BLE001 - no MPI to abort through: at least this process ends
        pass
    os._exit(code)


# after the report is written and before MPI_Abort: the launcher forwards a rank's output in chunks,
# and an abort can cut the last ones (seen with MPICH: a traceback without its final line)
FORWARD_SECONDS = 0.5


def _hook(previous, rank: int, size: int):
    def hook(kind, value, tb):
        try:
            head = f"graphkernel: rank {rank} of {size} raised {kind.__name__}; ending the job (MPI_Abort)\n"
            if previous is sys.__excepthook__:   # Python's report, written in one piece
                sys.stderr.write(head + "".join(traceback.format_exception(kind, value, tb)))
            else:                                # the program's own hook reports it
                sys.stderr.write(head)
                previous(kind, value, tb)
            sys.stderr.flush()
            sys.stdout.flush()
            time.sleep(FORWARD_SECONDS)
        finally:
            abort_job(1)
    return hook


def install(rank: int, size: int) -> None:
    """Make an uncaught exception on this rank end the job (the module docstring)."""
    if _installed[0] is not None and sys.excepthook is _installed[0]:
        return
    previous = sys.excepthook
    _installed[0] = _hook(previous, rank, size)
    sys.excepthook = _installed[0]
