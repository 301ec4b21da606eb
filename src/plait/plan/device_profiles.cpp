#include "plait/plan/device_profiles.h"

#include <cstdio>

#include "plait/core/error.h"
#include "plait/sim/latency_table.h"
#include "plait/sim/zorse_profiles.h"

namespace plait::plan {

sim::DeviceProfile slowed_down(sim::DeviceProfile profile, double slowdown) {
  if (slowdown == 1.0) return profile;
  if (profile.measured) {
    profile.measured->forward_slope *= slowdown;
    profile.measured->forward_intercept *= slowdown;
    profile.measured->backward_slope *= slowdown;
    profile.measured->backward_intercept *= slowdown;
  } else {
    profile.sustained_flops /= slowdown;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, " x%g", slowdown);
  profile.name += buf;
  profile.source += std::string("; emulated slow-down") + buf;
  return profile;
}

std::vector<sim::DeviceProfile> resolve_type_profiles(const ClusterSpec& cluster, const sim::ModelSpec& model,
                                                      std::int64_t seq) {
  const std::string dtype = cluster.precision == Precision::mixed16 ? "float16" : "float32";
  const sim::LatencyPreference preference{model.profile_model, seq};
  std::vector<sim::DeviceProfile> out;
  for (const DeviceType& t : cluster.types) {
    sim::DeviceProfile p;
    try {
      if (t.profile.starts_with("zorse:")) {
        p = sim::zorse_device_profile(t.profile.substr(6), dtype, model.shape, preference);
      } else if (!t.profile.empty()) {
        const sim::LatencyTable table = sim::read_latency_table(t.profile, true);
        p = sim::measured_device_profile(table, nullptr, t.profile_device, dtype, model.shape, preference, t.name);
      } else {
        p.sustained_flops = t.tflops * 1e12;
        p.source = cluster.path + ": device_types." + t.name + ".tflops";
      }
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      throw InputError(cluster.path, "device_types." + t.name + ".profile", e.what());
    }
    p.name = t.name;
    p.memory_bytes = t.memory_bytes;
    out.push_back(slowed_down(std::move(p), t.slowdown));
  }
  return out;
}

}  // namespace plait::plan
