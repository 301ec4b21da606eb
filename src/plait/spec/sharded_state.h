#pragma once
// A stage's static state (weights, gradients, optimizer state) on one rank of the stage's
// data-parallel group, sharded ZeRO-style (Rajbhandari et al., arXiv 1910.02054; Zorse's
// pipeline-efficient form, ../shared/reference/zorse.md point 5) and optionally offloaded to the
// host tier (ZeRO-Offload, Ren et al., arXiv 2101.06840): which elements a rank owns and the
// bytes it holds by tier and category in each phase of a step. The one formula the runtime's
// allocations follow (tests/runtime/mpi/sharded_memory_test.cpp checks its trackers against it),
// the simulator's memory model replays and the planner's memory policy sums.
//
// Levels (parallel.shard, docs/config.md). A stage's flat buffer of E elements is cut into one
// contiguous shard per holder (shard_bounds); N below is E, S the rank's shard:
//   0  nothing sharded: every holder keeps weights, gradients and optimizer state of all E
//      (S = E: the optimizer updates everything on every holder, as plain data parallelism);
//   1  optimizer state sharded: gradients reduce-scattered (each rank's block reduced in place),
//      AdamW on the rank's shard only, updated weights all-gathered;
//   2  gradients too: the gradient buffer is committed at the stage's first W (or BW) of the
//      step, reduce-scattered after its last one, and from then on only the rank's shard stays
//      resident (until the update; nothing between steps);
//   3  weights too: between uses only the rank's shard of the weights is resident; the stage is
//      gathered (all-gathered in place) once per step, one compute action before its first use
//      (the prefetch), held until its last W, then released back to the shard.
// Offload moves the optimizer state, with an fp32 master copy of the rank's shard, to the host
// tier, where AdamW runs on it (ZeRO-Offload's CPU Adam); the reduced gradient shard goes to the
// host through the copy engine and the updated weights come back. At level 3 the host's master
// shard IS the parked weight shard: nothing of a closed stage stays on the device.
#include <cstdint>
#include <span>
#include <vector>

#include "plait/spec/unit_memory.h"

namespace plait::spec {

struct ShardPolicy {
  int level = 0;         // 0..3
  bool offload = false;  // optimizer state (and, at level 3, the parked weights) on the host

  bool shards_optimizer() const { return level >= 1; }
  bool shards_gradients() const { return level >= 2; }
  bool shards_parameters() const { return level >= 3; }
  bool operator==(const ShardPolicy&) const = default;
};

// Shard boundaries of E elements over holders weighted `weights` (all equal: equal shards; the
// devices' memory: shares proportional to it, so small devices hold small shards): b_0 = 0,
// b_i = 16 * floor(E * W_i / (16 W)) with W_i the sum of the first i weights, b_n = E. Multiples
// of 16 elements (64-byte aligned, as the parameter layout's tensors are). Integer arithmetic, so
// every rank computes the same bounds. Rank i owns [b_i, b_{i+1}).
std::vector<std::int64_t> shard_bounds(std::int64_t elements, std::span<const std::uint64_t> weights);

// Bytes one rank holds for one stage of E elements with a shard of S elements (S = E at level 0,
// or when the stage has one holder), by phase; device unless named host.
struct ShardedStateBytes {
  // Device weights between uses (level 3: the shard, or nothing when offloaded) and while the
  // stage is gathered (all E; levels 0-2 always).
  double parameters_resident = 0, parameters_gathered = 0;
  // Device gradients while accumulating (all E, from the first W of the step; levels 0-1 always),
  // after the reduce-scatter until the update (levels 2-3: the shard; 0 when offloaded, since it
  // went to the host) and between steps (levels 2-3: 0).
  double gradients_accumulating = 0, gradients_reduced = 0, gradients_idle = 0;
  // Device optimizer state (0 when offloaded).
  double optimizer = 0;
  // Host tier (offload): the fp32 master weights of the shard (fp32 keeps them beside the
  // moments; bf16's 12-byte optimizer state already includes its master copy), the optimizer
  // state, and the staged gradient shard (from its reduction to the end of the update).
  double host_parameters = 0, host_optimizer = 0, host_gradients = 0;

  double parameters_peak() const { return parameters_gathered > parameters_resident ? parameters_gathered : parameters_resident; }
  double gradients_peak() const { return gradients_accumulating; }
  // The device's peak of these categories together (weights gathered, gradients accumulating).
  double device_peak() const { return parameters_peak() + gradients_peak() + optimizer; }
  double host_peak() const { return host_parameters + host_optimizer + host_gradients; }
};

// Bytes per element from parameter_bytes(precision): weights w, gradients g, optimizer o;
//   parameters_gathered = w E;  parameters_resident = level 3 ? (offload ? 0 : w S) : w E
//   gradients_accumulating = g E;  gradients_reduced = level >= 2 ? (offload ? 0 : g S) : g E
//   gradients_idle = level >= 2 ? 0 : g E
//   optimizer = offload ? 0 : o S
//   host: offload ? (fp32 ? 4 S : 0) master + o S optimizer + g S staged gradients : 0
ShardedStateBytes sharded_state_bytes(std::int64_t elements, std::int64_t shard, const ShardPolicy& policy,
                                      Precision precision);

}  // namespace plait::spec
