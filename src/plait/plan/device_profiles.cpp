#include "plait/plan/device_profiles.h"

#include <algorithm>
#include <cstdio>

#include "plait/core/error.h"
#include "plait/sim/latency_table.h"
#include "plait/sim/zorse_profiles.h"

namespace plait::plan {

sim::DeviceProfile slowed_down(sim::DeviceProfile profile, double slowdown) {
  if (slowdown == 1.0) return profile;
  if (profile.measured) {
    for (sim::LatencyCurve* c : {&profile.measured->forward, &profile.measured->backward}) {
      c->fixed *= slowdown;
      c->slope *= slowdown;
      c->slope_after *= slowdown;
    }
  } else if (profile.efficiency) {
    profile.efficiency->peak_flops /= slowdown;
  } else {
    profile.sustained_flops /= slowdown;
  }
  profile.action_overhead_seconds *= slowdown;
  char buf[64];
  std::snprintf(buf, sizeof buf, " x%g", slowdown);
  profile.name += buf;
  profile.source += std::string("; emulated slow-down") + buf;
  return profile;
}

std::vector<sim::DeviceProfile> resolve_type_profiles(const ClusterSpec& cluster, const spec::NamedModel& model,
                                                      std::int64_t seq,
                                                      const std::vector<std::string>& used_types) {
  const std::string dtype = cluster.precision == Precision::bf16 ? "float16" : "float32";
  // The table to read: the cluster spec's choice (or --profile-model), else the preset's.
  const sim::LatencyPreference preference{
      cluster.profile_model.empty() ? model.profile_model : cluster.profile_model, seq};
  std::vector<sim::DeviceProfile> out;
  for (const DeviceType& t : cluster.types) {
    sim::DeviceProfile p;
    const bool used = used_types.empty() || std::find(used_types.begin(), used_types.end(), t.name) != used_types.end();
    try {
      if (!used) {
        p.source = "not used by this plan";
      } else if (t.profile.starts_with("zorse:")) {
        p = sim::zorse_device_profile(t.profile.substr(6), dtype, model.model, preference);
      } else if (!t.profile.empty()) {
        const sim::LatencyTable table = sim::read_latency_table(t.profile, true);
        p = sim::measured_device_profile(table, nullptr, t.profile_device, dtype, model.model, preference, t.name);
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
    p.action_overhead_seconds = t.action_overhead_seconds;
    out.push_back(slowed_down(std::move(p), t.slowdown));
  }
  return out;
}

}  // namespace plait::plan
