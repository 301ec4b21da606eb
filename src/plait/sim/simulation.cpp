#include "plait/sim/simulation.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/schedule/lowering.h"
#include "plait/schedule/validator.h"
#include "plait/sim/flops_cost_model.h"
#include "plait/sim/stage_layers.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::sim {

namespace {

double seconds_since(double start) { return monotonic_seconds() - start; }

// Bytes of one token's activation or gradient between stages: b x H elements of the precision.
double message_bytes_per_token(const SimulationConfig& config) {
  const double element_bytes = config.memory.precision == spec::Precision::fp32 ? 4.0 : 2.0;
  return static_cast<double>(config.microbatch_size) * config.model.model.hidden * element_bytes;
}

// The phases simulate_schedule reports (SimulationConfig::progress).
constexpr int kPhases = 4;

}  // namespace

double simulation_memory_bytes(const schedule::PipelineShape& shape, bool record_events) {
  const double units = static_cast<double>(shape.stages) * shape.chunks * shape.microbatches * shape.segments;
  return units * (record_events ? kSimulationBytesPerUnitWithEvents : kSimulationBytesPerUnit);
}

FlopsCostModel cost_model(const SimulationConfig& config, const SimulationReport& report, int ranks) {
  FlopsCostModel cost(config.model.model, report.vstage_layers, report.partition, config.microbatch_size,
                      report.devices);
  if (!config.links.empty()) {
    if (config.links.ranks() != ranks) {
      throw Error("simulation: links for " + std::to_string(config.links.ranks()) + " ranks, the schedule has " +
                  std::to_string(ranks));
    }
    cost.set_links(config.links);
  }
  cost.set_recompute(config.memory.recompute);
  if (!config.tensor_parallel.empty()) {
    std::vector<RankTensorParallel> tp;
    for (int r = 0; r < ranks; ++r) {
      const std::vector<LinkProfile>& links = config.tensor_parallel_links;
      const LinkProfile link = links.empty()       ? report.device(r).machine_link
                               : links.size() == 1 ? links.front()
                                                   : links.at(static_cast<std::size_t>(r));
      tp.push_back({config.tensor_parallel_of(r), link});
    }
    cost.set_tensor_parallel(std::move(tp), config.memory.precision == spec::Precision::fp32 ? 4.0 : 2.0);
  }
  return cost;
}

namespace {

// The TP degree of each virtual stage from its ranks' (all holders agree), each checked against
// the model and the partition (spec/tensor_parallel_plan.h).
std::vector<int> vstage_tensor_parallel(const SimulationConfig& config, const schedule::Layout& layout,
                                        const spec::SequencePartition& partition) {
  if (config.tensor_parallel.empty()) return {};
  if (config.tensor_parallel.size() != 1 && static_cast<int>(config.tensor_parallel.size()) != layout.num_ranks()) {
    throw Error("--tp lists " + std::to_string(config.tensor_parallel.size()) + " degrees for " +
                std::to_string(layout.num_ranks()) + " ranks; give one, or one per rank");
  }
  std::vector<int> degrees(static_cast<std::size_t>(layout.num_vstages), 0);
  for (int r = 0; r < layout.num_ranks(); ++r) {
    const int t = config.tensor_parallel_of(r);
    spec::check_tensor_parallel(config.model.model, t);
    if (t > 1) spec::check_sequence_parallel(partition.lengths, t);
    for (std::int32_t v : layout.rank_vstages[r]) {
      int& d = degrees[static_cast<std::size_t>(v)];
      if (d != 0 && d != t) {
        throw Error("tensor parallelism: virtual stage " + std::to_string(v) + " is held by ranks of TP degree " +
                    std::to_string(d) + " and " + std::to_string(t) + "; every holder of a stage needs the same");
      }
      d = t;
    }
  }
  return degrees;
}

}  // namespace

