#include "plait/sim/flops_efficiency.h"

#include <vector>

#include "plait/core/error.h"
#include "plait/sim/zorse_profiles.h"

namespace plait::sim {

double FlopsEfficiency::forward_seconds(double flops) const {
  return forward.at(flops) * measured_peak_flops / peak_flops;
}

double FlopsEfficiency::backward_seconds(double flops) const {
  return backward.at(flops) * measured_peak_flops / peak_flops;
}

double FlopsEfficiency::forward_marginal(double flops) const {
  return forward.marginal(flops) * measured_peak_flops / peak_flops;
}

double FlopsEfficiency::backward_marginal(double flops) const {
  return backward.marginal(flops) * measured_peak_flops / peak_flops;
}

FlopsEfficiency zorse_efficiency(const std::string& gpu, const std::string& dtype, double measured_peak_flops,
                                 double peak_flops) {
  const LatencyTable& table = zorse_table();
  const nlohmann::json& stats = zorse_model_stats();
  std::vector<double> f_work, f_seconds, b_work, b_seconds;
  int entries = 0;
  for (const LatencyEntry& e : table.entries) {
    if (e.device != gpu || e.dtype != dtype || !stats.contains(e.model)) continue;
    const nlohmann::json& s = stats[e.model];
    if (!s.contains("parameters_per_layer") || !s.contains("hidden_size")) continue;
    const double seq = static_cast<double>(e.seq);
    // One layer's forward FLOPs per sample (latency_table.h's reference FLOPs).
    const double flops = 2.0 * seq * s["parameters_per_layer"].get<double>() + 2.0 * s["hidden_size"].get<double>() * seq * seq;
    for (std::size_t b = 1; b <= e.forward_ms.size(); ++b) {
      f_work.push_back(static_cast<double>(b) * flops);
      f_seconds.push_back(e.forward_ms[b - 1] * 1e-3);
    }
    for (std::size_t b = 1; b <= e.backward_ms.size(); ++b) {
      b_work.push_back(2.0 * static_cast<double>(b) * flops);
      b_seconds.push_back(e.backward_ms[b - 1] * 1e-3);
    }
    entries += !e.forward_ms.empty();
  }
  if (f_work.size() < 2 || b_work.size() < 2) {
    throw Error("zorse_efficiency: " + table.path + " has no " + dtype + " samples of " + gpu +
                " with model statistics to fit an efficiency to");
  }
  FlopsEfficiency out;
  out.peak_flops = peak_flops;
  out.measured_peak_flops = measured_peak_flops;
  out.forward = fit_latency_curve(f_work, f_seconds);
  out.backward = fit_latency_curve(b_work, b_seconds);
  out.source = "Zorse model_latencies.json (benson-guo/zorse, MIT): " + gpu + " " + dtype + ", " +
               std::to_string(entries) + " measured (model, sequence) entries pooled, " +
               std::to_string(f_work.size()) + " forward and " + std::to_string(b_work.size()) +
               " backward samples";
  return out;
}

}  // namespace plait::sim
