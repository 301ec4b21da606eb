#include "plait/plan/plan_schedule.h"

#include <algorithm>

namespace plait::plan {

schedule::HeterogeneousPipeline heterogeneous_pipeline(const PlanChoice& choice) {
  const std::vector<int> devices = choice.rank_devices();
  schedule::HeterogeneousPipeline p;
  p.num_microbatches = choice.num_microbatches;
  p.num_segments = choice.segments;
  const int fixed = choice.policy().fixed_chunks;
  p.chunks = fixed > 0 ? fixed : choice.chunks;
  for (const StageGroup& g : choice.groups) {
    std::vector<int> ranks;
    for (int d : g.devices) {
      ranks.push_back(static_cast<int>(std::lower_bound(devices.begin(), devices.end(), d) - devices.begin()));
    }
    p.stage_ranks.push_back(std::move(ranks));
    p.stage_counts.push_back(g.microbatches);
  }
  return p;
}

sim::LinkMatrix rank_links(const ClusterSpec& cluster, const std::vector<int>& rank_devices) {
  const int n = static_cast<int>(rank_devices.size());
  sim::LinkMatrix links(n, sim::LinkProfile{});
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a != b) links.at(a, b) = cluster.link(rank_devices[a], rank_devices[b]);
    }
  }
  return links;
}

std::shared_ptr<sim::FlopsCostModel> plan_cost_model(const PlanningProblem& problem, const PlanChoice& choice,
                                                     const std::vector<sim::DeviceProfile>& type_profiles,
                                                     const spec::SequencePartition& partition) {
  const std::vector<int> devices = choice.rank_devices();
  std::vector<sim::DeviceProfile> rank_profiles;
  for (int d : devices) rank_profiles.push_back(type_profiles[problem.cluster.devices[d].type]);
  auto cost = std::make_shared<sim::FlopsCostModel>(problem.model.model, choice.vstage_layers, partition,
                                                    choice.microbatch_size, rank_profiles);
  cost->set_links(rank_links(problem.cluster, devices));
  cost->set_recompute(choice.recompute());
  if (choice.tensor_parallel()) cost->set_tensor_parallel(rank_tensor_parallel(problem, choice), message_element_bytes(problem));
  return cost;
}

std::vector<sim::RankTensorParallel> rank_tensor_parallel(const PlanningProblem& problem, const PlanChoice& choice) {
  const std::vector<int> devices = choice.rank_devices();
  const std::vector<int> degrees = choice.rank_tensor_parallel();
  std::vector<sim::RankTensorParallel> out;
  for (std::size_t r = 0; r < devices.size(); ++r) {
    out.push_back({degrees[r], problem.kind_link(problem.kind(devices[r], degrees[r]))});
  }
  return out;
}

double message_element_bytes(const PlanningProblem& problem) {
  return problem.cluster.precision == Precision::fp32 ? 4.0 : 2.0;
}

double message_bytes(const PlanningProblem& problem, const PlanChoice& choice,
                     const spec::SequencePartition& partition, int segment) {
  const double element = message_element_bytes(problem);
  return static_cast<double>(choice.microbatch_size) * static_cast<double>(partition.lengths[segment]) *
         problem.model.model.hidden * element;
}

schedule::Schedule build_schedule(const PlanningProblem& problem, const PlanChoice& choice,
                                  const std::vector<sim::DeviceProfile>& type_profiles) {
  const spec::SequencePartition partition = plan_partition(problem, choice);
  const auto cost = plan_cost_model(problem, choice, type_profiles, partition);
  std::vector<double> bytes;
  for (int j = 0; j < choice.segments; ++j) bytes.push_back(message_bytes(problem, choice, partition, j));
  schedule::HeterogeneousCosts costs;
  costs.unit_seconds = [cost](int rank, schedule::ActionKind kind, std::int32_t seg, std::int32_t vstage) {
    return cost->compute_seconds(rank, kind, 0, seg, vstage);
  };
  costs.transfer_seconds = [cost, bytes](int src, int dst, std::int32_t seg) {
    return cost->transfer_seconds(src, dst, static_cast<std::int64_t>(bytes[seg]));
  };
  return schedule::heterogeneous_schedule(choice.policy(), heterogeneous_pipeline(choice), costs);
}

}  // namespace plait::plan