SimulationReport simulate_family(const SimulationConfig& family_config, const schedule::ScheduleFamily& family) {
  SimulationConfig config = family_config;
  config.overlap_pairs = family_config.overlap_pairs && family.overlapped_pairs;
  const auto start = monotonic_seconds();
  plait::report(config.progress, family.name + ": generating the schedule", 0, kPhases);
  schedule::Schedule s = schedule::generate_schedule(family, config.shape);
  double generate = seconds_since(start);
  SimulationReport report = simulate_schedule(config, std::move(s), family.name);
  if (family.generate_for_costs) {
    // The family's construction for these costs (ZB-V: the zero-bubble authors' zbv.py simulates
    // the profiled F, B, W and message times), kept when it is faster than the F = B = W order, as
    // the authors keep the best of their construction's variants.
    const auto clock = monotonic_seconds();
    const FlopsCostModel cost = cost_model(config, report, report.schedule.num_ranks());
    const std::vector<std::int64_t>& lengths = report.partition.lengths;
    const double per_token = message_bytes_per_token(config);
    schedule::UnitCosts costs;
    costs.unit_seconds = [&cost](int rank, schedule::ActionKind kind, std::int32_t seg, std::int32_t vstage) {
      return cost.compute_seconds(rank, kind, 0, seg, vstage);
    };
    costs.transfer_seconds = [&](int src, int dst, std::int32_t seg) {
      return cost.transfer_seconds(src, dst, static_cast<std::int64_t>(per_token * static_cast<double>(lengths[seg])));
    };
    plait::report(config.progress, family.name + ": building the order for these costs", 0, kPhases);
    schedule::Schedule built = family.generate_for_costs(config.shape, costs);
    generate += seconds_since(clock);
    SimulationReport alternative = simulate_schedule(config, std::move(built), family.name);
    const double fixed = report.result.step_time, for_costs = alternative.result.step_time;
    if (for_costs < fixed) report = std::move(alternative);
    report.order = for_costs < fixed ? "built for these unit costs" : "the F = B = W order";
    report.order_steps = {fixed, for_costs};
  }
  report.seconds.generate = generate;
  return report;
}

SimulationReport simulate_schedule(const SimulationConfig& config, schedule::Schedule s,
                                   std::string name) {
  SimulationReport report;
  report.schedule_name = std::move(name);
  const auto phase = [&](const char* what, int done) {
    plait::report(config.progress, report.schedule_name + ": " + what, done, kPhases);
  };
  phase("validating", 1);
  auto clock = monotonic_seconds();
  if (auto v = schedule::validate_structure(s)) schedule::throw_violation(s, *v);
  report.seconds.validate = seconds_since(clock);

  const schedule::Layout& layout = s.layout;
  const spec::ModelSpec& shape = config.model.model;
  // A given partition is for the schedules of that many segments; one of whole micro-batches
  // (k = 1, e.g. beside sequence schedules in --compare) runs the whole sequence.
  if (config.partition.count() > 0 && layout.num_segments > 1) {
    if (config.partition.count() != layout.num_segments || config.partition.seq() != config.seq) {
      throw Error("simulation: a partition of " + std::to_string(config.partition.count()) +
                  " segments over " + std::to_string(config.partition.seq()) + " tokens for " +
                  std::to_string(layout.num_segments) + " segments of " + std::to_string(config.seq));
    }
    report.partition = config.partition;
  } else {
    spec::SegmentRequest request;
    request.count = layout.num_segments;
    request.split = config.split;
    request.multiple = layout.num_segments > 1 ? config.split_multiple : 1;  // one segment: the whole sequence
    report.partition = spec::cut_sequence(shape, config.seq, request);
  }
  if (config.vstage_layers.empty()) {
    report.vstage_layers = split_layers(shape.layers, layout.num_vstages);
  } else {
    report.vstage_layers = config.vstage_layers;
    int sum = 0;
    for (int l : report.vstage_layers) sum += l;
    if (static_cast<int>(report.vstage_layers.size()) != layout.num_vstages || sum != shape.layers) {
      throw Error("simulation: " + std::to_string(report.vstage_layers.size()) +
                  " layer counts summing to " + std::to_string(sum) + " for " +
                  std::to_string(layout.num_vstages) + " virtual stages of a " +
                  std::to_string(shape.layers) + "-layer model");
    }
  }
  report.devices = config.devices.empty() ? std::vector<DeviceProfile>{default_device_profile()}
                                          : config.devices;
  if (report.devices.size() != 1 && static_cast<int>(report.devices.size()) != s.num_ranks()) {
    throw Error("--device lists " + std::to_string(report.devices.size()) +
                " profiles for " + std::to_string(s.num_ranks()) +
                " ranks; give one profile, or one per rank");
  }

  phase("lowering", 2);
  clock = monotonic_seconds();
  schedule::LowerOptions lower_options;
  const std::vector<std::int64_t>& lengths = report.partition.lengths;
  const double per_token = message_bytes_per_token(config);
  lower_options.message_bytes = [&lengths, per_token](const schedule::MessageKey& key) {
    return static_cast<std::int64_t>(per_token * static_cast<double>(lengths[key.segment]));
  };
  const schedule::LoweredSchedule lowered = schedule::lower(s, lower_options);
  report.seconds.lower = seconds_since(clock);
  // The deadlock rule runs on the program the simulator executes (receives posted ahead).
  clock = monotonic_seconds();
  if (auto v = schedule::check_deadlock(s, lowered)) schedule::throw_violation(s, *v);
  report.seconds.validate += seconds_since(clock);

  try {
    config.memory.recompute.resolve(report.vstage_layers);
  } catch (const Error& e) {
    throw Error(std::string("recompute: ") + e.what());
  }
  MemoryOptions memory_options = config.memory;
  memory_options.tensor_parallel = vstage_tensor_parallel(config, layout, report.partition);
  const FlopsCostModel cost = cost_model(config, report, s.num_ranks());
  const MemoryModel memory(shape, report.vstage_layers, report.partition, config.microbatch_size,
                           memory_options);
  phase("timing", 3);
  clock = monotonic_seconds();
  SimOptions options{config.record_events, config.record_events};
  options.overlap_pairs = config.overlap_pairs;
  if (!config.activation_offload.chunk_offloads.empty()) options.activation_offload = &config.activation_offload;
  const DocumentCostModel documents(cost, config.model.model, report.partition, config.microbatch_size,
                                    config.microbatch_work);
  report.result = simulate(s, lowered, config.microbatch_work.empty() ? static_cast<const CostModel&>(cost) : documents,
                           &memory, options);
  report.seconds.simulate = seconds_since(clock);

  for (int r = 0; r < s.num_ranks(); ++r) {
    report.static_memory.push_back(memory.static_memory(layout.rank_vstages[r]));
    report.devices_used += config.tensor_parallel_of(r);
  }
  report.tokens_per_step = static_cast<double>(layout.num_microbatches) * config.microbatch_size *
                           static_cast<double>(config.seq);
  double forward = 0;
  for (double f : report.partition.flops) forward += f;
  report.model_flops_per_step = 3.0 * forward * config.microbatch_size * layout.num_microbatches;
  report.schedule = std::move(s);
  return report;
}

