// Fuzzes the cluster description `plait plan --cluster` reads (plan::read_cluster_spec: device
// types with profiles or TFLOP/s, machines, default and per-pair links). A spec it accepts must
// be self-consistent: every device has a machine and a type, every link between two distinct
// devices resolves to a positive bandwidth. Anything but a plait::Error is a finding.
#include <cmath>
#include <cstdint>

#include "fuzz_input_file.h"
#include "plait/core/error.h"
#include "plait/plan/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static plait::fuzz::InputFile file;
  try {
    const plait::plan::ClusterSpec c = plait::plan::read_cluster_spec(file.write(data, size));
    const int n = c.num_devices();
    for (int d = 0; d < n; ++d) {
      const plait::plan::ClusterDevice& dev = c.devices[static_cast<std::size_t>(d)];
      if (dev.machine < 0 || dev.machine >= static_cast<int>(c.machines.size())) __builtin_trap();
      if (dev.type < 0 || dev.type >= static_cast<int>(c.types.size())) __builtin_trap();
      if (!(c.type_of(d).memory_bytes >= 0)) __builtin_trap();
      (void)c.device_name(d);
    }
    // Links of a bounded number of pairs (a spec may list thousands of devices).
    for (int a = 0; a < n && a < 24; ++a) {
      for (int b = 0; b < n && b < 24; ++b) {
        if (a == b) continue;
        const plait::sim::LinkProfile& l = c.link(a, b);
        if (!(l.bandwidth_bytes_per_second > 0) || !std::isfinite(l.latency_seconds) || l.latency_seconds < 0) {
          __builtin_trap();
        }
      }
    }
  } catch (const plait::Error&) {
  }
  return 0;
}
