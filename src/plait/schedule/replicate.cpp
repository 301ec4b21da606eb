#include "plait/schedule/replicate.h"

#include <string>

#include "plait/core/error.h"

namespace plait::schedule {

Schedule replicate(const Schedule& schedule, int replicas) {
  if (replicas < 1) {
    throw Error("replicate: expected at least 1 replica, got " + std::to_string(replicas));
  }
  const Layout& in = schedule.layout;
  const int p = schedule.num_ranks();
  Schedule out;
  out.layout.num_vstages = in.num_vstages;
  out.layout.num_segments = in.num_segments;
  out.layout.num_microbatches = in.num_microbatches * replicas;
  out.layout.rank_vstages.reserve(static_cast<std::size_t>(p) * replicas);
  out.ranks.reserve(static_cast<std::size_t>(p) * replicas);
  for (int q = 0; q < replicas; ++q) {
    const std::int32_t offset = q * in.num_microbatches;
    for (int r = 0; r < p; ++r) {
      out.layout.rank_vstages.push_back(in.rank_vstages[r]);
      std::vector<Action> actions = schedule.ranks[r];
      for (Action& a : actions) a.microbatch += offset;
      out.ranks.push_back(std::move(actions));
    }
  }
  return out;
}

}  // namespace plait::schedule
