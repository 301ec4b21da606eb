#include "plait/runtime/predicted_memory.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "plait/model/parameter_layout.h"
#include "plait/runtime/rank_program.h"
#include "plait/spec/precision_policy.h"
#include "plait/sim/cost_model.h"
#include "plait/sim/event_simulator.h"
#include "plait/sim/memory_model.h"

namespace plait::runtime {

double shard_fraction(const PipelinePlan& plan, int vstage, int rank) {
  const spec::ShardPolicy& policy = plan.vstage_shard[static_cast<std::size_t>(vstage)];
  if (policy.level == 0) return 1.0;
  const auto elements = static_cast<std::int64_t>(
      model::layout_size(model::parameter_layout(plan.model, plan.vstage_specs[static_cast<std::size_t>(vstage)])));
  const std::vector<int> holders = plan.holders(vstage);
  const auto i = static_cast<std::size_t>(std::find(holders.begin(), holders.end(), rank) - holders.begin());
  const std::vector<std::int64_t> bounds = plan.shard_bounds(vstage, elements);
  return static_cast<double>(bounds[i + 1] - bounds[i]) / static_cast<double>(elements);
}

std::string capacity_exceeded(const PipelinePlan& next, const PipelinePlan& now) {
  bool limited = false;
  for (const schedule::DeviceEmulation& d : next.devices) limited = limited || d.memory_bytes.has_value();
  if (!limited) return "";
  const std::vector<sim::CategoryPeaks> after = predicted_memory(next), before = predicted_memory(now);
  for (std::size_t r = 0; r < next.devices.size() && r < after.size() && r < before.size(); ++r) {
    const std::optional<std::size_t>& capacity = next.devices[r].memory_bytes;
    if (capacity && after[r].total > static_cast<double>(*capacity) && after[r].total > before[r].total) {
      char why[240];
      std::snprintf(why, sizeof why,
                    "rank %zu's predicted peak %.2f MiB would exceed its device's %.2f MiB (%.2f MiB with the plan in "
                    "force)",
                    r, after[r].total / (1 << 20), static_cast<double>(*capacity) / (1 << 20), before[r].total / (1 << 20));
      return why;
    }
  }
  return "";
}

double predicted_dp_comm_bytes(const PipelinePlan& plan, int rank) {
  const double wire = static_cast<double>(spec::dp_gradient_bytes(plan.precision, plan.grad_reduce));
  const double tied = plan.tied_table_split() ? static_cast<double>(plan.model.vocab) * plan.model.hidden : 0.0;
  std::set<int> tied_holders;
  for (int v : {0, plan.num_vstages() - 1}) {
    for (int r : plan.holders(v)) tied_holders.insert(r);
  }
  double bytes = 0;
  bool holds_tied = false;
  for (std::int32_t v : plan.schedule.layout.rank_vstages[static_cast<std::size_t>(rank)]) {
    const bool has_tied = tied > 0 && (v == 0 || v == plan.num_vstages() - 1);
    holds_tied = holds_tied || has_tied;
    if (plan.holders(v).size() < 2 || plan.grad_reduce != spec::GradReduce::bf16) continue;
    const auto elements = static_cast<double>(
        model::layout_size(model::parameter_layout(plan.model, plan.vstage_specs[static_cast<std::size_t>(v)])));
    bytes += wire * (elements - (has_tied ? tied : 0.0));
  }
  // The tied sum: fp32 when the rank alone holds every copy, else the reduction's type.
  if (holds_tied) bytes += (tied_holders.size() > 1 ? wire : 4.0) * tied;
  return bytes;
}

sim::ActivationOffloadModel activation_offload_model(const PipelinePlan& plan) {
  sim::ActivationOffloadModel m;
  for (int r = 0; r < plan.num_ranks(); ++r) {
    std::vector<bool>& chunks = m.chunk_offloads.emplace_back();
    for (std::int32_t v : plan.schedule.layout.rank_vstages[static_cast<std::size_t>(r)]) {
      chunks.push_back(plan.offloads_activations(v));
    }
    m.host_bytes_per_second.push_back(plan.devices[static_cast<std::size_t>(r)].host_bytes_per_second.value_or(0.0));
  }
  return m;
}

std::vector<sim::CategoryPeaks> predicted_memory(const PipelinePlan& plan, int threads,
                                                 const spec::SequencePartition* partition) {
  std::vector<int> recompute;
  for (const model::StageSpec& s : plan.vstage_specs) recompute.push_back(s.recompute_layers);
  const sim::MemoryModel memory(plan.model, plan.vstage_layers, partition ? *partition : plan.partition,
                                plan.microbatch_size,
                                {plan.precision, spec::Recompute::stages(recompute), threads, plan.vstage_tensor_parallel()});
  sim::ChunkStates states(static_cast<std::size_t>(plan.num_ranks()));
  for (int r = 0; r < plan.num_ranks(); ++r) {
    for (std::int32_t v : plan.schedule.layout.rank_vstages[static_cast<std::size_t>(r)]) {
      const spec::ShardPolicy policy = plan.vstage_shard.empty() ? spec::ShardPolicy{} : plan.vstage_shard[static_cast<std::size_t>(v)];
      states[static_cast<std::size_t>(r)].push_back(memory.chunk_state(v, policy, shard_fraction(plan, v, r)));
    }
  }
  const sim::UniformCostModel uniform(1.0, 1.0, 1.0);
  sim::SimOptions options{false, false, &states};
  const sim::ActivationOffloadModel offload = activation_offload_model(plan);
  options.activation_offload = &offload;
  const sim::SimResult result = sim::simulate(plan.schedule, lower_plan(plan, 1), uniform, &memory, options);
  std::vector<sim::CategoryPeaks> peaks;
  for (const sim::RankResult& r : result.ranks) peaks.push_back(r.memory);
  return peaks;
}

}  // namespace plait::runtime
