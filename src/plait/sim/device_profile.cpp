#include "plait/sim/device_profile.h"

#include <cstdio>
#include <filesystem>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/sim/zorse_profiles.h"

namespace plait::sim {

namespace {

// One layer's seconds for x samples' worth of the measured work (x = FLOPs / measured FLOPs per
// sample): the fit slope * x + intercept. Some Zorse fits have a negative intercept (t4 at 4096
// tokens: its time per sample grows with the micro-batch), which would make small units (short
// segments) cost nothing or less; below one sample such a fit is replaced by the line through
// the origin and its value at x = 1.
double fitted(double slope, double intercept, double x) {
  if (intercept < 0 && x < 1) return x * (slope + intercept);
  return slope * x + intercept;
}

}  // namespace

double DeviceProfile::forward_seconds(int layers, double layer_flops, double extra_flops) const {
  if (!measured) return (layers * layer_flops + extra_flops) / sustained_flops;
  const MeasuredLayerTiming& m = *measured;
  const double per_flop = m.forward_slope / m.reference_flops;
  return layers * fitted(m.forward_slope, m.forward_intercept, layer_flops / m.reference_flops) +
         extra_flops * per_flop;
}

double DeviceProfile::backward_seconds(int layers, double layer_flops, double share,
                                       double extra_flops) const {
  if (!measured) return (layers * layer_flops + extra_flops) / sustained_flops;
  const MeasuredLayerTiming& m = *measured;
  // The measured backward covers twice the forward FLOPs (B + W); this part is `share` of it.
  const double per_flop = m.backward_slope / (2.0 * m.reference_flops);
  const double whole = share > 0 ? layer_flops / (2.0 * m.reference_flops * share) : 0.0;
  return layers * share * fitted(m.backward_slope, m.backward_intercept, whole) + extra_flops * per_flop;
}

std::string DeviceProfile::describe() const {
  char buf[160];
  std::string out = name + ": ";
  if (measured) {
    std::snprintf(buf, sizeof buf, "measured per-layer latencies of %s (%s) at seq %lld, %s",
                  measured->model.c_str(), measured->chosen_because.c_str(),
                  static_cast<long long>(measured->seq), measured->dtype.c_str());
  } else {
    std::snprintf(buf, sizeof buf, "%.1f TFLOP/s sustained", sustained_flops / 1e12);
  }
  out += buf;
  if (memory_bytes > 0) {
    std::snprintf(buf, sizeof buf, ", %.0f GiB", memory_bytes / (1024.0 * 1024 * 1024));
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
