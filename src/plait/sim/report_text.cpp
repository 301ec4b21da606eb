#include "plait/sim/report_text.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

namespace plait::sim {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string seconds_text(double s) {
  return s >= 1.0 ? format("%.3f s", s) : format("%.2f ms", s * 1e3);
}

double max_peak_total(const SimulationReport& r) {
  double peak = 0;
  for (int i = 0; i < r.schedule.num_ranks(); ++i) peak = std::max(peak, r.peak_total_bytes(i));
  return peak;
}

double max_peak_activation(const SimulationReport& r) {
  double peak = 0;
  for (const RankResult& rr : r.result.ranks) peak = std::max(peak, rr.peak_activation_bytes);
  return peak;
}

// "yes", "NO (rank 3)", or "?" when a device's capacity is unknown.
std::string fits(const SimulationReport& r) {
  for (int i = 0; i < r.schedule.num_ranks(); ++i) {
    const double capacity = r.device(i).memory_bytes;
    if (capacity <= 0) return "?";
    if (r.peak_total_bytes(i) > capacity) return format("NO (rank %d)", i);
  }
  return "yes";
}

}  // namespace

std::string format_setup(const SimulationConfig& config) {
  const spec::ModelSpec& m = config.model.model;
  std::string out = format("model      %s: %s, max_seq %lld\n", config.model.name.c_str(),
                           spec::describe(m).c_str(), static_cast<long long>(m.max_seq));
  out += "           (source: " + config.model.source + ")\n";
  std::string split = config.partition.count() ? "given segment lengths"
                                                : std::string(spec::split_method_name(config.split)) + " split";
  if (!config.partition.count() && config.split_multiple > 1) {
    split += format(" (lengths multiples of %lld)", static_cast<long long>(config.split_multiple));
  }
  out += format("sequence   %lld tokens, micro-batch size %d, %s, %s\n", static_cast<long long>(config.seq),
                config.microbatch_size, split.c_str(), std::string(spec::precision_name(config.memory.precision)).c_str());
  const std::vector<DeviceProfile> devices =
      config.devices.empty() ? std::vector<DeviceProfile>{default_device_profile()} : config.devices;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (!seen.insert(devices[i].name).second) continue;
    std::string who = devices.size() == 1 ? "" : format(" (rank %zu first)", i);
    out += "device     " + devices[i].describe() + who + "\n";
  }
  if (!config.tensor_parallel.empty()) {
    std::string degrees;
    for (std::size_t i = 0; i < config.tensor_parallel.size(); ++i) {
      degrees += (i ? "," : "") + std::to_string(config.tensor_parallel[i]);
    }
    const LinkProfile link =
        config.tensor_parallel_links.empty() ? devices.front().machine_link : config.tensor_parallel_links.front();
    out += format("tensor par %s %s (Megatron TP + sequence parallelism, spec/tensor_parallel_plan.h): 1/t of the "
                  "work per device,\n           collectives as rings over the machine link %.1f us + %.0f GB/s\n",
                  config.tensor_parallel.size() == 1 ? "t =" : "t per rank", degrees.c_str(),
                  link.latency_seconds * 1e6, link.bandwidth_bytes_per_second / 1e9);
  }
  return out;
}

