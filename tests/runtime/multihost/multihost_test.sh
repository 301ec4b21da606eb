#!/usr/bin/env bash
# plait across machines, on one machine: two hosts made as Linux network namespaces, each with
# its own hostname, joined through a switch namespace by veth pairs (and shaped into a slower,
# longer link with tc: netem's delay and rate, or tbf's rate where the kernel lacks netem),
# launched the way a cluster user does: `mpirun --hostfile` from the first host, Open MPI's rsh
# launcher reaching the other host through an agent that enters its namespace. MPI runs over
# TCP on the veths only; shared memory is common to network namespaces (one /dev/shm), so the
# shared-memory transport is turned off explicitly (--mca btl tcp,self) and the BTL selection
# log is checked to show it is. Then:
#   1. a pp 2 pipeline whose stages sit on different hosts trains to the single-host result bit
#      for bit (every step's loss, gradient norm and learning rate);
#   2. plait profile links measures the link between the hosts, the shaped one, and plait plan
#      plans the two-machine cluster from that measurement.
# The namespaces are created here and removed on exit; where they cannot be made (not root, no
# iproute2, a container without CAP_SYS_ADMIN) the test is skipped (exit 77) saying why.
# docs/runtime.md, "Running on several machines", walks through the same steps by hand.
#
#   multihost_test.sh PLAIT_BINARY WORK_DIR
set -euo pipefail

plait="$1"
work="$2"
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "making network namespaces needs root (ip netns add)"
command -v ip >/dev/null || skip "iproute2's ip is not installed"
command -v unshare >/dev/null || skip "util-linux's unshare is not installed"
command -v mpirun >/dev/null || skip "mpirun is not installed"
command -v python3 >/dev/null || skip "python3 is not installed (it reads the links file)"

rm -rf "$work"
mkdir -p "$work"
cd "$work"

# Names unique to this run: namespaces plait-mh-<pid>-host0, -host1, -sw; interfaces (at most
# 15 characters) v<pid>h0 (in host0) and s<pid>h0 (its switch end). Namespaces a killed run left
# (its pid gone) are removed first; they hold nothing else.
tag="plait-mh-$$"
for old in $(ip netns list 2>/dev/null | sed -nE 's/^(plait-mh-([0-9]+)-[a-z0-9]+).*/\1 \2/p' | tr ' ' ':'); do
  kill -0 "${old#*:}" 2>/dev/null || ip netns del "${old%:*}" 2>/dev/null || true
