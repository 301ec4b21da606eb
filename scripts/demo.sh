#!/usr/bin/env bash
# Builds plait and runs the main job on its small built-in default (the README's first command):
# `plait train` without --config trains a 4-layer byte-level GPT on the fortunes corpus
# (configs/default.json), about 1.5 minutes on 2 cores, and the loss falls from ~5.5 to ~2.3.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/build.sh"
build="${PLAIT_BUILD_DIR:-$root/build}"
# Passive OpenMP waiting unless the caller chose: on a machine shared with other busy processes,
# spinning workers steal each other's time slices (docs/engine.md, "Threads").
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
exec "$build/plait" train "$@"
