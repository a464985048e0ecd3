"""Tests that need a program pip does not install: Graphviz's `dot` (OS package `graphviz`), headless
Chromium and its driver. On a bare machine, where the README's test command runs, they skip, saying what
is missing and how to install it; under CI (the CI variable set, as .ci/run does, which installs them) a
missing one fails the test.

    @needs_dot                      a test that draws with `dot` (the `dot` fixture of tests/conftest.py)
    require(missing_dot())          the same check inside a test, for one case of a parametrized test
"""
from __future__ import annotations

import os
import shutil

import pytest

DOT_INSTALL = "Graphviz's dot is not installed (Debian: apt-get install graphviz; macOS: brew install graphviz)"


def missing_dot() -> str | None:
    return None if shutil.which("dot") else DOT_INSTALL


def require(missing: str | None) -> None:
    """Skip with the reason when something is missing, or fail under CI."""
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs it, but {missing}")
        pytest.skip(missing)


needs_dot = pytest.mark.usefixtures("dot")
