"""MindSpore 2.10's own data-parallel run of tests/mpi_scripts/mlp_dp.py: the per-rank losses the distributed
tests compare ours with (tests/data/mindspore_dp_losses.json).

    python bench/mindspore_dist_check.py --mindspore-python V/bin/python
                                         [--write tests/data/mindspore_dp_losses.json]

The script is copied into a temporary folder with `graphkernel` changed to `mindspore` in its import lines
and nowhere else (as bench/official_bert_check.py does for the BERT sources), then run by MindSpore's
`msrun --worker_num=2 --local_worker_num=2 --join=True` (its mccl backend on the CPU), with the runs
RUNS; each rank writes its losses. Printed: the losses per run and rank; with --write, the JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "tests", "mpi_scripts", "mlp_dp.py")
RUNS = ["mean:mean=1", "sum:mean=0", "train:cell=train"]   # CPU, GRAPH_MODE, a jitted step (the script's DEFAULTS)
STEPS = 4
IMPORT_LINE = re.compile(r"^\s*(from|import)\s")


def mindspore_copy(dest: str) -> str:
    with open(SCRIPT, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    lines = [re.sub(r"\bgraphkernel\b", "mindspore", line) if IMPORT_LINE.match(line) else line for line in lines]
    path = os.path.join(dest, "mlp_dp.py")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mindspore-python", required=True, help="a Python with mindspore 2.10 installed")
    ap.add_argument("--write", metavar="JSON", help="write the losses here (tests/data/mindspore_dp_losses.json)")
    ap.add_argument("--master-port", type=int, default=8131)
    args = ap.parse_args()
    bin_dir = os.path.dirname(args.mindspore_python)
    version = subprocess.run([args.mindspore_python, "-c", "import mindspore; print(mindspore.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    with tempfile.TemporaryDirectory() as tmp:
        script = mindspore_copy(tmp)
        out = os.path.join(tmp, "out")
        cmd = [os.path.join(bin_dir, "msrun"), "--worker_num=2", "--local_worker_num=2",
               f"--master_port={args.master_port}", f"--log_dir={os.path.join(tmp, 'logs')}", "--join=True",
               script, "--out", out, "--steps", str(STEPS)] + [a for run in RUNS for a in ("--run", run)]
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        done = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
        if done.returncode:
            for name in sorted(os.listdir(os.path.join(tmp, "logs"))):
                with open(os.path.join(tmp, "logs", name), errors="replace") as f:
                    print(f"--- {name}\n" + "".join(line for line in f if "[WARNING]" not in line)[-4000:])
            print(f"msrun failed ({done.returncode})", file=sys.stderr)
            return 1
        result = {"mindspore": version, "steps": STEPS, "runs": {}, "command": "python bench/mindspore_dist_check.py"}
        for run in RUNS:
            name = run.partition(":")[0]
            result["runs"][run] = {}
            for rank in (0, 1):
                with open(os.path.join(out, name, f"rank{rank}.json")) as f:
                    result["runs"][run][f"rank{rank}"] = json.load(f)["losses"]
    for run, ranks in result["runs"].items():
        for rank, losses in ranks.items():
            print(f"{run:20s} {rank}: {' '.join(f'{x:.8f}' for x in losses)}")
    if args.write:
        with open(args.write, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
