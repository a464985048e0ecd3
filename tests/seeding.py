"""The seed of a test run: what hypothesis draws from and which share of the sweep runs.

    from seeding import commit_seed       # (or tests.seeding) the same int everywhere in one run
    rng = np.random.default_rng(commit_seed())

GRAPHKERNEL_SEED wins when set. Otherwise CI (`CI` set, as `.ci/run` does) derives the seed from the
commit (`git rev-parse HEAD`), so every commit draws new examples and rerunning a commit replays its
own; a local run, or a CI run without a git checkout, takes a fresh random seed. The seed is computed
once and kept in GRAPHKERNEL_SEED, so a module imported under two names and the subprocesses of the run
all see the same one. tests/conftest.py prints it, with the command that reproduces the run.
"""
from __future__ import annotations

import os
import secrets
import subprocess

ENV = "GRAPHKERNEL_SEED"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = {"how": ""}   # how this process got its seed, for the header: "commit abc123", "random", ...


def commit_seed() -> int:
    """This run's seed (a non-negative int below 2**32), the same for every call."""
    given = os.environ.get(ENV, "").strip()
    if given:
        try:
            seed = int(given, 0)
        except ValueError:
            raise ValueError(f"{ENV}={given!r} is not an integer") from None
        SOURCE["how"] = SOURCE["how"] or f"from {ENV}"
        return seed
    commit = _head() if os.environ.get("CI") else None
    if commit:
        seed, SOURCE["how"] = int(commit[:8], 16), f"from commit {commit[:12]}"
    else:
        seed = secrets.randbelow(2**32)
        SOURCE["how"] = "random: no git checkout" if os.environ.get("CI") else "random: a local run"
    os.environ[ENV] = str(seed)
    return seed


def _head() -> str | None:
    try:
        run = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = run.stdout.strip()
    return commit if run.returncode == 0 and len(commit) >= 8 else None
