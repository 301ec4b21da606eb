#include "plait/sim/device_profile.h"

#include <cstdio>
#include <filesystem>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/sim/zorse_profiles.h"

namespace plait::sim {

// A measured layer's curve takes work in samples of the measured sequence: x = FLOPs / the
// measured layer's FLOPs per sample. Work outside the layers (the LM head) runs at the curve's
// marginal rate for that much work, without a fixed cost of its own.
double DeviceProfile::forward_seconds(int layers, double layer_flops, double extra_flops) const {
  if (!measured) return (layers * layer_flops + extra_flops) / sustained_flops;
  const MeasuredLayerTiming& m = *measured;
  const double extra = extra_flops / m.reference_flops;
  return layers * m.forward.at(layer_flops / m.reference_flops) + extra * m.forward.marginal(extra);
}

double DeviceProfile::backward_seconds(int layers, double layer_flops, double share,
                                       double extra_flops) const {
  if (!measured) return (layers * layer_flops + extra_flops) / sustained_flops;
  const MeasuredLayerTiming& m = *measured;
  // The measured backward covers twice the forward FLOPs (B + W); this part is `share` of the
  // backward of `whole` samples.
  const double whole = share > 0 ? layer_flops / (2.0 * m.reference_flops * share) : 0.0;
  const double extra = extra_flops / (2.0 * m.reference_flops);
  return layers * share * m.backward.at(whole) + extra * m.backward.marginal(extra);
}

std::string DeviceProfile::describe() const {
  char buf[160];
  std::string out = name + ": ";
  if (measured) {
    std::snprintf(buf, sizeof buf, "measured per-layer latencies of %s (%s) at seq %lld, %s",
                  measured->model.c_str(), measured->chosen_because.c_str(),
                  static_cast<long long>(measured->seq), measured->dtype.c_str());
    if (!measured->fit.empty()) {
      out += buf;
      std::snprintf(buf, sizeof buf, " (%s)", measured->fit.c_str());
    }
  } else {
    std::snprintf(buf, sizeof buf, "%.1f TFLOP/s sustained", sustained_flops / 1e12);
  }
  out += buf;
  if (memory_bytes > 0) {
    std::snprintf(buf, sizeof buf, ", %.0f GiB", memory_bytes / (1024.0 * 1024 * 1024));
    out += buf;
  }
  if (action_overhead_seconds > 0) {
    std::snprintf(buf, sizeof buf, ", %.1f us per action", action_overhead_seconds * 1e6);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, ", link %.0f us + %.0f GB/s", link.latency_seconds * 1e6,
                link.bandwidth_bytes_per_second / 1e9);
  return out + buf + " (source: " + source + ")";
}

DeviceProfile default_device_profile() {
  DeviceProfile d;
  d.name = "a100-80gb";
  d.source =
      "142.1 TFLOP/s: best per-GPU throughput reported in the thunlp/Seq1F1B README for the 7B "
      "model on A100s; 80 GiB: NVIDIA A100 80GB datasheet; link: InfiniBand HDR 200 Gb/s";
  d.sustained_flops = 142.1e12;
  d.memory_bytes = 80.0 * 1024 * 1024 * 1024;
  return d;
}

namespace {

DeviceProfile device_from_file(const std::string& path) {
  const nlohmann::json json = read_json_file(path);
  JsonFields f(json, path);
  DeviceProfile d;
  d.name = f.string("name", std::filesystem::path(path).stem().string());
  d.source = f.string("source", path);
  const double tflops = f.number("sustained_tflops");
  if (!(tflops > 0)) f.fail("sustained_tflops", "expected a positive number of TFLOP/s");
  d.sustained_flops = tflops * 1e12;
  d.memory_bytes = f.number("memory_gib", 0.0) * 1024 * 1024 * 1024;
  d.link.latency_seconds = f.number("link_latency_us", d.link.latency_seconds * 1e6) * 1e-6;
  d.link.bandwidth_bytes_per_second =
      f.number("link_bandwidth_gb_per_s", d.link.bandwidth_bytes_per_second / 1e9) * 1e9;
  d.action_overhead_seconds = f.number("action_overhead_us", 0.0) * 1e-6;
  if (!(d.action_overhead_seconds >= 0)) f.fail("action_overhead_us", "expected microseconds >= 0");
  if (!(d.link.bandwidth_bytes_per_second > 0)) {
    f.fail("link_bandwidth_gb_per_s", "expected a positive bandwidth");
  }
  f.check_no_unknown_fields();
  return d;
}

}  // namespace

DeviceProfile resolve_device(const std::string& spec, const spec::ModelSpec& model,
                             const LatencyPreference& preference) {
  if (spec == "a100-80gb") return default_device_profile();
  if (spec.starts_with("zorse:")) {
    const std::string rest = spec.substr(6);
    const std::size_t colon = rest.find(':');
    const std::string gpu = rest.substr(0, colon);
    const std::string dtype = colon == std::string::npos ? "float16" : rest.substr(colon + 1);
    return zorse_device_profile(gpu, dtype, model, preference);
  }
  if (std::filesystem::exists(spec)) return device_from_file(spec);
  throw Error("--device: '" + spec +
              "' is not a profile; expected a100-80gb, zorse:<gpu>[:<dtype>] (gpu one of " +
              zorse_gpu_list() + ") or a JSON profile file");
}

std::vector<DeviceProfile> resolve_devices(const std::string& specs, const spec::ModelSpec& model,
                                           const LatencyPreference& preference) {
  std::vector<DeviceProfile> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = specs.find(',', start);
    out.push_back(resolve_device(specs.substr(start, comma - start), model, preference));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace plait::sim
