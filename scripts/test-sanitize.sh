#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (-DPLAIT_SANITIZE=ON:
# any memory error, leak or undefined behaviour aborts the test that hit it), in its own build
# tree. Extra arguments go to cmake's configure step, as for scripts/test.sh.
#
#   scripts/test-sanitize.sh            build-asan/, RelWithDebInfo (-O2 -g)
#   PLAIT_BUILD_DIR=... PLAIT_BUILD_TYPE=... scripts/test-sanitize.sh
#
# OpenMPI keeps allocations from MPI_Init until exit (also in one-rank runs of the plait binary);
# LeakSanitizer is told to ignore those (tests/mpi/lsan_openmpi.supp, nothing of plait's), with
# complete stacks so the suppressions see the OpenMPI frames: the plait executable asks for them
# itself (cmake/sanitizer_default_options.cpp), multi-rank tests through run_mpi_test.sh; the
# other tests keep ASan's fast unwinding (the slow one on every malloc costs them up to 14x).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PLAIT_BUILD_DIR="${PLAIT_BUILD_DIR:-$root/build-asan}"
export PLAIT_BUILD_TYPE="${PLAIT_BUILD_TYPE:-RelWithDebInfo}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_stack_use_after_return=0"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$root/tests/mpi/lsan_openmpi.supp:print_suppressions=0"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1"
start=$(date +%s)
"$root/scripts/test.sh" -DPLAIT_SANITIZE=ON -DPLAIT_NATIVE=ON "$@"
echo "scripts/test-sanitize.sh: build and tests took $(( $(date +%s) - start )) s" >&2
