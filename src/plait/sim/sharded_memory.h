#pragma once
// The simulator's replay of a rank's memory by category, as the runtime's trackers count it:
// activations and K/V per unit (MemoryModel), and the static state of each chunk under its
// stage's sharding (spec/sharded_state.h) in the phases the runtime moves it through, at the
// same action boundaries (schedule::chunk_uses; level-3 gathers lazy or at the step's start as
// schedule::lazy_gathers_deadlock_free decides):
//   weights      level 3: gathered from the chunk's prefetch action through its last action,
//                resident (its shard, or nothing when offloaded) otherwise; below: all of it;
//   gradients    levels 2-3: the whole buffer from the chunk's first to its last W (or BW), the
//                reduced shard after it until the update, nothing before; below: all of it;
//   optimizer    constant; host tier: master + optimizer state constant, the staged gradient
//                shards until the update.
// The end of the step (after the rank's last action) is a phase too: every chunk reduced,
// activations gone, host staging full.
#include <cstdint>
#include <vector>

#include "plait/schedule/chunk_uses.h"
#include "plait/schedule/lowering.h"
#include "plait/schedule/schedule.h"
#include "plait/spec/sharded_state.h"

namespace plait::sim {

// One chunk of a rank: its stage's policy and the bytes this rank holds of it by phase.
struct ChunkState {
  spec::ShardPolicy policy;
  spec::ShardedStateBytes bytes;
};
// Per rank, per chunk (the layout's chunk order).
using ChunkStates = std::vector<std::vector<ChunkState>>;

// Peak bytes by category on one rank (device, then its host tier); `total` is the peak of the
// device's sum, not the sum of the peaks.
struct CategoryPeaks {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0, kv_cache = 0, total = 0;
  // Tensor parallelism's communication buffer of a compute action (spec::UnitMemory::
  // communication; the stage messages' buffers are not modelled here).
  double communication = 0;
  double host_parameters = 0, host_optimizer = 0, host_gradients = 0, host_total = 0;
  // Activation offload (schedule/activation_offload.h): the units' activations and K/V on the
  // host tier.
  double host_activations = 0, host_kv_cache = 0;
};

// The static bytes of every rank at every compute action.
class StaticReplay {
 public:
  StaticReplay(const schedule::Schedule& schedule, const schedule::LoweredSchedule& lowered, const ChunkStates& states);
  // Device weights, gradients and optimizer state of `rank` during its action `index`; index ==
  // its action count: after the last action (the update).
  double parameters(int rank, std::int32_t index) const;
  double gradients(int rank, std::int32_t index) const;
  double optimizer(int rank) const;
  // The host tier's peak by category (constant state plus every staged gradient shard).
  void host_peaks(int rank, CategoryPeaks& peaks) const;
  bool lazy_gathers() const { return lazy_; }

 private:
  const ChunkStates& states_;
  std::vector<std::vector<schedule::ChunkUses>> uses_;  // per rank, per chunk
  std::vector<std::vector<std::int32_t>> open_;         // per rank, per chunk: where its gather starts
  bool lazy_ = true;
};

}  // namespace plait::sim