trace::Timeline make_timeline(const SimulationConfig& config, const SimulationReport& report) {
  const schedule::Layout& layout = report.schedule.layout;
  trace::Timeline tl;
  char buf[256];
  std::snprintf(buf, sizeof buf, "plait sim: %s, %s, %d ranks, v=%d, m=%d, k=%d, seq %lld",
                report.schedule_name.c_str(), config.model.name.c_str(), layout.num_ranks(),
                layout.max_chunks(), layout.num_microbatches, layout.num_segments,
                static_cast<long long>(config.seq));
  tl.title = buf;
  tl.num_ranks = layout.num_ranks();
  tl.num_segments = layout.num_segments;
  tl.max_chunks = layout.max_chunks();
  for (int r = 0; r < layout.num_ranks(); ++r) {
    std::string label = "rank " + std::to_string(r) + " (stage";
    if (layout.num_chunks(r) > 1) label += "s";
    for (int c = 0; c < layout.num_chunks(r); ++c) {
      label += c ? ',' : ' ';
      label += std::to_string(layout.vstage(r, c));
    }
    // Each row names its rank's device: with unlike devices, that is why one row is busier.
    label += ")";
    if (!report.devices.empty()) {
      label += ": " + report.devices[std::min(static_cast<std::size_t>(r), report.devices.size() - 1)].name;
    }
    tl.rank_labels.push_back(label);
  }
  std::snprintf(buf, sizeof buf, "%.4f s", report.result.step_time);
  tl.summary.emplace_back("step time", buf);
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * report.result.bubble_fraction);
  tl.summary.emplace_back("bubble", buf);
  std::snprintf(buf, sizeof buf, "%.0f tokens/s", report.tokens_per_step / report.result.step_time);
  tl.summary.emplace_back("throughput", buf);
  std::string lengths;
  for (std::int64_t len : report.partition.lengths) {
    if (!lengths.empty()) lengths += ' ';
    lengths += std::to_string(len);
  }
  tl.summary.emplace_back("segments", std::string(spec::split_method_name(report.partition.split)) + " split: " + lengths);
  double peak = 0;
  for (int r = 0; r < layout.num_ranks(); ++r) peak = std::max(peak, report.peak_total_bytes(r));
  std::snprintf(buf, sizeof buf, "%.1f GiB (highest rank)", peak / (1024.0 * 1024 * 1024));
  tl.summary.emplace_back("peak memory", buf);
  // One line per distinct device, with the ranks that have it when they are not all alike.
  std::vector<std::pair<std::size_t, std::string>> kinds;  // first rank with the device, its ranks
  for (std::size_t r = 0; r < report.devices.size(); ++r) {
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const auto& k) { return report.devices[k.first].name == report.devices[r].name; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), {r, ""});
    it->second += (it->second.empty() ? "" : ", ") + std::to_string(r);
  }
  for (const auto& [first, ranks] : kinds) {
    const bool several = ranks.find(',') != std::string::npos;
    tl.summary.emplace_back(kinds.size() == 1 ? std::string("device") : "device (rank" + std::string(several ? "s " : " ") + ranks + ")",
                            report.devices[first].describe());
  }
  tl.events = report.result.events;
  return tl;
}

}  // namespace plait::sim
