#include "plait/plan/plan_simulation.h"


#include "plait/plan/device_memory.h"
#include "plait/plan/gradient_sync.h"
#include "plait/plan/plan_schedule.h"
#include "plait/sim/simulation.h"

namespace plait::plan {

void check_memory(const ClusterSpec& cluster, PlanPrediction& prediction) {
  prediction.fits = true;
  prediction.over_memory.clear();
  for (const DevicePrediction& d : prediction.devices) {
    if (d.host_bytes > d.host_capacity_bytes) {
      prediction.fits = false;
      prediction.over_memory = cluster.device_name(d.device) + " (" + cluster.type_of(d.device).name + ") needs " +
                               bytes_text(d.host_bytes) + " of host memory for its offloaded state; its host tier has " +
                               bytes_text(d.host_capacity_bytes);
      return;
    }
    if (d.total_bytes() <= d.capacity_bytes) continue;
    prediction.fits = false;
    prediction.over_memory = cluster.device_name(d.device) + " (" + cluster.type_of(d.device).name + ") needs " +
                             bytes_text(d.total_bytes()) + " of its " + bytes_text(d.capacity_bytes);
    return;
  }
}

PlanPrediction simulate_plan(const PlanningProblem& problem, const PlanChoice& choice,
                             const schedule::Schedule& schedule) {
  const MemoryPolicy policy{problem.cluster.precision, choice.recompute(), problem.cluster.emulated,
                            problem.cluster.grad_reduce};
  const std::vector<int> devices = choice.rank_devices();
  sim::SimulationConfig config;
  config.model = problem.model;
  config.seq = problem.seq;
  config.microbatch_size = choice.microbatch_size;
  config.split = choice.split;
  config.split_multiple = choice.segments > 1 && choice.split == spec::SplitMethod::flops ? choice.split_multiple : 1;
  for (int d : devices) config.devices.push_back(problem.profile(d));
  config.memory = policy.memory_options();
  config.record_events = false;
  config.vstage_layers = choice.vstage_layers;
  config.links = rank_links(problem.cluster, devices);
  if (choice.tensor_parallel()) {
    for (const sim::RankTensorParallel& tp : rank_tensor_parallel(problem, choice)) {
      config.tensor_parallel.push_back(tp.degree);
      config.tensor_parallel_links.push_back(tp.link);
    }
  }
  if (!choice.offload_activations.empty()) {
    // Each rank's chunks offload as their group does; copies at the device's host link.
    for (std::size_t r = 0; r < devices.size(); ++r) {
      config.activation_offload.chunk_offloads.emplace_back(schedule.layout.rank_vstages[r].size(), false);
      config.activation_offload.host_bytes_per_second.push_back(
          problem.cluster.type_of(devices[r]).host_bytes_per_second);
    }
    for (int g = 0; g < choice.num_groups(); ++g) {
      for (int d : choice.groups[static_cast<std::size_t>(g)].devices) {
        const auto r = static_cast<std::size_t>(std::lower_bound(devices.begin(), devices.end(), d) - devices.begin());
        config.activation_offload.chunk_offloads[r].assign(schedule.layout.rank_vstages[r].size(),
                                                           choice.offloads_activations(g));
      }
    }
  }
  const sim::SimulationReport report = sim::simulate_schedule(config, schedule, choice.family);

  const sim::MemoryModel memory(problem.model.model, choice.vstage_layers, report.partition,
                                choice.microbatch_size, policy.memory_options(1, choice.vstage_tensor_parallel()));

  PlanPrediction out;
  out.simulated = true;
  out.pipeline_seconds = report.result.step_time;
  out.bubble_fraction = report.result.bubble_fraction;
  out.devices.resize(devices.size());
  const std::vector<double> sync = group_sync_seconds(problem, choice, memory, policy);
  double step = out.pipeline_seconds;
  for (int g = 0; g < choice.num_groups(); ++g) {
    const StageGroup& group = choice.groups[g];
    double finish = 0;
    for (std::size_t i = 0; i < group.devices.size(); ++i) {
      const int d = group.devices[i];
      const int r = static_cast<int>(std::lower_bound(devices.begin(), devices.end(), d) - devices.begin());
      const sim::RankResult& rr = report.result.ranks[r];
      DevicePrediction& p = out.devices[r];
      p = device_memory(problem, choice, policy, memory, report.partition, g, i, r);
      p.busy_seconds = rr.busy;
      p.activation_bytes = rr.peak_activation_bytes;
      p.host_bytes += rr.memory.host_activations + rr.memory.host_kv_cache;  // activation offload
      finish = std::max(finish, rr.finish);
    }
    step = std::max(step, finish + sync[g]);
    out.sync_seconds = std::max(out.sync_seconds, sync[g]);
  }
  out.step_seconds = step;
  out.tokens_per_second = problem.tokens_per_step() / step;
  check_memory(problem.cluster, out);
  return out;
}

}  // namespace plait::plan
