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
// A FLOP/s profile with an efficiency times a layer by its work in FLOPs; the LM head likewise at
// the marginal rate.
double DeviceProfile::forward_seconds(int layers, double layer_flops, double extra_flops) const {
  if (!measured && efficiency) {
    return layers * efficiency->forward_seconds(layer_flops) + extra_flops * efficiency->forward_marginal(extra_flops);
  }
  if (!measured) return (layers * layer_flops + extra_flops) / sustained_flops;
  const MeasuredLayerTiming& m = *measured;
  const double extra = extra_flops / m.reference_flops;
  return layers * m.forward.at(layer_flops / m.reference_flops) + extra * m.forward.marginal(extra);
}

double DeviceProfile::backward_seconds(int layers, double layer_flops, double share,
                                       double extra_flops) const {
  if (!measured && efficiency) {
    // This part is `share` of the backward of layer_flops / share.
    const double whole = share > 0 ? layer_flops / share : 0.0, extra = share > 0 ? extra_flops / share : 0.0;
    return layers * share * efficiency->backward_seconds(whole) + extra_flops * efficiency->backward_marginal(extra);
  }
  if (!measured) return (layers * layer_flops + extra_flops) / sustained_flops;
  const MeasuredLayerTiming& m = *measured;
  // The measured backward covers twice the forward FLOPs (B + W); this part is `share` of the
  // backward of `whole` samples.
  const double whole = share > 0 ? layer_flops / (2.0 * m.reference_flops * share) : 0.0;
  const double extra = extra_flops / (2.0 * m.reference_flops);
  return layers * share * m.backward.at(whole) + extra * m.backward.marginal(extra);
}

std::string DeviceProfile::describe_compute() const {
  char buf[200];
  std::string out;
  if (measured) {
    std::snprintf(buf, sizeof buf, "measured per-layer latencies of %s (%s) at seq %lld, %s",
                  measured->model.c_str(), measured->chosen_because.c_str(),
                  static_cast<long long>(measured->seq), measured->dtype.c_str());
    if (!measured->fit.empty()) {
      out += buf;
      std::snprintf(buf, sizeof buf, " (%s)", measured->fit.c_str());
    }
  } else if (efficiency) {
    std::snprintf(buf, sizeof buf,
                  "%.1f TFLOP/s peak x measured efficiency (a layer forward of 1e11 / 1e12 / 1e13 FLOPs at "
                  "%.0f%% / %.0f%% / %.0f%% of the peak)",
                  efficiency->peak_flops / 1e12, 100 * efficiency->forward_efficiency(1e11),
                  100 * efficiency->forward_efficiency(1e12), 100 * efficiency->forward_efficiency(1e13));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f TFLOP/s sustained", sustained_flops / 1e12);
  }
  return out + buf;
}

std::string DeviceProfile::describe() const {
  char buf[160];
  std::string out = name + ": " + describe_compute();
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
  out += buf;
  if (machine_link.latency_seconds != link.latency_seconds ||
      machine_link.bandwidth_bytes_per_second != link.bandwidth_bytes_per_second) {
    std::snprintf(buf, sizeof buf, ", machine link %.1f us + %.0f GB/s", machine_link.latency_seconds * 1e6,
                  machine_link.bandwidth_bytes_per_second / 1e9);
    out += buf;
  }
  return out + " (source: " + source + ")";
}

// NVIDIA A100 Tensor Core GPU datasheet: 312 TFLOP/s dense FP16/BF16 Tensor Core (624 with
// sparsity), 80 GB HBM2e for the 80GB model.
constexpr double kA100PeakFlops = 312e12;

// NVLink 3 between the A100s of one machine, for the TP collectives' ring model
// (spec::ring_collective_seconds). Bandwidth: the A100 datasheet gives 600 GB/s of NVLink per GPU
// (12 links, both directions: 300 GB/s each way); NCCL's topology model counts an A100 NVLink at
// 20 GB/s of the link's 25 (src/graph/topo.h; an NCCL maintainer: "the app-level bandwidth is
// [roughly] 80% of the peak", NVIDIA/nccl issue 1054), 12 x 20 = 240 GB/s, the bus bandwidth
// the ring reaches (nccl-tests issue 149 measured an all-reduce bus bandwidth of about 200 GB/s
// on 8 A100-SXM4-80GB). Latency: NCCL's tuning model's per-step hardware latency of a ring on
// NVLink with the Simple protocol, 5.7 us (src/graph/tuning.cc, hwLat[NVLINK][RING][SIMPLE]).
constexpr LinkProfile kNvlink3{5.7e-6, 240e9};

