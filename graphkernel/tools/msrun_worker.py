"""One rank of `graphkernel msrun`: started by mpiexec as a plain script (`python msrun_worker.py LOG_DIR
NAME SCRIPT ARGS...`, never `-m`, so nothing is imported before the user's script), it sends its output to
LOG_DIR/<NAME with {rank} replaced>.log and runs SCRIPT as `python SCRIPT ARGS` would (as __main__, with
sys.argv and sys.path[0] set to the script's). The rank comes from the launcher's variables (MPICH's
PMI_RANK, Open MPI's OMPI_COMM_WORLD_RANK)."""
import os
import runpy
import sys


def main() -> None:
    log_dir, name, script, *args = sys.argv[1:]
    rank = next((os.environ[k] for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK") if k in os.environ), "0")
    path = os.path.join(log_dir, name.replace("{rank}", rank) + ".log")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)   # line-buffered: the log follows the run
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
