"""The user's frame: the innermost caller outside the three packages (graphkernel, ir, kernels).

A warning raised deep inside a run (a data dump's dump_layer, an overflow) points at the user's line
with `warnings.warn(..., stacklevel=user_stacklevel())`; a tensor condition's error names the
user's statement that called bool() (graphkernel/tracing/branching.py reads `user_frame()`).
"""
from __future__ import annotations

import os
import sys

OWN_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                 for m in (sys.modules["ir"], sys.modules["kernels"], sys.modules["graphkernel"]))


def _own(frame) -> bool:
    return os.path.abspath(frame.f_code.co_filename).startswith(OWN_DIRS)


def user_frame():
    """The innermost frame of the caller's stack outside graphkernel, ir and kernels (None: there is none)."""
    frame = sys._getframe(1)
    while frame is not None and _own(frame):
        frame = frame.f_back
    return frame


def user_stacklevel() -> int:
    """The warnings.warn stacklevel, for its caller, of the first frame outside graphkernel, ir and kernels."""
    frame, level = sys._getframe(1), 1
    while frame is not None and _own(frame):
        frame, level = frame.f_back, level + 1
    return level
