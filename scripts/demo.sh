#!/usr/bin/env bash
# Builds plait and runs the main job on its small built-in default (the README's first command).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/build.sh"
build="${PLAIT_BUILD_DIR:-$root/build}"
exec "$build/plait" version