done
hosts=(host0 host1)
subnet="10.77.0"
namespaces=()
cleanup() {
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if ! err=$(ip netns add "$tag-sw" 2>&1); then skip "cannot make a network namespace here: $err"; fi
namespaces+=("$tag-sw")
ip -n "$tag-sw" link add br0 type bridge
ip -n "$tag-sw" link set br0 up
ip -n "$tag-sw" link set lo up
i=0
for h in "${hosts[@]}"; do
  ns="$tag-$h"
  ip netns add "$ns"
  namespaces+=("$ns")
  ip link add "v$$h$i" type veth peer name "s$$h$i"
  ip link set "v$$h$i" netns "$ns"
  ip link set "s$$h$i" netns "$tag-sw"
  ip -n "$tag-sw" link set "s$$h$i" master br0
  ip -n "$tag-sw" link set "s$$h$i" up
  ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev "v$$h$i"
  ip -n "$ns" link set "v$$h$i" up
  ip -n "$ns" link set lo up
  i=$((i + 1))
done
echo "hosts: ${hosts[*]} as network namespaces ${namespaces[*]}, on $subnet.0/24 through a bridge"

# The slower, longer link: each host's way out (both directions of the link are shaped).
rate_mbit=400
shaping="netem delay 2ms rate ${rate_mbit}mbit"
if ! ip netns exec "$tag-host0" tc qdisc add dev "v$$h0" root netem delay 2ms rate "${rate_mbit}mbit" 2>/dev/null; then
  shaping="tbf rate ${rate_mbit}mbit (netem is missing from this kernel: no added latency)"
  ip netns exec "$tag-host0" tc qdisc add dev "v$$h0" root tbf rate "${rate_mbit}mbit" burst 64kb latency 100ms ||
    skip "tc can shape neither with netem nor with tbf here"
  ip netns exec "$tag-host1" tc qdisc add dev "v$$h1" root tbf rate "${rate_mbit}mbit" burst 64kb latency 100ms
else
  ip netns exec "$tag-host1" tc qdisc add dev "v$$h1" root netem delay 2ms rate "${rate_mbit}mbit"
fi
echo "link: $shaping on each host's veth"

# The rsh agent: Open MPI runs "AGENT HOST COMMAND" to start its daemon on HOST; this one runs
# COMMAND in HOST's namespace with HOST as the hostname (a UTS namespace of its own).
cat > agent.sh <<AGENT
#!/bin/sh
host="\$1"; shift
exec ip netns exec "$tag-\$host" unshare --uts sh -c 'hostname "\$0"; exec /bin/sh -c "\$1"' "\$host" "\$*"
AGENT
chmod +x agent.sh
printf '%s slots=1\n' "${hosts[@]}" > hostfile

# The job: a 4-layer GPT on 2 pipeline stages with Seq1F1B, a text corpus written here.
for i in $(seq 1 400); do echo "line $i: the quick brown fox jumps over the lazy dog, $((i * 7919 % 1000))."; done > corpus.txt
cat > job.json <<JSON
{"model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 32},
 "train": {"steps": 6, "seq": 32, "microbatch_size": 2, "microbatches": 4, "lr": 0.002, "segments": 2},
 "data": {"paths": ["$work/corpus.txt"]},
 "parallel": {"schedule": "seq1f1b", "pp": 2}}
JSON

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
root_flag=(--allow-run-as-root)
# MPI over TCP on the veths only, shared memory off, the rsh agent to reach the other host.
mpi=(mpirun "${root_flag[@]}" --hostfile "$work/hostfile" --mca plm_rsh_agent "$work/agent.sh"
     --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$subnet.0/24"
     --mca oob_tcp_if_include "$subnet.0/24" -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -np 2)
on_host0() { ip netns exec "$tag-host0" unshare --uts sh -c 'hostname host0; exec "$@"' sh "$@"; }

echo "== the pipeline across hosts: ${mpi[*]} plait train"
on_host0 timeout 120 "${mpi[@]}" --display-map --mca btl_base_verbose 30 "$plait" train --config job.json \
  --metrics "$work/multi.jsonl" > multi.log 2>&1 || { cat multi.log; fail "the job across hosts failed"; }
grep -q "Data for node: host0" multi.log && grep -q "Data for node: host1" multi.log || fail "the map does not show both hosts"
grep -A1 "Data for node: host1" multi.log | grep -q "Process rank: 1" || fail "rank 1 is not on host1"
# What each rank's MPI chose: tcp and self only, on the veth addresses; never shared memory.
for h in "${hosts[@]}"; do
  grep -q "\[$h:[0-9]*\] select: initializing btl component tcp" multi.log || fail "$h did not initialise the tcp BTL"
done
if grep -Eq "initializing btl component (vader|sm)" multi.log; then fail "a shared-memory BTL was initialised"; fi
grep "select: initializing btl component\|btl: tcp: Found match" multi.log | sed 's/^/  /'
echo "  (no shared-memory BTL initialised on either host)"

echo "== the same job on one host: mpirun -np 2 plait train"
timeout 120 mpirun "${root_flag[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -np 2 \
  "$plait" train --config job.json --metrics "$work/single.jsonl" > single.log 2>&1 || { cat single.log; fail "the single-host job failed"; }
# Every step's computed numbers (loss, grad_norm, lr, skipped), leaving the measured perf aside.
steps() { grep '"loss"' "$1" | sed -E 's/"perf":\{[^}]*\},//'; }
[ "$(steps multi.jsonl | wc -l)" -eq 6 ] || fail "the job across hosts did not record 6 steps"
diff <(steps single.jsonl) <(steps multi.jsonl) || fail "the pipeline across hosts differs from the single host"
echo "  6 steps: losses, gradient norms and learning rates bit-identical to the single host"
steps multi.jsonl | sed 's/^/  /'

echo "== plait profile links across the hosts"
on_host0 timeout 120 "${mpi[@]}" "$plait" profile links --trips 5 --sizes 4,64KiB,1MiB --out "$work/links.json" \
  > links.log 2>&1 || { cat links.log; fail "plait profile links failed"; }
sed 's/^/  /' links.log | head -12
# The hosts are the two machines; the measured network is the shaped link: a 1 MiB message
# cannot cross a link of rate_mbit faster than the rate allows.
python3 - "$work/links.json" "$rate_mbit" <<'PY' || fail "links.json does not show the shaped link between the hosts"
import json, sys
links = json.load(open(sys.argv[1]))
names = [m["name"] for m in links["machines"]]
assert names == ["host0", "host1"], names
net = links["network"]
gbit = net["gbit_per_s"] if "gbit_per_s" in net else net["gbyte_per_s"] * 8
assert gbit <= float(sys.argv[2]) / 1000 * 1.25, ("faster than the shaping allows", net)
print("  network between host0 and host1: %.3f Gbit/s, %.0f us (shaped to %s Mbit/s)" % (gbit, net["latency_us"], sys.argv[2]))
PY

echo "== plait plan on the measured cluster"
python3 - "$work/links.json" "$work/cluster.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["name"] = "two namespaces"
c["precision"] = "fp32"
c["device_types"] = {"host": {"tflops": 0.05, "memory_gib": 2}}
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
"$plait" plan --cluster cluster.json --model job.json --global-batch 8 --seq 32 --config job.json --out plan.json \
  --top 3 > plan.log 2>&1 || { cat plan.log; fail "plait plan on the measured cluster failed"; }
sed 's/^/  /' plan.log | head -20
[ -s plan.json ] || fail "plait plan wrote no plan"

echo "== the plan trains across the hosts"
on_host0 timeout 120 "${mpi[@]}" "$plait" train --config plan.json --steps 2 > plan_train.log 2>&1 ||
  { cat plan_train.log; fail "the plan did not train across the hosts"; }
grep -E "^  parallel:|^done:" plan_train.log | sed 's/^/  /'
echo "OK"
