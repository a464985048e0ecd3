"""`graphkernel msrun`: MindSpore's msrun launcher, on one machine, over mpiexec.

    graphkernel msrun --worker_num=2 --local_worker_num=2 [--master_port=8118] [--log_dir=DIR]
                      [--join=True] [--cluster_time_out=600] [--worker_log_name=NAME] script.py ARGS...

runs `mpiexec -n N python script.py ARGS` with the mpiexec beside this Python, else on PATH, MPICH's or
Open MPI's, whichever it is (graphkernel/communication/mpiexec.py: Open MPI's gets --oversubscribe and
--bind-to none; as root it is refused, naming Open MPI's switch, unless that is set; a launcher of another
MPI than the one mpi4py loads is refused), each rank writing its output to LOG_DIR/worker_<rank>.log as
msrun does (graphkernel/tools/msrun_worker.py); the launcher's own output goes to LOG_DIR/mpiexec.log, and
its last lines are shown when the job fails. Each rank gets its share of the cores: NUMBA_NUM_THREADS,
OPENBLAS_NUM_THREADS and OMP_NUM_THREADS set to max(1, cores // N) unless already set
(graphkernel/communication/launcher.py). --cluster_time_out bounds the time every rank may take to reach
init() (GRAPHKERNEL_INIT_TIMEOUT). With --join=True (or when the logs should be followed) msrun waits for
the job, prints the workers' logs as they grow and exits with the job's status; with --join=False it
starts the job and returns.

msrun's multi-machine flags (worker_num other than local_worker_num, a remote --master_addr, --node_rank,
--rank_table_file) are refused: several machines run through mpiexec itself with a hostfile
(docs/distributed.md). --master_port is accepted and checked, but unused: MPI needs no scheduler port.
"""
from __future__ import annotations

import argparse
import ast
import os
import socket
import subprocess
import sys
import time

from ir.errors import GraphKernelError
from graphkernel.communication import mpiexec
from graphkernel.communication.launcher import rank_environment
from graphkernel.communication.management import INIT_TIMEOUT_ENV
from graphkernel.communication.mpiexec import Mpiexec, MpiexecError

LAUNCHER_LOG = "mpiexec.log"   # the launcher's own output, beside the workers' logs
LOCAL_ADDRS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")
MULTI_NODE = ("docs/distributed.md: on several machines run `mpiexec -f hostfile -n N python script.py` (MPICH) "
              "or `mpirun --hostfile hostfile -np N python script.py` (Open MPI)")


class MsrunError(GraphKernelError, ValueError):
    """msrun flags this one-machine launcher cannot honour, or no mpiexec to run on."""


def _bool(text: str) -> bool:
    value = ast.literal_eval(text) if text in ("True", "False") else text.lower() in ("1", "true", "yes")
    return bool(value)


def add_msrun_parser(sub) -> None:
    p = sub.add_parser("msrun", help="MindSpore's msrun on one machine: N ranks of a script over mpiexec",
                       description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter,
                       allow_abbrev=False)   # a script's --worker is its own, not an abbreviation of --worker_num
    p.add_argument("--worker_num", type=int, default=8, help="ranks in the job (default 8, as msrun)")
    p.add_argument("--local_worker_num", type=int, default=8, help="ranks on this machine: must equal worker_num")
    p.add_argument("--master_addr", default="127.0.0.1", help="must be this machine")
    p.add_argument("--master_port", type=int, default=8118, help="accepted, unused (MPI needs no scheduler)")
    p.add_argument("--node_rank", type=int, default=-1, help="only -1 or 0 (one machine)")
    p.add_argument("--log_dir", default="", help="where worker_<rank>.log go (default: the current directory)")
    p.add_argument("--join", type=_bool, default=False, help="wait for the job and follow its logs (True/False)")
    p.add_argument("--cluster_time_out", type=int, default=600, help="seconds every rank may take to reach init()")
    p.add_argument("--bind_core", type=_bool, default=False, help="accepted; ranks share the cores by thread count")
    p.add_argument("--worker_log_name", default="", help="log name instead of worker_{rank} ({rank} replaced)")
    p.add_argument("--rank_table_file", default="", help="refused (several machines: mpiexec with a hostfile)")
    p.add_argument("task_script", help="the script every rank runs")
    p.add_argument("task_script_args", nargs=argparse.REMAINDER, help="its arguments")
    p.set_defaults(run=run_msrun)


