"""Shared test setup: one kernel cache directory per test run (subprocesses inherit it through the
environment), ir.verify after every pass, and a fresh context for every test."""
import os
import tempfile

import pytest

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
