#!/usr/bin/env bash
# Builds plait's libFuzzer targets (fuzz/: clang, every library instrumented for coverage and
# AddressSanitizer + UndefinedBehaviorSanitizer, -DPLAIT_FUZZ=ON) and runs each for a while,
# printing the executions it made and any crash, hang (10 s per input) or sanitizer report.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 600 seconds each, every target
#   PLAIT_FUZZ_BUILD_DIR=...                  default: build-fuzz
#
# Each target keeps its growing corpus in <build>/fuzz/corpus/<target> (seeded from
# fuzz/seeds/<target>); a crashing input is written to <build>/fuzz/artifacts/<target>/ -- add it
# to fuzz/regressions/<target>/ (ctest replays those) and fix the parser. Exits non-zero if any
# target found something.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-600}"
shift || true
build="${PLAIT_FUZZ_BUILD_DIR:-$root/build-fuzz}"

PLAIT_FUZZ=1 "$root/scripts/install-deps.sh"
CXX=clang++ cmake -S "$root" -B "$build" -DPLAIT_FUZZ=ON -DPLAIT_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target plait_fuzz

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=($(sed -n '/^set(PLAIT_FUZZ_TARGETS/,/)/p' "$root/fuzz/CMakeLists.txt" |
             tr '()' '  ' | sed 's/set PLAIT_FUZZ_TARGETS//' | tr -s ' \n' ' '))
fi
status=0
for t in "${targets[@]}"; do
  corpus="$build/fuzz/corpus/$t"
  artifacts="$build/fuzz/artifacts/$t/"
  mkdir -p "$corpus" "$artifacts"
  log="$build/fuzz/$t.log"
  echo "fuzz_$t: ${seconds} s ..." >&2
  if "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
       -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" >"$log" 2>&1; then
    verdict="no crash, hang or sanitizer report"
  else
    verdict="FOUND something: see $log and $artifacts"
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  echo "fuzz_$t: $runs executions in $seconds s, corpus $(ls "$corpus" | wc -l) inputs: $verdict"
done
exit "$status"