DeviceProfile default_device_profile() {
  // The pooled fit reads the shipped table once; every copy of the profile shares it.
  static const FlopsEfficiency a100 = zorse_efficiency("a100x80", "float16", kA100PeakFlops, kA100PeakFlops);
  DeviceProfile d;
  d.name = "a100-80gb";
  d.source = "peak: NVIDIA A100 Tensor Core GPU datasheet (312 TFLOP/s dense FP16/BF16); efficiency: " +
             a100.source + "; 80 GiB: the same datasheet; link: InfiniBand HDR 200 Gb/s; machine link: NVLink 3 "
             "(datasheet 600 GB/s per GPU; NCCL's model 240 GB/s bus bandwidth, 5.7 us per ring step)";
  d.efficiency = a100;
  d.memory_bytes = 80.0 * 1024 * 1024 * 1024;
  d.machine_link = kNvlink3;
  return d;
}

namespace {

DeviceProfile device_from_file(const std::string& path) {
  const nlohmann::json json = read_json_file(path);
  JsonFields f(json, path);
  DeviceProfile d;
  d.name = f.string("name", std::filesystem::path(path).stem().string());
  d.source = f.string("source", path);
  if (f.has("peak_tflops") || f.has("efficiency_of")) {
    // The datasheet peak x the efficiency measured on a Zorse GPU type (its peak given too).
    if (f.has("sustained_tflops")) f.fail("sustained_tflops", "give either sustained_tflops or peak_tflops with efficiency_of");
    const double peak = f.number("peak_tflops");
    if (!(peak > 0)) f.fail("peak_tflops", "expected a positive number of TFLOP/s");
    std::string of = f.string("efficiency_of");
    if (!of.starts_with("zorse:")) f.fail("efficiency_of", "expected zorse:<gpu>[:<dtype>], found '" + of + "'");
    of = of.substr(6);
    const std::size_t colon = of.find(':');
    const double measured_peak = f.number("efficiency_peak_tflops");
    if (!(measured_peak > 0)) f.fail("efficiency_peak_tflops", "expected the measured GPU type's peak TFLOP/s");
    try {
      d.efficiency = zorse_efficiency(of.substr(0, colon), colon == std::string::npos ? "float16" : of.substr(colon + 1),
                                      measured_peak * 1e12, peak * 1e12);
    } catch (const Error& e) {
      f.fail("efficiency_of", e.what());
    }
  } else {
    const double tflops = f.number("sustained_tflops");
    if (!(tflops > 0)) f.fail("sustained_tflops", "expected a positive number of TFLOP/s");
    d.sustained_flops = tflops * 1e12;
  }
  d.memory_bytes = f.number("memory_gib", 0.0) * 1024 * 1024 * 1024;
  d.link.latency_seconds = f.number("link_latency_us", d.link.latency_seconds * 1e6) * 1e-6;
  d.link.bandwidth_bytes_per_second =
      f.number("link_bandwidth_gb_per_s", d.link.bandwidth_bytes_per_second / 1e9) * 1e9;
  d.action_overhead_seconds = f.number("action_overhead_us", 0.0) * 1e-6;
  if (!(d.action_overhead_seconds >= 0)) f.fail("action_overhead_us", "expected microseconds >= 0");
  if (!(d.link.bandwidth_bytes_per_second > 0)) {
    f.fail("link_bandwidth_gb_per_s", "expected a positive bandwidth");
  }
  d.machine_link.latency_seconds = f.number("machine_link_latency_us", d.link.latency_seconds * 1e6) * 1e-6;
  d.machine_link.bandwidth_bytes_per_second =
      f.number("machine_link_bandwidth_gb_per_s", d.link.bandwidth_bytes_per_second / 1e9) * 1e9;
  if (!(d.machine_link.bandwidth_bytes_per_second > 0)) {
    f.fail("machine_link_bandwidth_gb_per_s", "expected a positive bandwidth");
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
