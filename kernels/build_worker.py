"""The background builder's worker process: `python -m kernels.build_worker`.

It reads jobs from stdin, pickled one after another: (job id, kernel name, source, signature, cache
mode, cache directory, the parent's cache lock timeout); builds each through the kernel cache (kernels.cache.fetch_kernel: the entry is
written to disk with its manifest, under the entry's lock) and answers on its stdout, pickled:
(job id, None, seconds) when the kernel is on disk, (job id, "ErrorType: message", seconds) when it
did not build. Warnings the build gives (a CacheWarning) come back as the error when the process's
warning filters make them errors (the tests' PYTHONWARNINGS), else go to stderr. It runs at a low
priority (os.nice, given by the parent as argv[1]) and stops at the end of its stdin, or quietly
when the parent has exited before reading an answer.
"""
from __future__ import annotations

import os
import pickle
import sys
import time

from kernels.cache import fetch_kernel, set_lock_timeout


def main() -> int:
    nice = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if nice:
        try:
            os.nice(nice)
        except OSError:
            pass
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)   # anything printed goes to stderr: stdout carries the answers alone
    jobs = os.fdopen(os.dup(0), "rb")
    while True:
        try:
            job_id, name, source, sig, mode, cache_dir, timeout = pickle.load(jobs)
        except EOFError:
            return 0
        start = time.perf_counter()
        try:
            set_lock_timeout(timeout)
            fetch_kernel(name, name, source, sig, mode, cache_dir)
            error = None
        except Exception as e:  # noqa: BLE001 - the parent reports it as a failed build
            first = str(e).strip().splitlines()
            error = f"{type(e).__name__}: {first[0] if first else ''}"
        try:
            pickle.dump((job_id, error, time.perf_counter() - start), replies)
            replies.flush()
        except BrokenPipeError:   # the parent has exited (the kernel is on disk for its next run)
            os._exit(0)           # no flush at exit of a pipe nobody reads: no traceback on the user's terminal


if __name__ == "__main__":
    sys.exit(main())