std::string format_report(const SimulationConfig& config, const SimulationReport& r,
                          const std::string& title) {
  const schedule::Layout& layout = r.schedule.layout;
  std::string out = "schedule   " + title + "\n" + format_setup(config);
  std::string layers;
  for (std::size_t s = 0; s < r.vstage_layers.size(); ++s) {
    if (s) layers += ",";
    layers += std::to_string(r.vstage_layers[s]);
  }
  out += format("layout     %d ranks, %d chunk(s) per rank, %d virtual stages (layers %s), %d micro-batches, %d segment(s)\n",
                layout.num_ranks(), layout.max_chunks(), layout.num_vstages, layers.c_str(),
                layout.num_microbatches, layout.num_segments);
  std::string lengths, tflops;
  for (std::size_t i = 0; i < r.partition.lengths.size(); ++i) {
    if (i) lengths += ' ';
    lengths += std::to_string(r.partition.lengths[i]);
    tflops += format(i ? " %.2f" : "%.2f", r.partition.flops[i] / 1e12);
  }
  out += "segments   lengths " + lengths + "; forward TFLOP per sample " + tflops +
         format(" (spread %.2f%%)\n", 100 * r.partition.flops_imbalance());
  if (!r.order.empty()) {
    out += format("order      %s (step %s with the F = B = W order, %s with the order built for these costs)\n",
                  r.order.c_str(), seconds_text(r.order_steps.first).c_str(), seconds_text(r.order_steps.second).c_str());
  }
  const double step = r.result.step_time;
  const int devices = r.devices_used > 0 ? r.devices_used : layout.num_ranks();
  out += format("result     step %s, bubble %.2f%%, %.0f tokens/s, %.1f TFLOP/s per device (model FLOPs over the step, %d devices)\n",
                seconds_text(step).c_str(), 100 * r.result.bubble_fraction, r.tokens_per_step / step,
                r.model_flops_per_step / step / devices / 1e12, devices);
  out += "\nrank  stages     busy        idle        in flight  peak act   static     peak total  of device\n";
  for (int i = 0; i < layout.num_ranks(); ++i) {
    std::string stages;
    for (int c = 0; c < layout.num_chunks(i); ++c) {
      if (c) stages += ',';
      stages += std::to_string(layout.vstage(i, c));
    }
    const RankResult& rr = r.result.ranks[i];
    const double capacity = r.device(i).memory_bytes;
    out += format("%4d  %-9s  %-10s  %-10s  %9.2f  %5.1f GiB  %5.1f GiB  %5.1f GiB   %s\n", i,
                  stages.c_str(), seconds_text(rr.busy).c_str(), seconds_text(r.result.idle(i)).c_str(),
                  rr.peak_in_flight, rr.peak_activation_bytes / kGiB, r.static_memory[i].total() / kGiB,
                  r.peak_total_bytes(i) / kGiB,
                  capacity > 0 ? format("%.0f%%", 100 * r.peak_total_bytes(i) / capacity).c_str() : "?");
  }
  out += "in flight: peak micro-batches of activations held (a segment counts by its share of the\n"
         "sequence); peak act: activations + K/V prefixes; static: parameters, gradients, optimizer\n";
  return out;
}

std::string format_comparison(const SimulationConfig& config, const std::vector<ComparisonRow>& rows) {
  std::string out = format_setup(config);
  out += format("pipeline   %d ranks, %d micro-batches\n\n", config.shape.stages, config.shape.microbatches);
  double reference = 0;
  for (const ComparisonRow& row : rows) {
    if (row.family == "1f1b" && row.report) reference = row.report->result.step_time;
  }
  // Names up to 14 characters (interleaved-zb); "in flight" is the worst rank's peak micro-batches
  // of activations, the figure the schedules' memory formulas give (docs/schedules.md).
  out += "schedule        v  k  step time    bubble  in flight   tokens/s   TFLOP/s   vs 1f1b  peak act  peak total  fits\n";
  for (const ComparisonRow& row : rows) {
    if (!row.report) continue;
    const SimulationReport& r = *row.report;
    const double step = r.result.step_time;
    const int devices = r.devices_used > 0 ? r.devices_used : r.schedule.num_ranks();
    double in_flight = 0;
    for (const RankResult& rank : r.result.ranks) in_flight = std::max(in_flight, rank.peak_in_flight);
    out += format("%-14s %2d %2d  %-11s %6.2f%%  %9.2f  %9.0f  %8.1f  %7s  %5.1f GiB %6.1f GiB  %s\n", row.family.c_str(),
                  row.shape.chunks, row.shape.segments, seconds_text(step).c_str(),
                  100 * r.result.bubble_fraction, in_flight, r.tokens_per_step / step, r.model_flops_per_step / step / devices / 1e12,
                  reference > 0 ? format("%.3fx", reference / step).c_str() : "n/a",
                  max_peak_activation(r) / kGiB, max_peak_total(r) / kGiB, fits(r).c_str());
  }
  for (const ComparisonRow& row : rows) {
    if (!row.report) out += "skipped    " + row.skipped + "\n";
  }
  out += "\npeak memory per pipeline rank, GiB (static + activations)\nschedule      ";
  const int ranks = config.shape.stages;
  const int shown = std::min(ranks, 16);
  for (int i = 0; i < shown; ++i) out += format(" %6d", i);
  out += ranks > shown ? "  ... (max over all ranks)\n" : "\n";
  for (const ComparisonRow& row : rows) {
    if (!row.report) continue;
    out += format("%-14s", row.family.c_str());
    for (int i = 0; i < shown; ++i) out += format(" %6.1f", row.report->peak_total_bytes(i) / kGiB);
    if (ranks > shown) out += format("  ... %.1f", max_peak_total(*row.report) / kGiB);
    out += "\n";
  }
  return out;
}

std::string path_with_schedule(const std::string& path, const std::string& schedule) {
  const std::filesystem::path p(path);
  const std::string ext = p.extension().string();
  std::filesystem::path out = p;
  out.replace_extension();
  return out.string() + "." + schedule + ext;
}

}  // namespace plait::sim
