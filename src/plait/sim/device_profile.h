#pragma once
// How fast a device computes, how much memory it has, and how fast its link to the next stage
// is. Compute comes from a datasheet peak times an efficiency measured against the work
// (flops_efficiency.h), from measured per-layer latencies of the simulated model (Zorse's
// model_latencies.json, through device curves fitted to the micro-batch sizes), or from one
// sustained FLOP/s figure (a constant efficiency, when a user gives only that).
//
// Built-in profiles:
//   a100-80gb (default)  312 TFLOP/s peak (NVIDIA A100 Tensor Core GPU datasheet: dense FP16/BF16
//                        Tensor Core) x the efficiency Zorse measured per layer on A100 80GB
//                        (every model and sequence of its float16 table pooled); 80 GiB
//   zorse:<gpu>[:<dtype>] per-layer forward/backward latencies measured by Zorse on <gpu>
//                        (a100x40, a100x80, h100-nvl, v100x16, t4, ...; dtype float16 by default)
//   <file>.json          {"name", "source", "memory_gib", "link_latency_us",
//                         "link_bandwidth_gb_per_s", "action_overhead_us"} and either
//                        "sustained_tflops", or "peak_tflops" with "efficiency_of" (a Zorse GPU
//                        type, zorse:<gpu>[:<dtype>]) and "efficiency_peak_tflops" (its peak)
//                         "machine_link_latency_us", "machine_link_bandwidth_gb_per_s"
// Link (all built-ins): 5 us latency, 25 GB/s, one InfiniBand HDR (200 Gb/s) port per device.
// Machine link of a100-80gb (tensor-parallel collectives): NVLink 3, 240 GB/s bus bandwidth and
// 5.7 us per ring step (kNvlink3 in device_profile.cpp says where each comes from).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plait/spec/model_spec.h"
#include "plait/sim/flops_efficiency.h"
#include "plait/sim/latency_curve.h"

namespace plait::sim {

struct LinkProfile {
  double latency_seconds = 5e-6;
  double bandwidth_bytes_per_second = 25e9;
  // latency + bytes / bandwidth; a 0-byte message costs nothing.
  double transfer_seconds(std::int64_t bytes) const {
    return bytes > 0 ? latency_seconds + static_cast<double>(bytes) / bandwidth_bytes_per_second : 0.0;
  }
};

// Per transformer layer, the time of b samples' work, measured for `model` at `seq` tokens per
// sample (Zorse model_latencies.json; backward is B and W together): a curve fitted to the
// measured micro-batch sizes (latency_curve.h), or the table's own line where it has no samples.
struct MeasuredLayerTiming {
  std::string model;
  std::int64_t seq = 0;
  // The shortest sequence the table measured for this model, device and dtype: one sample of it
  // is the smallest unit of work the measurements cover (the planner does not cut units below it).
  std::int64_t shortest_seq = 0;
  // Why this measured model was read (latency_table.h's rules): "named for this model" (by a
  // preset, --profile-model or a cluster spec), "the table's only model", or "same family and
  // hidden size".
  std::string chosen_because;
  std::string dtype;
  LatencyCurve forward, backward;  // seconds against samples of work
  // "fitted to the micro-batch sizes 1..16" or "the table's line fit" (for reports).
  std::string fit;
  // Forward FLOPs of one layer of `model` on one sample of `seq` tokens:
  // 2 * seq * parameters_per_layer + 2 * hidden * seq^2 (matmuls, causal attention at half).
  double reference_flops = 0;
};

struct DeviceProfile {
  std::string name;
  std::string source;
  double memory_bytes = 0;      // 0: unknown
  double sustained_flops = 0;   // FLOP/s, when neither measured nor given an efficiency
  std::optional<MeasuredLayerTiming> measured;
  std::optional<FlopsEfficiency> efficiency;  // peak x efficiency(work), when not measured
  LinkProfile link;
  // The link between this device and the other devices of its machine, which a tensor-parallel
  // group's collectives use (spec/tensor_parallel_plan.h): latency per ring step and NCCL bus
  // bandwidth. The built-in a100-80gb: NVLink 3 (below); other profiles: `link` unless a JSON
  // profile gives machine_link_latency_us / machine_link_bandwidth_gb_per_s (a cluster spec's
  // machines[].link takes its place in the planner).
  LinkProfile machine_link;
  // Fixed seconds of every compute action beyond the work of its layers: the runtime's
  // synchronisation and message posting around one F, B, W or BW, paid once per action whatever
  // its size (so more segments and chunks pay more). The layers' own fixed costs (kernel
  // launches, small kernels' low efficiency) are in the measured curve's fixed cost per layer.
  double action_overhead_seconds = 0;

  // Forward seconds for `layers` layers of `layer_flops` each plus `extra_flops` outside them
  // (the LM head). Measured: layers * curve(layer_flops / reference), the head at the curve's
  // marginal rate for its work (no fixed cost of its own). (A negative fixed cost is not
  // extrapolated below one sample's work: there the time is proportional, latency_curve.h.)
  double forward_seconds(int layers, double layer_flops, double extra_flops) const;
  // One part (B or W) of the backward: its FLOPs per layer and the part's share of the layer's
  // backward FLOPs (which splits the measured intercept).
  double backward_seconds(int layers, double layer_flops, double share, double extra_flops) const;
  // The compute part of describe(): "312.0 TFLOP/s peak x measured efficiency (...)", "measured
  // per-layer latencies of ...", or "120.0 TFLOP/s sustained".
  std::string describe_compute() const;
  // One line for reports: "a100-80gb: 312.0 TFLOP/s peak x ..., 80 GiB (source ...)".
  std::string describe() const;
};

DeviceProfile default_device_profile();

// Which Zorse table a zorse:<gpu> profile reads (zorse_profiles.h): the named measured model
// (a preset's profile_model, --profile-model, a cluster spec's "profile_model"), else the one
// table of the model's family and hidden size.
struct LatencyPreference {
  std::string model;
  std::int64_t seq = 0;  // the sequence length being simulated (0: the longest measured)
};

// One spec (built-in name, zorse:<gpu>[:<dtype>], or JSON file) for `model`. Throws
// plait::Error naming the spec.
DeviceProfile resolve_device(const std::string& spec, const spec::ModelSpec& model,
                             const LatencyPreference& preference = {});

// A comma-separated list: one profile for every rank, or one per rank.
std::vector<DeviceProfile> resolve_devices(const std::string& specs, const spec::ModelSpec& model,
                                           const LatencyPreference& preference = {});

}  // namespace plait::sim
