"""Shared test setup: one kernel cache directory per test run (subprocesses inherit it through the
environment), ir.verify after every pass, a fresh context for every test, and hypothesis's CI profile."""
import os
import tempfile

import pytest
from hypothesis import settings

# CI (`.ci/run` sets CI=1) replays the same generated examples on every run, so a red build is
# reproducible and never a lottery; a local run explores fresh examples each time.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

_CACHE = tempfile.mkdtemp(prefix="graphkernel-test-cache-")
os.environ.setdefault("GRAPHKERNEL_CACHE_DIR", _CACHE)
os.environ["GRAPHKERNEL_VERIFY"] = "1"


@pytest.fixture(autouse=True)
def fresh_context():
    from graphkernel import context
    context.reset_context()
    context.reset_graph_id()
    yield
    context.reset_context()


@pytest.fixture
def cpu():
    """The numpy reference target."""
    from graphkernel import context
    context.set_context(device_target="CPU")
