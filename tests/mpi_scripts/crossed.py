"""Two ranks waiting in different collectives: rank 0 in a Barrier of the group "pair" (both ranks), rank 1
in a Barrier of the world; with a short GRAPHKERNEL_COMM_TIMEOUT each times out and names the other, and
the collective the other waits in (tests/test_dist_faults.py).

    mpiexec -n 2 python tests/mpi_scripts/crossed.py
"""
from graphkernel import ops
from graphkernel.communication import init, get_rank, create_group
init()
create_group("pair", [0, 1])
if get_rank() == 0:
    ops.Barrier("pair")()
else:
    ops.Barrier()()
