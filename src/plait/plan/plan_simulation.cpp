#include "plait/plan/plan_simulation.h"

#include <algorithm>
#include <optional>

#include "plait/plan/device_memory.h"
#include "plait/plan/gradient_sync.h"
#include "plait/plan/plan_schedule.h"
#include "plait/sim/document_work.h"
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

namespace {

// The prediction of a plan from the simulation that timed it and the one that replayed its
// memory (the same one without documents; with per-micro-batch cuts, the worst cut's), whose
// units are cut by memory_partition.
PlanPrediction predict(const PlanningProblem& problem, const PlanChoice& choice, const sim::SimulationReport& timed,
                       const sim::SimulationReport& replayed, const spec::SequencePartition& memory_partition) {
  const MemoryPolicy policy{problem.cluster.precision, choice.recompute(), problem.cluster.emulated,
                            problem.cluster.grad_reduce};
  const std::vector<int> devices = choice.rank_devices();
  const sim::MemoryModel memory(problem.model.model, choice.vstage_layers, memory_partition,
                                choice.microbatch_size, policy.memory_options(1, choice.vstage_tensor_parallel()));

  PlanPrediction out;
  out.simulated = true;
  out.pipeline_seconds = timed.result.step_time;
  out.bubble_fraction = timed.result.bubble_fraction;
  out.devices.resize(devices.size());
  const std::vector<double> sync = group_sync_seconds(problem, choice, memory, policy);
  double step = out.pipeline_seconds;
  for (int g = 0; g < choice.num_groups(); ++g) {
    const StageGroup& group = choice.groups[g];
    double finish = 0;
    for (std::size_t i = 0; i < group.devices.size(); ++i) {
      const int d = group.devices[i];
      const int r = static_cast<int>(std::lower_bound(devices.begin(), devices.end(), d) - devices.begin());
      const sim::RankResult& rr = timed.result.ranks[r];
      const sim::RankResult& held = replayed.result.ranks[r];
      DevicePrediction& p = out.devices[r];
      p = device_memory(problem, choice, policy, memory, memory_partition, g, i, r);
      p.busy_seconds = rr.busy;
      p.activation_bytes = held.peak_activation_bytes;
      p.host_bytes += held.memory.host_activations + held.memory.host_kv_cache;  // activation offload
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

}  // namespace

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
  if (!problem.documents) {
    const sim::SimulationReport report = sim::simulate_schedule(config, schedule, choice.family);
    return predict(problem, choice, report, report, report.partition);
  }
  // Packed documents (plan_documents.h): every drawn step timed from its micro-batches' own
  // documents, the slowest kept; memory replayed with the worst cut.
  const DocumentLoads& loads = *problem.documents;
  const spec::SequencePartition nominal = plan_partition(problem, choice);
  const DocumentLoad& load = loads.load(choice.microbatch_size, nominal, document_cut_multiple(choice));
  DocumentPrediction d;
  d.distribution = loads.planning().distribution.text();
  d.steps = loads.planning().steps;
  d.balance_window = loads.planning().balance_window;
  d.cuts = load.cuts;
  d.nominal_seconds = sim::simulate_schedule(config, schedule, choice.family).result.step_time;
  std::optional<sim::SimulationReport> worst;
  for (int s = 0; s < d.steps; ++s) {
    sim::SimulationConfig c = config;
    c.microbatch_work = load.steps[static_cast<std::size_t>(s)].units;
    sim::SimulationReport r = sim::simulate_schedule(c, schedule, choice.family);
    d.mean_seconds += r.result.step_time / d.steps;
    if (!worst || r.result.step_time > worst->result.step_time) {
      worst = std::move(r);
      d.worst_step = s;
    }
  }
  const sim::StepDocuments& step = load.steps[static_cast<std::size_t>(d.worst_step)];
  d.worst_seconds = worst->result.step_time;
  d.max_over_mean = step.max_over_mean;
  {
    sim::SimulationConfig c = config;
    c.microbatch_work = sim::equal_work(step.units);
    d.equal_seconds = sim::simulate_schedule(c, schedule, choice.family).result.step_time;
  }
  d.nominal_cut = nominal.lengths;
  d.worst_cut = load.worst.lengths;
  const double element = message_bytes(problem, choice, nominal, 0) / static_cast<double>(nominal.lengths[0]);
  d.message_bytes = element * static_cast<double>(*std::max_element(d.worst_cut.begin(), d.worst_cut.end()));
  d.nominal_message_bytes = element * static_cast<double>(*std::max_element(d.nominal_cut.begin(), d.nominal_cut.end()));
  PlanPrediction out;
  if (load.cuts) {
    // The same schedule with every unit as long as the worst cut's: its peak activations, K/V
    // prefixes and working set are what the runtime plans for (runtime::worst_case_partition).
    sim::SimulationConfig c = config;
    c.partition = load.worst;
    c.seq = load.worst.seq();
    out = predict(problem, choice, *worst, sim::simulate_schedule(c, schedule, choice.family), load.worst);
  } else {
    out = predict(problem, choice, *worst, *worst, nominal);
  }
  out.documents = std::move(d);
  return out;
}

}  // namespace plait::plan
