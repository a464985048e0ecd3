"""Where a program starts writing its Parameters: the commit point of an atomic step.

A training step's program updates Parameters in place (`Program.assigned`: input positions whose
buffers the step writes). The launches before the first such write read the Parameters and write
temporaries only, so a call stopped there leaves every Parameter as it was; from that launch on the
step must run to its end. graphkernel/compiler.py builds the all-or-nothing guarantee on this:

    launch      the position, in `Program.launch_list`, of the first launch that writes an assigned
                input (an If counts as a whole: where its branches' launches start); None: none does
    may_raise   whether a launch from there on can raise by itself: a host op (the user's Python), an
                op the numpy reference computes, a generated kernel's stand-in while the kernel builds
                in the background (numpy op by op: kernels/standin.py), anything but the generated
                kernels, BLAS, copies and the scatter-add. Generated kernels are compiled with numpy's
                error model and run no Python: they do not raise; the scatter-add
                (UnsortedSegmentSum, kernels/scatter.py) skips ids out of range instead of raising.
                When one that can raise does, the caller keeps a copy of the Parameters to put back (and
                asks again once the stand-ins' kernels have arrived): a whole model's Parameters and
                optimizer state, copied every step.

A launch writes an input when one of its output storages is that input's (an update written in place,
or a final Assign copy); a Reshape of an input shares its storage, so it counts too.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels.background import PendingLaunch
from kernels.executor import GENERATED, Conditional

# Launch variants that raise nothing of their own: generated numba kernels (numpy's error model),
# numpy's BLAS and transposes, copies, the scatter-add. (An If is no launch: its branches' launches
# stand in its place.)
_SAFE = frozenset(GENERATED) | {"numpy", "copy", "scatter"}


@dataclass(frozen=True)
class CommitPoint:
    launch: int | None      # position of the first launch writing an assigned input; None: no write
    may_raise: bool         # a launch from `launch` on can raise of its own accord


def commit_point(program) -> CommitPoint:
    """The commit point of `program` (a kernels.Program)."""
    assigned = {s for s, st in enumerate(program.storages) if st.kind == "input" and st.index in program.assigned}
    for k, step in enumerate(program.steps):
        if set(step.outs) & assigned or (isinstance(step.fn, Conditional) and _branches_write(step.fn)):
            tail = program.launch_list[program.positions[k]:]
            return CommitPoint(program.positions[k], any(not _safe(s) for s in tail))
    return CommitPoint(None, False)


def _branches_write(conditional: Conditional) -> bool:
    """An If's branch writes into the buffers it was given (it updates an input in place)."""
    return any(p.assigned for p in conditional.programs)


def _safe(step) -> bool:
    return step.info.target != "host" and step.info.variant in _SAFE and not isinstance(step.fn, PendingLaunch)
