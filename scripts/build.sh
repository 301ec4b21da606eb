#!/usr/bin/env bash
# Configures and builds plait (Release) into build/ after making sure the dependencies are in.
# Extra arguments go to cmake's configure step (e.g. -DPLAIT_SANITIZE=ON).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
build="${PLAIT_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${PLAIT_BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
