#include "plait/sim/zorse_profiles.h"

#include <cmath>
#include <optional>
#include <set>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/sim/shipped_data.h"

namespace plait::sim {

namespace {

const char* kLatencies = "profiles/zorse/model_latencies.json";
const char* kStats = "profiles/zorse/model_stats.json";

// Nominal device memory of the GPU types Zorse measured, GiB (vendor datasheets).
double memory_gib(const std::string& gpu) {
  struct Entry {
    const char* gpu;
    double gib;
  };
  static const Entry table[] = {
      {"a100x40", 40}, {"a100x80", 80}, {"h100-nvl", 94}, {"a6000", 48},  {"l40s", 48},
      {"a10g", 24},    {"l4", 24},      {"t4", 16},       {"v100x16", 16}, {"v100x32", 32},
      {"v100-pciex16", 16}, {"v100", 16}, {"p100", 16},  {"p40", 24},     {"rtx3090", 24},
      {"rtx_3090", 24}, {"w6800", 32},
  };
  for (const Entry& e : table) {
    if (gpu == e.gpu) return e.gib;
  }
  return 0.0;
}

// A measurement usable as a profile: [[fs, fi], [bs, bi], [...], [...]].
bool has_fit(const nlohmann::json& entry) {
  return entry.is_array() && entry.size() >= 2 && entry[0].is_array() && entry[0].size() == 2 &&
         entry[1].is_array() && entry[1].size() == 2 && entry[0][0].is_number() &&
         entry[1][0].is_number();
}

}  // namespace

std::vector<std::string> zorse_gpu_types() {
  const nlohmann::json latencies = read_json_file(shipped_data_path(kLatencies));
  std::set<std::string> gpus;
  for (const auto& [model, by_gpu] : latencies.items()) {
    for (const auto& [gpu, unused] : by_gpu.items()) gpus.insert(gpu);
  }
  return {gpus.begin(), gpus.end()};
}

std::string zorse_gpu_list() {
  std::string out;
  try {
    for (const std::string& g : zorse_gpu_types()) out += (out.empty() ? "" : ", ") + g;
  } catch (const Error&) {
    out = "(Zorse profiles not found)";
  }
  return out;
}

DeviceProfile zorse_device_profile(const std::string& gpu, const std::string& dtype,
                                   const schedule::ModelShape& model) {
  const std::string latencies_path = shipped_data_path(kLatencies);
  const nlohmann::json latencies = read_json_file(latencies_path);
  const nlohmann::json stats = read_json_file(shipped_data_path(kStats));
  struct Candidate {
    std::string model;
    std::int64_t seq = 0;
    double hidden_distance = 0;
    bool gpt = false;
    const nlohmann::json* entry = nullptr;
    double hidden = 0, params_per_layer = 0;
  };
  std::optional<Candidate> best;
  bool gpu_seen = false;
  for (const auto& [name, by_gpu] : latencies.items()) {
    if (!stats.contains(name) || !by_gpu.contains(gpu)) continue;
    gpu_seen = true;
    const nlohmann::json& s = stats[name];
    if (!s.contains("hidden_size") || !s.contains("parameters_per_layer")) continue;
    for (const auto& [seq_text, by_dtype] : by_gpu[gpu].items()) {
      if (!by_dtype.contains(dtype) || !has_fit(by_dtype[dtype])) continue;
      Candidate c;
      c.model = name;
      c.seq = std::stoll(seq_text);
      c.hidden = s["hidden_size"].get<double>();
      c.params_per_layer = s["parameters_per_layer"].get<double>();
      c.hidden_distance = std::fabs(std::log(c.hidden / model.hidden));
      c.gpt = name.find("gpt") != std::string::npos;
      c.entry = &by_dtype[dtype];
      auto better = [](const Candidate& a, const Candidate& b) {
        if (std::fabs(a.hidden_distance - b.hidden_distance) > 1e-9) return a.hidden_distance < b.hidden_distance;
        if (a.seq != b.seq) return a.seq > b.seq;
        if (a.gpt != b.gpt) return a.gpt;
        return a.model < b.model;
      };
      if (!best || better(c, *best)) best = c;
    }
  }
  if (!best) {
    throw Error("--device zorse:" + gpu + ":" + dtype + ": " + latencies_path +
                (gpu_seen ? " has no fitted " + dtype + " latencies for " + gpu
                          : " has no GPU type '" + gpu + "'; expected one of " + zorse_gpu_list()));
  }
  const nlohmann::json& e = *best->entry;
  MeasuredLayerTiming m;
  m.model = best->model;
  m.seq = best->seq;
  m.dtype = dtype;
  m.forward_slope = e[0][0].get<double>() * 1e-3;
  m.forward_intercept = e[0][1].get<double>() * 1e-3;
  m.backward_slope = e[1][0].get<double>() * 1e-3;
  m.backward_intercept = e[1][1].get<double>() * 1e-3;
  const double seq = static_cast<double>(best->seq);
  m.reference_flops = 2.0 * seq * best->params_per_layer + 2.0 * best->hidden * seq * seq;
  if (!(m.forward_slope > 0) || !(m.backward_slope > 0)) {
    throw Error("--device zorse:" + gpu + ": the fitted slopes for " + m.model + " are not positive");
  }
  DeviceProfile d;
  d.name = "zorse:" + gpu + ":" + dtype;
  d.source = "Zorse model_latencies.json (benson-guo/zorse, MIT): " + m.model + " on " + gpu +
             ", seq " + std::to_string(m.seq) + ", " + dtype + ", fitted in micro-batch size";
  d.memory_bytes = memory_gib(gpu) * 1024 * 1024 * 1024;
  d.measured = m;
  return d;
}

}  // namespace plait::sim
