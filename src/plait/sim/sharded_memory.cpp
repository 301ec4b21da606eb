#include "plait/sim/sharded_memory.h"

#include <string>

#include "plait/core/error.h"
#include "plait/schedule/lazy_gathers.h"

namespace plait::sim {

StaticReplay::StaticReplay(const schedule::Schedule& schedule, const schedule::LoweredSchedule& lowered,
                           const ChunkStates& states)
    : states_(states) {
  const schedule::Layout& layout = schedule.layout;
  if (static_cast<int>(states.size()) != schedule.num_ranks()) {
    throw Error("memory replay: chunk states for " + std::to_string(states.size()) + " ranks, the schedule has " +
                std::to_string(schedule.num_ranks()));
  }
  std::vector<bool> gathered(static_cast<std::size_t>(layout.num_vstages), false);
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    if (static_cast<int>(states[r].size()) != layout.num_chunks(r)) {
      throw Error("memory replay: rank " + std::to_string(r) + " has " + std::to_string(layout.num_chunks(r)) +
                  " chunks but " + std::to_string(states[r].size()) + " chunk states");
    }
    for (int c = 0; c < layout.num_chunks(r); ++c) {
      if (states[r][c].policy.shards_parameters()) gathered[static_cast<std::size_t>(layout.vstage(r, c))] = true;
    }
  }
  lazy_ = schedule::lazy_gathers_deadlock_free(schedule, lowered, gathered);
  open_.resize(states.size());
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    uses_.push_back(schedule::chunk_uses(schedule.ranks[r], layout.num_chunks(r)));
    for (const schedule::ChunkUses& u : uses_.back()) open_[r].push_back(lazy_ ? u.prefetch() : 0);
  }
}

double StaticReplay::parameters(int rank, std::int32_t index) const {
  const auto& uses = uses_[rank];
  double sum = 0;
  for (std::size_t c = 0; c < uses.size(); ++c) {
    const ChunkState& s = states_[rank][c];
    const bool open = uses[c].first >= 0 && index >= open_[rank][c] && index <= uses[c].last;
    sum += s.policy.shards_parameters() && !open ? s.bytes.parameters_resident : s.bytes.parameters_gathered;
  }
  return sum;
}

double StaticReplay::gradients(int rank, std::int32_t index) const {
  const auto& uses = uses_[rank];
  double sum = 0;
  for (std::size_t c = 0; c < uses.size(); ++c) {
    const ChunkState& s = states_[rank][c];
    if (!s.policy.shards_gradients()) {
      sum += s.bytes.gradients_accumulating;
    } else if (uses[c].first_weight >= 0 && index >= uses[c].first_weight && index <= uses[c].last_weight) {
      sum += s.bytes.gradients_accumulating;
    } else if (uses[c].last_weight >= 0 && index > uses[c].last_weight) {
      sum += s.bytes.gradients_reduced;
    } else {
      sum += s.bytes.gradients_idle;
    }
  }
  return sum;
}

double StaticReplay::optimizer(int rank) const {
  double sum = 0;
  for (const ChunkState& s : states_[rank]) sum += s.bytes.optimizer;
  return sum;
}

void StaticReplay::host_peaks(int rank, CategoryPeaks& peaks) const {
  peaks.host_parameters = peaks.host_optimizer = peaks.host_gradients = 0;
  for (const ChunkState& s : states_[rank]) {
    peaks.host_parameters += s.bytes.host_parameters;
    peaks.host_optimizer += s.bytes.host_optimizer;
    peaks.host_gradients += s.bytes.host_gradients;
  }
  peaks.host_total = peaks.host_parameters + peaks.host_optimizer + peaks.host_gradients;
}

}  // namespace plait::sim
