"""What the fuzz tests share: their example counts, a bound on each example's time and memory, and the
line between an error raised on purpose and a slip of ours that some safety net caught.

    @fuzz_settings(400)               400 examples in CI's run, an eighth in the README command's (examples)
    with bounded(30, "what"): ...     TimeoutError after 30 s, MemoryError past MEMORY_HEADROOM
    deliberate(e)                     a GraphKernelError raised on purpose about the input
"""
from __future__ import annotations

import os
import resource
import signal
from contextlib import contextmanager

from hypothesis import HealthCheck, settings

from ir.errors import ExecutionError, GraphKernelError, VerifyError
from ir.ops.host import HostFunctionError

EXAMPLE_SECONDS = 30          # one example (load, compile, run) taking longer counts as a hang
MEMORY_HEADROOM = 2 << 30     # one example mapping more than this fails (MemoryError): an unchecked size


SHARE_ENV = "GRAPHKERNEL_EXAMPLE_SHARE"   # tests/conftest.py sets it: 1 with --runslow (CI), else --grid-share


def examples(full: int) -> int:
    """How many examples a property test draws: GRAPHKERNEL_FUZZ_EXAMPLES when set (a long run), else
    `full` in CI's selection (--runslow) and 1 in GRAPHKERNEL_EXAMPLE_SHARE of them (at least 2) in the
    README command's."""
    given = int(os.environ.get("GRAPHKERNEL_FUZZ_EXAMPLES", "0"))
    share = int(os.environ.get(SHARE_ENV, "1"))
    return given or (full if share <= 1 else max(2, -(-full // share)))


def fuzz_settings(default: int):
    """examples(default) examples, no deadline, no health check on slow or large draws."""
    return settings(max_examples=examples(default), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@contextmanager
def bounded(seconds: int, what: str):
    """Fail (rather than hang or swap) when the body runs longer than `seconds` or maps more than
    MEMORY_HEADROOM bytes beyond what the process has mapped already (a MemoryError then)."""
    def expire(signum, frame):
        raise TimeoutError(f"{what} ran longer than {seconds} s")
    mapped = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    previous_limit = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped + MEMORY_HEADROOM, previous_limit[1]))
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, previous_limit)


def deliberate(e: BaseException) -> bool:
    """True for an error raised on purpose about the model or its data: a GraphKernelError that is not
    a verifier complaint about IR we built, nor a safety net that caught one of our own slips."""
    if not isinstance(e, GraphKernelError) or isinstance(e, VerifyError):
        return False
    if "cannot convert it (" in str(e):  # replay's net around a converter that tripped
        return False
    if isinstance(e, HostFunctionError):  # a host function (onnx.reference, mix_compile_mode) failing
        return True
    if isinstance(e, ExecutionError):  # a node failing at run time: only on purpose (a data check)
        return e.__cause__ is not None and deliberate(e.__cause__) and "reference of" not in str(e)
    return True
