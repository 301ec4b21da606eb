#include "plait/plan/device_memory.h"

#include <algorithm>
#include <cstdint>

namespace plait::plan {

DevicePrediction device_memory(const PlanningProblem& problem, const PlanChoice& choice, const MemoryPolicy& policy,
                               const sim::MemoryModel& memory, const spec::SequencePartition& partition, int group,
                               std::size_t index, int rank) {
  const StageGroup& g = choice.groups[group];
  const int last_vstage = static_cast<int>(choice.vstage_layers.size()) - 1;
  std::int64_t parameters = 0;
  bool embedding = false, head = false, recomputes = false;
  double communication = 0;  // TP: the buffers of the largest unit, allocated once
  for (std::int32_t s : choice.group_vstages(group)) {
    parameters += memory.parameter_count(s);
    communication = std::max(communication, memory.communication_bytes(s));
    embedding = embedding || s == 0;
    head = head || s == last_vstage;
    recomputes = recomputes || (choice.recomputes() && choice.recompute_layers[s] > 0);
  }
  DevicePrediction p;
  p.device = g.devices[index];
  p.rank = rank;
  p.group = group;
  p.microbatches = g.microbatches[index];
  p.capacity_bytes = problem.cluster.type_of(p.device).memory_bytes;
  p.host_capacity_bytes = problem.cluster.type_of(p.device).host_memory_bytes;
  p.shard = choice.shard_of(group, policy.precision);
  const double fraction = choice.shard_fraction(problem.cluster, group, index, policy.precision);
  p.static_bytes = policy.static_bytes(parameters, fraction, p.shard);
  p.host_bytes = policy.host_bytes(parameters, fraction, p.shard);
  p.reserve_bytes = policy.reserve_bytes(p.capacity_bytes) + communication +
                    policy.working_bytes(problem.model.model, choice.microbatch_size, partition,
                                         {1, embedding, head, recomputes ? 1 : 0, g.tp});
  return p;
}

}  // namespace plait::plan
