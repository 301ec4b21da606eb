#include "plait/sim/zorse_profiles.h"

#include <algorithm>
#include <set>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/sim/latency_table.h"
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

}  // namespace

// The shipped table and statistics, read once (immutable afterwards).
const LatencyTable& zorse_table() {
  static const LatencyTable table = read_latency_table(shipped_data_path(kLatencies), false);
  return table;
}

const nlohmann::json& zorse_model_stats() {
  static const nlohmann::json stats = read_json_file(shipped_data_path(kStats));
  return stats;
}

std::vector<std::string> zorse_gpu_types() {
  std::set<std::string> gpus;
  for (const LatencyEntry& e : zorse_table().entries) gpus.insert(e.device);
  return {gpus.begin(), gpus.end()};
}

double zorse_memory_bytes(const std::string& gpu) { return memory_gib(gpu) * 1024 * 1024 * 1024; }

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
                                   const spec::ModelSpec& model,
                                   const LatencyPreference& preference) {
  const LatencyTable& table = zorse_table();
  const std::vector<std::string> gpus = zorse_gpu_types();
  if (std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) {
    throw Error("--device zorse:" + gpu + ":" + dtype + ": " + table.path + " has no GPU type '" + gpu +
                "'; expected one of " + zorse_gpu_list());
  }
  DeviceProfile d = measured_device_profile(table, &zorse_model_stats(), gpu, dtype, model, preference,
                                            "zorse:" + gpu + ":" + dtype);
  d.source = "Zorse model_latencies.json (benson-guo/zorse, MIT): " + d.measured->model + " (" +
             d.measured->chosen_because + ") on " + gpu +
             ", seq " + std::to_string(d.measured->seq) + ", " + dtype + ", fitted in micro-batch size";
  d.memory_bytes = zorse_memory_bytes(gpu);
  return d;
}

}  // namespace plait::sim
