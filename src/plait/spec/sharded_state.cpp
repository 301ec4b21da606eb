#include "plait/spec/sharded_state.h"

#include <string>

#include "plait/core/error.h"

namespace plait::spec {

std::vector<std::int64_t> shard_bounds(std::int64_t elements, std::span<const std::uint64_t> weights) {
  if (weights.empty()) throw Error("shard_bounds: a stage needs at least one holder");
  unsigned __int128 total = 0;
  for (std::uint64_t w : weights) {
    if (w == 0) throw Error("shard_bounds: a holder's share weight must be positive");
    total += w;
  }
  const auto e = static_cast<unsigned __int128>(elements);
  std::vector<std::int64_t> bounds = {0};
  unsigned __int128 cumulative = 0;
  for (std::size_t i = 0; i + 1 < weights.size(); ++i) {
    cumulative += weights[i];
    const auto cut = static_cast<std::int64_t>(e * cumulative / (16 * total)) * 16;
    bounds.push_back(std::max(cut, bounds.back()));
  }
  bounds.push_back(elements);
  return bounds;
}

ShardedStateBytes sharded_state_bytes(std::int64_t elements, std::int64_t shard, const ShardPolicy& policy,
                                      Precision precision) {
  if (policy.level < 0 || policy.level > 3) {
    throw Error("sharded_state_bytes: shard level " + std::to_string(policy.level) + " is not 0..3");
  }
  const ParameterBytes per = parameter_bytes(precision);
  const double E = static_cast<double>(elements), S = static_cast<double>(policy.level == 0 ? elements : shard);
  ShardedStateBytes b;
  b.parameters_gathered = per.parameters * E;
  b.parameters_resident = policy.shards_parameters() ? (policy.offload ? 0.0 : per.parameters * S) : per.parameters * E;
  b.gradients_accumulating = per.gradients * E;
  b.gradients_reduced = policy.shards_gradients() ? (policy.offload ? 0.0 : per.gradients * S) : per.gradients * E;
  b.gradients_idle = policy.shards_gradients() ? 0.0 : per.gradients * E;
  b.optimizer = policy.offload ? 0.0 : per.optimizer * S;
  if (policy.offload) {
    b.host_parameters = precision == Precision::fp32 ? 4.0 * S : 0.0;
    b.host_optimizer = per.optimizer * S;
    b.host_gradients = per.gradients * S;
  }
  return b;
}

}  // namespace plait::spec
