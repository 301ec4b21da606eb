#!/usr/bin/env bash
# How fast a failing rank stops a `plait train` job (docs/runtime.md, "Failures"): for each way
# of failing (an exception, an emulated device out of memory, SIGKILL mid-step, SIGKILL while
# saving a checkpoint, SIGKILL during validation, a NaN loss, a rank SIGSTOPped or stuck alive,
# which the stall watchdog ends), runs the 4-rank tiny Seq1F1B job
# of tests/runtime/mpi/tiny_pp4.json (with validation and checkpoints for the last three) a few times and
# prints the exit status, the time from the failure (the first "plait:" line on stderr, polled
# every 5 ms) to mpirun's exit, and the whole job's time (start-up included).
#   scripts/bench-failure-exit.sh [runs]      (PLAIT_BUILD_DIR selects the build, default build/)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${PLAIT_BUILD_DIR:-$root/build}"
runs="${1:-5}"
launcher=(mpirun -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
if [ "$(id -u)" -eq 0 ]; then launcher+=(--allow-run-as-root); fi
tiny="$root/tests/runtime/mpi/tiny_pp4.json"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

measure() {  # name, then plait train arguments
  local name="$1"; shift
  for ((i = 1; i <= runs; ++i)); do
    local err="$scratch/err" start failed="" end status
    : > "$err"
    rm -rf "$scratch/ckpt"  # the checkpointing job starts fresh each time
    start=$(date +%s.%N)
    "${launcher[@]}" "$build/plait" train "$@" > /dev/null 2> "$err" &
    local pid=$!
    while kill -0 "$pid" 2> /dev/null; do
      if [ -z "$failed" ] && grep -q "^plait: " "$err"; then failed=$(date +%s.%N); fi
      sleep 0.005
    done
    wait "$pid"; status=$?
    end=$(date +%s.%N)
    [ -z "$failed" ] && failed=$end
    printf "%-14s run %d: exit %3d, failure to exit %5.2f s, whole job %5.2f s: %s\n" "$name" "$i" \
      "$status" "$(awk "BEGIN{print $end - $failed}")" "$(awk "BEGIN{print $end - $start}")" \
      "$(grep -m1 -E "^plait: |exited on signal" "$err" | cut -c1-110)"
  done
}

measure throw --config "$tiny" --inject-failure 2:3
measure out-of-memory --config "$root/tests/runtime/mpi/tiny_pp4_memory_cap.json"
measure sigkill --config "$tiny" --inject-failure 3:2:kill
# The same job with validation every 2 steps and a checkpoint every 2 steps.
saving="$scratch/tiny_pp4_saving.json"
sed -e 's|"segments": 2}|"segments": 2, "eval_every": 2}|' \
    -e 's|"data": {"paths": \["/usr/share/games/fortunes"\]}|"data": {"paths": ["/usr/share/games/fortunes/fortunes"], "val_paths": ["/usr/share/games/fortunes/literature"]}, "checkpoint": {"dir": "'"$scratch"'/ckpt", "every": 2}|' \
    "$tiny" > "$saving"
measure kill-in-save --config "$saving" --inject-failure 2:4:kill-in-save
measure kill-in-eval --config "$saving" --inject-failure 1:2:kill-in-eval
measure nan-loss --config "$saving" --inject-failure 3:3:nan-loss
# A rank that stops making progress, with the stall watchdog at 2 s (train.stall_timeout_s).
stalling="$scratch/tiny_pp4_stall.json"
sed -e 's|"segments": 2}|"segments": 2, "stall_timeout_s": 2}|' "$tiny" > "$stalling"
measure sigstop --config "$stalling" --inject-failure 1:3:stop
measure hang --config "$stalling" --inject-failure 2:3:hang
