#!/usr/bin/env bash
# CASE=b: tier (b)'s figure instead: configs/emulated-pp4.json (pp 4 Seq1F1B, 16 layers 4/4/4/4,
# every rank alone on its stage, the same emulated devices), rank 1 slowed 3x at step 10 of 40,
# stragglers.move_layers true and false; the lines printed are the layer moves.
# Tier (a) re-balancing's figure (issue 26; docs/runtime.md, "Stragglers and restarts"): the
# emulated 4-rank cluster of configs/emulated-pp2-dp2.json (pp 2 x dp 2 Seq1F1B; every rank an
# emulated device 6x slower than this CPU, so compute is mostly sleep and four ranks fit on two
# cores), rank 2 (stage 0, peer of rank 0) slowed 3x at step 10 of 40; the job trained with
# stragglers.rebalance true and false, back to back, PAIRS times (alternating which goes first).
# Prints, per run, tokens/s over steps 20-39 (their tokens over the sum of their step times, from
# --metrics) and the re-balance lines; then each pair's ratio and their median, with the load
# average before each run. Needs a built plait (PLAIT_BUILD_DIR, default build/).
# Usage: scripts/bench-rebalance.sh [OUT_DIR]   (PAIRS=3, SLOW=2:10:slow=3 by default)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${PLAIT_BUILD_DIR:-$root/build}"
out="${1:-$root/out/rebalance}"
pairs="${PAIRS:-3}"
case_="${CASE:-a}"
if [ "$case_" = b ]; then
  slow="${SLOW:-1:10:slow=3}"; config="$root/configs/emulated-pp4.json"; field=move_layers; lines="straggler|move layers"
else
  slow="${SLOW:-2:10:slow=3}"; config="$root/configs/emulated-pp2-dp2.json"; field=rebalance; lines="straggler|re-balance"
fi
mkdir -p "$out"
launcher=(mpirun -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
if [ "$(id -u)" -eq 0 ]; then launcher+=(--allow-run-as-root); fi
python3 - "$config" "$out/rebalance-off.json" "$field" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.setdefault("stragglers", {})[sys.argv[3]] = False
json.dump(c, open(sys.argv[2], "w"), indent=1)
EOF
for i in $(seq "$pairs"); do
  order=(on off)
  if [ $((i % 2)) -eq 0 ]; then order=(off on); fi
  for mode in "${order[@]}"; do
    cfg="$config"
    if [ "$mode" = off ]; then cfg="$out/rebalance-off.json"; fi
    rm -f "$out/$mode-$i.jsonl"
    echo "pair $i, re-balancing $mode: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    "${launcher[@]}" "$build/plait" train --config "$cfg" --inject-failure "$slow" \
      --metrics "$out/$mode-$i.jsonl" > "$out/$mode-$i.log" 2>&1
    grep -E "^($lines):" "$out/$mode-$i.log" | sed 's/^/  /' || true
  done
done
python3 - "$out" "$pairs" <<'EOF'
import json, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
def rate(path):
    tokens = seconds = 0.0
    for line in open(path):
        r = json.loads(line)
        if "perf" in r and 20 <= r["step"] <= 39:
            seconds += r["perf"]["step_seconds"]
            tokens += r["perf"]["tokens_per_second"] * r["perf"]["step_seconds"]
    return tokens / seconds
ratios = []
for i in range(1, pairs + 1):
    on, off = rate(f"{out}/on-{i}.jsonl"), rate(f"{out}/off-{i}.jsonl")
    ratios.append(on / off)
    print(f"pair {i}: steps 20-39: {on:.0f} tokens/s re-balanced, {off:.0f} without: {on / off:.2f}x")
print(f"median of {pairs}: {statistics.median(ratios):.2f}x (min {min(ratios):.2f}x, max {max(ratios):.2f}x)")
EOF
