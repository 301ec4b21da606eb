#!/usr/bin/env bash
# Builds plait and runs the main job (the README's first command): a small multi-rank Seq1F1B
# training, `mpirun -np 2 plait train --config configs/seq1f1b-pp2.json`: a 4-layer byte-level
# GPT on the fortunes corpus cut into 2 pipeline stages, each sequence into 4 segments, one
# OpenMP thread per rank; the loss falls from ~4.9 to ~2.3 (means of 10 steps) in about a minute on
# a quiet 2-core machine (README: the measured time and that machine's sgemm peak).
# Extra arguments go to plait train (e.g. --steps 50, --html out/timeline.html).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/build.sh"
build="${PLAIT_BUILD_DIR:-$root/build}"
launcher=(mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
# mpirun refuses to run as root unless told (CI containers).
if [ "$(id -u)" -eq 0 ]; then launcher+=(--allow-run-as-root); fi
exec "${launcher[@]}" "$build/plait" train --config "$root/configs/seq1f1b-pp2.json" "$@"
