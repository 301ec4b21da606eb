#!/usr/bin/env bash
# Builds plait and runs the whole test suite (the README's second command; .ci/run calls it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/build.sh" "$@"
build="${PLAIT_BUILD_DIR:-$root/build}"
# MPI as root (CI containers) needs explicit consent; tests that start mpirun rely on this.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 600
