#pragma once
// A cluster description (JSON, read strictly; docs/planner.md): device types with a speed and a
// memory, machines holding devices, and the links between them.
//
//   {
//     "name": "zorse-b",
//     "precision": "mixed16",        // "mixed16" (fp16/bf16 mixed precision, GPUs) or "fp32"
//                                    // (plait's CPU engine); default mixed16
//     "grad_reduce": "fp32",         // what data parallelism reduces: "fp32" or "bf16" (mixed16)
//     "emulated": false,             // plan files then carry one "devices" entry per rank
//     "profile_model": "deepspeedllama_tiny",  // optional: the measured model whose Zorse
//                                    // tables the zorse: profiles read (default: the preset's
//                                    // table, or the one of the model's family and hidden size)
//     "device_types": {
//       "a100": {"profile": "zorse:a100x40", "memory_gib": 40},
//       "cpu":  {"profile": "cpu-profile.json", "profile_device": "cpu", "memory_gib": 2,
//                "slowdown": 2},
//       "fast": {"tflops": 120, "memory_gib": 24, "host_memory_gib": 64, "host_gbyte_per_s": 25}
//     },
//     "machines": [
//       {"name": "n0", "devices": [{"type": "a100", "count": 8}],
//        "link": {"gbyte_per_s": 300, "latency_us": 3}}
//     ],
//     "machine_link": {"gbyte_per_s": 16, "latency_us": 5},   // default inside a machine
//     "network": {"gbit_per_s": 25, "latency_us": 30},        // between machines
//     "links": [{"between": ["n0", "n1"], "gbit_per_s": 100, "latency_us": 10},
//               {"between": ["n0:3", "n0:4"], "gbyte_per_s": 50, "latency_us": 2}]
//   }
//
// A device type's speed is a profile ("zorse:<gpu>" from the shipped Zorse table, or a latency
// file in Zorse's model_latencies.json shape, e.g. what `plait profile` writes; a relative path
// is relative to the cluster file) or a sustained "tflops" figure. "slowdown" (>= 1) makes an
// emulated device that many times slower (every compute time is multiplied by it).
// "host_memory_gib" gives the device a host memory tier the planner may offload optimizer state
// to (none without it), reached at "host_gbyte_per_s" (default 16: PCIe 4 x16's order). Link speeds
// take exactly one of gbit_per_s (network convention, 25 Gb/s = 3.125 GB/s) or gbyte_per_s.
// Devices are numbered in file order, machine by machine ("n0:3" is device 3 of machine n0).
// Every error is an InputError naming the file and the field.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/sim/device_profile.h"
#include "plait/spec/precision_policy.h"
#include "plait/spec/unit_memory.h"

namespace plait::plan {

// mixed16 (the file's name for bf16 mixed precision) or fp32: spec/unit_memory.h's element sizes.
using Precision = spec::Precision;

struct DeviceType {
  std::string name;
  std::string profile;         // "zorse:<gpu>" or a latency file path (resolved); empty: tflops
  std::string profile_device;  // device key inside a latency file (default: the type's name)
  double tflops = 0;           // sustained TFLOP/s when there is no profile
  double memory_bytes = 0;
  double slowdown = 1.0;
  double action_overhead_seconds = 0;  // fixed seconds per compute action (DeviceProfile's)
  double host_memory_bytes = 0;             // 0: no host tier (no offload)
  double host_bytes_per_second = 16e9;      // device <-> host copies
};

struct ClusterDevice {
  int machine = 0;
  int local = 0;  // index inside its machine
  int type = 0;   // index into ClusterSpec::types
};

struct Machine {
  std::string name;
  sim::LinkProfile link;  // between two devices of this machine
  std::vector<int> devices;
};

struct ClusterSpec {
  std::string path;
  std::string name;
  Precision precision = Precision::bf16;
  // What data parallelism reduces (train.grad_reduce of the plans): "grad_reduce": "fp32"
  // (default) or "bf16" (mixed16 only): 2 instead of 4 bytes per gradient on the wire.
  spec::GradReduce grad_reduce = spec::GradReduce::fp32;
  bool emulated = false;
  std::string profile_model;  // "" : as the model says (sim/latency_table.h)
  std::vector<DeviceType> types;
  std::vector<Machine> machines;
  std::vector<ClusterDevice> devices;
  sim::LinkProfile network;  // between machines

  int num_devices() const { return static_cast<int>(devices.size()); }
  const DeviceType& type_of(int device) const { return types[devices[device].type]; }
  // "n0:3"
  std::string device_name(int device) const;
  // The link from device a to device b (a != b): a per-pair override, else a machine-pair
  // override, else the machine's link (same machine) or the network.
  const sim::LinkProfile& link(int a, int b) const;

  // Per-pair overrides, resolved (set by the reader).
  struct PairLink {
    int a, b;  // devices, or machines when `machines`
    bool machines;
    sim::LinkProfile link;
  };
  std::vector<PairLink> overrides;
};

// Reads and validates a cluster file.
ClusterSpec read_cluster_spec(const std::string& path);
ClusterSpec parse_cluster_spec(const nlohmann::json& document, const std::string& file);

// "mixed16" / "fp32".
const char* precision_name(Precision precision);

}  // namespace plait::plan
