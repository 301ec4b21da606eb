#include "plait/plan/gradient_sync.h"

#include <algorithm>

#include "plait/spec/tensor_parallel_plan.h"

namespace plait::plan {

double ring_sync_seconds(const ClusterSpec& cluster, const std::vector<int>& devices, double bytes) {
  const std::size_t n = devices.size();
  if (n < 2 || bytes <= 0) return 0.0;
  std::vector<int> ring(devices);
  std::sort(ring.begin(), ring.end());
  double bandwidth = 0, latency = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const sim::LinkProfile& l = cluster.link(ring[i], ring[(i + 1) % n]);
    bandwidth = i == 0 ? l.bandwidth_bytes_per_second : std::min(bandwidth, l.bandwidth_bytes_per_second);
    latency = std::max(latency, l.latency_seconds);
  }
  const double steps = 2.0 * static_cast<double>(n - 1);
  return 1.15 * (static_cast<double>(n - 1) / static_cast<double>(n)) * bytes / bandwidth + steps * latency;
}

std::vector<double> group_sync_seconds(const PlanningProblem& problem, const PlanChoice& choice,
                                       const sim::MemoryModel& memory, const MemoryPolicy& policy) {
  const int groups = choice.num_groups();
  std::vector<double> out(groups, 0.0);
  const double per_parameter = policy.sync_bytes_per_parameter();
  const spec::ParameterBytes bytes = spec::parameter_bytes(policy.precision);
  for (int g = 0; g < groups; ++g) {
    std::int64_t parameters = 0;
    for (std::int32_t s : choice.group_vstages(g)) parameters += memory.parameter_count(s);
    const spec::ShardPolicy shard = choice.shard_of(g, policy.precision);
    const double p = static_cast<double>(parameters);
    out[g] = ring_sync_seconds(problem.cluster, choice.groups[g].devices, policy.sync_bytes_per_parameter(shard) * p);
    const StageGroup& group = choice.groups[g];
    if (group.tp > 1) {
      // The sequence-parallel norms' partial gradients (spec/tensor_parallel_plan.h), all-reduced
      // over each TP group, all groups at once.
      std::int64_t replicated = 0;
      const int last_vstage = static_cast<int>(choice.vstage_layers.size()) - 1;
      for (std::int32_t s : choice.group_vstages(g)) {
        replicated += spec::all_reduced_stage_parameters(problem.model.model, choice.vstage_layers[s], s == 0, s == last_vstage);
      }
      const sim::LinkProfile ring = problem.tp_ring_link(problem.tp_members(group.devices.front(), group.tp));
      out[g] += spec::ring_collective_seconds(spec::Collective::all_reduce, static_cast<double>(replicated) * bytes.gradients,
                                              group.tp, ring.latency_seconds, ring.bandwidth_bytes_per_second);
    }
    if (shard.offload) {
      // The reduced gradient shard to the host and (below level 3) the updated weights back, over
      // the slowest device's host link (data_parallel_timing.h's update).
      double worst = 0;
      for (std::size_t i = 0; i < choice.groups[g].devices.size(); ++i) {
        const int d = choice.groups[g].devices[i];
        const double moved = p * choice.shard_fraction(problem.cluster, g, i, policy.precision) *
                             (bytes.gradients + (shard.shards_parameters() ? 0.0 : bytes.parameters));
        worst = std::max(worst, moved / problem.cluster.type_of(d).host_bytes_per_second);
      }
      out[g] += worst;
    }
  }
  if (problem.model.model.tie_embeddings && groups > 1) {
    // The group holding the last virtual stage has the LM head's copy of the embedding.
    const std::int32_t last_vstage = static_cast<std::int32_t>(choice.vstage_layers.size()) - 1;
    int last = 0;
    for (int g = 0; g < groups; ++g) {
      const std::vector<std::int32_t> held = choice.group_vstages(g);
      if (std::find(held.begin(), held.end(), last_vstage) != held.end()) last = g;
    }
    std::vector<int> holders = choice.groups[0].devices;
    if (last != 0) holders.insert(holders.end(), choice.groups[last].devices.begin(), choice.groups[last].devices.end());
    // One rank's rows of the (vocabulary-parallel, padded) table.
    const int tp = choice.groups[0].tp;
    const double rows = static_cast<double>(spec::padded_vocab(problem.model.model, tp)) / tp;
    const double tied = per_parameter * rows * problem.model.model.hidden;
    const double t = ring_sync_seconds(problem.cluster, holders, tied);
    out[0] += t;
    if (last != 0) out[last] += t;
  }
  return out;
}

}  // namespace plait::plan
