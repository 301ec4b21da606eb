#!/usr/bin/env bash
# Runs one multi-rank test under mpirun for CTest (cmake/PlaitMpiTest.cmake registers it) and
# decides its verdict: the exit status (zero, or non-zero with --expect-failure), a pattern
# stderr must match, and the seconds the whole job may take.
#
#   run_mpi_test.sh --ranks N [--expect-failure] [--stderr-regex RE] [--within S]
#                   [--timeout S] -- COMMAND [ARGS...]
#   --ranks 0 runs COMMAND directly, without mpirun (MPI starts as a one-rank singleton).
#
# Every rank runs with one OpenMP/BLAS thread and OpenMPI's yield-when-idle on: tests start
# 4-8 ranks on 2 cores, where any rank that spins or runs extra threads starves the rank it
# waits for (docs/comm.md).
set -uo pipefail

ranks=""
expect_failure=0
stderr_regex=""
within=""
timeout_s=120
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --expect-failure) expect_failure=1; shift ;;
    --stderr-regex) stderr_regex="$2"; shift 2 ;;
    --within) within="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "run_mpi_test.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
if [ -z "$ranks" ] || [ $# -eq 0 ]; then
  echo "run_mpi_test.sh: usage: --ranks N [options] -- COMMAND [ARGS...]" >&2
  exit 2
fi

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# ctest captures the output; escape codes would only clutter it.
export GTEST_COLOR=no
# Makes OpenMPI's own blocking calls (MPI_Init, MPI_Finalize, communicator creation) call
# sched_yield while they poll; plait's waits already yield and sleep on their own (backoff.h).
export OMPI_MCA_mpi_yield_when_idle=1

# Sanitizer builds (PLAIT_SANITIZE): OpenMPI keeps allocations from MPI_Init until exit, which
# LeakSanitizer would report; suppress those (tests/mpi/lsan_openmpi.supp). Complete stacks
# (slow unwinding) are needed to see the OpenMPI frames. Programs built without sanitizers
# ignore these variables.
here="$(cd "$(dirname "$0")" && pwd)"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan_openmpi.supp:print_suppressions=0"

launcher=()
if [ "$ranks" -gt 0 ]; then
  # --bind-to none: let the kernel move ranks between the 2 shared cores; pinning a rank to a
  #   core that another program is using would stall it.
  # -x: OpenMPI forwards these variables to every rank (OMPI_MCA_* are forwarded anyway).
  launcher=(mpirun -np "$ranks" --oversubscribe --bind-to none
            -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS)
  # mpirun refuses to run as root unless told; scripts/test.sh exports OpenMPI's consent
  # variables, a bare `ctest` may not, so the flag covers both.
  if [ "$(id -u)" -eq 0 ]; then launcher+=(--allow-run-as-root); fi
fi

stderr_file="$(mktemp)"
trap 'rm -f "$stderr_file"' EXIT
start_ns=$(date +%s%N)
# A hard limit of our own, so a hang is reported as one (CTest's TIMEOUT is the backstop).
timeout --kill-after=5 "$timeout_s" "${launcher[@]}" "$@" 2> "$stderr_file"
status=$?
end_ns=$(date +%s%N)
cat "$stderr_file" >&2
elapsed=$(awk -v a="$start_ns" -v b="$end_ns" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')

verdict=0
say() { echo "run_mpi_test.sh: $*" >&2; }
say "${ranks} ranks: exit status ${status} after ${elapsed} s: $*"
# timeout(1) exits 124, or 137 when it had to SIGKILL; a job whose rank was SIGKILLed on
# purpose also exits 137, but long before the limit.
if [ "$status" -eq 124 ] ||
   { [ "$status" -eq 137 ] && awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e >= t) }'; }; then
  say "FAIL: the job did not end within ${timeout_s} s (hang)"
  exit 1
fi
if [ "$expect_failure" -eq 1 ]; then
  if [ "$status" -eq 0 ]; then say "FAIL: expected a non-zero exit status"; verdict=1; fi
else
  if [ "$status" -ne 0 ]; then say "FAIL: expected exit status 0"; verdict=1; fi
fi
if [ -n "$stderr_regex" ] && ! grep -Ezq -- "$stderr_regex" "$stderr_file"; then
  say "FAIL: stderr does not match /${stderr_regex}/"
  verdict=1
fi
if [ -n "$within" ] && awk -v e="$elapsed" -v w="$within" 'BEGIN { exit !(e > w) }'; then
  say "FAIL: the job took ${elapsed} s, more than the ${within} s allowed"
  verdict=1
fi
exit "$verdict"