def check(args) -> None:
    if args.worker_num < 1 or args.local_worker_num < 1:
        raise MsrunError(f"msrun: --worker_num={args.worker_num} and --local_worker_num={args.local_worker_num} "
                         "must be positive")
    if args.worker_num != args.local_worker_num:
        raise MsrunError(f"msrun: --worker_num={args.worker_num} with --local_worker_num={args.local_worker_num} "
                         f"spans several machines; graphkernel msrun runs on one. {MULTI_NODE}")
    if args.master_addr not in LOCAL_ADDRS and args.master_addr not in (socket.gethostname(), socket.getfqdn()):
        raise MsrunError(f"msrun: --master_addr={args.master_addr} is another machine; graphkernel msrun runs on "
                         f"this one. {MULTI_NODE}")
    if args.node_rank not in (-1, 0):
        raise MsrunError(f"msrun: --node_rank={args.node_rank} is a multi-machine flag. {MULTI_NODE}")
    if args.rank_table_file:
        raise MsrunError(f"msrun: --rank_table_file is not supported. {MULTI_NODE}")
    if not 1024 <= args.master_port <= 65535:
        raise MsrunError(f"msrun: --master_port={args.master_port} must be in 1024..65535")
    if args.cluster_time_out < 1:
        raise MsrunError(f"msrun: --cluster_time_out={args.cluster_time_out} must be a positive number of seconds")
    if not os.path.isfile(args.task_script):
        raise MsrunError(f"msrun: the script {args.task_script!r} does not exist")


def find_launcher() -> Mpiexec:
    """This environment's mpiexec, checked: one that can start the job here, of the MPI mpi4py loads."""
    try:
        found = mpiexec.find()
        why = found.refusal() or mpiexec.mismatch(found, mpiexec.mpi4py_library(sys.executable))
    except MpiexecError as e:
        raise MsrunError(f"msrun: {e}") from None
    if why:
        raise MsrunError(f"msrun: {why}")
    return found


def command(args, log_dir: str, launcher: Mpiexec) -> list[str]:
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "msrun_worker.py")
    name = args.worker_log_name or "worker_{rank}"
    return launcher.command(args.worker_num, [sys.executable, worker, log_dir, name,
                                              os.path.abspath(args.task_script), *args.task_script_args])


def run_msrun(args) -> int:
    check(args)
    launcher = find_launcher()
    log_dir = os.path.abspath(args.log_dir or ".")
    os.makedirs(log_dir, exist_ok=True)
    env = dict(os.environ, **rank_environment(args.local_worker_num))
    env[INIT_TIMEOUT_ENV] = str(args.cluster_time_out)
    cmd = command(args, log_dir, launcher)
    print(f"msrun: {args.worker_num} ranks of {args.task_script} over {launcher.label}'s mpiexec; logs in "
          f"{log_dir}/{(args.worker_log_name or 'worker_{rank}')}.log", flush=True)
    launcher_log = open(os.path.join(log_dir, LAUNCHER_LOG), "wb")
    job = subprocess.Popen(cmd, env=env, stdout=launcher_log, stderr=subprocess.STDOUT,
                           start_new_session=not args.join)
    if not args.join:
        print(f"msrun: started (pid {job.pid}); --join=True waits for it", flush=True)
        return 0
    status = follow(job, log_dir, args)
    launcher_log.close()
    if status:
        print(f"msrun: the job failed (exit status {status}); see the logs in {log_dir}", file=sys.stderr)
        said = launcher_says(log_dir)
        if said:
            print(f"msrun: {os.path.basename(cmd[0])} said ({LAUNCHER_LOG}):\n{said}", file=sys.stderr)
    return status


def launcher_says(log_dir: str, limit: int = 40) -> str:
    """The last lines the launcher itself wrote (Open MPI's abort notice, Hydra's BAD TERMINATION, a
    launcher that could not start the ranks): the ranks' own output is in their logs."""
    try:
        with open(os.path.join(log_dir, LAUNCHER_LOG), errors="replace") as f:
            lines = [line.rstrip() for line in f.read().replace("\0", "").splitlines() if line.strip()]
    except OSError:
        return ""
    return "\n".join(lines[-limit:])


def follow(job, log_dir: str, args) -> int:
    """Print every worker log's new lines (each prefixed by its file) until the job ends."""
    names = [(args.worker_log_name or "worker_{rank}").replace("{rank}", str(r)) + ".log"
             for r in range(args.worker_num)]
    offsets = dict.fromkeys(names, 0)
    while True:
        done = job.poll() is not None
        for name in names:
            path = os.path.join(log_dir, name)
            if not os.path.exists(path):
                continue
            with open(path, "rb") as f:
                f.seek(offsets[name])
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1 if not done else len(chunk)
            if end:
                for line in chunk[:end].decode(errors="replace").splitlines():
                    print(f"[{name[:-4]}] {line}", flush=True)
                offsets[name] += end
        if done:
            return job.returncode
        time.sleep(0.2)
