#!/usr/bin/env bash
# The repository's benchmark run: `graphkernel bench` with OpenBLAS left to its own detection
# (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset, as the peers' recorded figures in docs/benchmarks.md were measured).
# Usage: bench/run.sh [--quick] [--only NAME] [--out DIR] [--threads N]   (results in bench/results/)
# With --threads N, numpy's OpenBLAS gets N threads too (it reads OPENBLAS_NUM_THREADS at import).
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    if [[ "${args[i]}" == "--threads" ]]; then
        export OPENBLAS_NUM_THREADS="${args[i + 1]}"
    fi
done
exec python -m graphkernel bench "$@"
