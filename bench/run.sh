#!/usr/bin/env bash
# The repository's benchmark run: `graphkernel bench` with OpenBLAS left to its own detection
# (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset, as ../shared/ANCHORS.md measured the peers).
# Usage: bench/run.sh [--quick] [--only NAME] [--out DIR]   (results in bench/results/ by default)
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
exec python -m graphkernel bench "$@"
