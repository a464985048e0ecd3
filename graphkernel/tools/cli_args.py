"""argparse value types shared by the command line's subcommands (graphkernel/tools/cli.py, onnx/run.py,
bench/command.py)."""
from __future__ import annotations

import argparse


def non_negative_int(text: str) -> int:
    """argparse type: 0, 1, 2, ..."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """argparse type: 1, 2, ..."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)
