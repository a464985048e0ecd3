"""Prints what a rank sees: `REPORT {"rank": .., "size": .., "threads": .., "env": {...}}` (tests/test_dist_launch.py):
"threads" is graphkernel's pool (kernels.threads).
With FAIL=<rank>, that rank raises after printing."""
import json
import os

from graphkernel import ops
from graphkernel.communication import get_group_size, get_rank, init
from kernels import threads

init()
seen = {"rank": get_rank(), "size": get_group_size(), "threads": threads.pool_threads(),
        "env": {k: os.environ.get(k) for k in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}}
print("REPORT " + json.dumps(seen), flush=True)
ops.Barrier()()   # every rank has reported before one fails
if os.environ.get("FAIL") == str(get_rank()):
    raise ValueError(f"rank {get_rank()} was asked to fail")
