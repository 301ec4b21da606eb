#pragma once
// The compute profile of each of a cluster's device types for one model and sequence length:
// Zorse's measurements (preferring the model's own measured entry at the nearest sequence), a
// latency file in Zorse's shape (e.g. `plait profile`'s), or a sustained FLOP/s figure; an
// emulated slow-down multiplies every compute time.
#include <cstdint>
#include <vector>

#include "plait/plan/cluster_spec.h"
#include "plait/sim/device_profile.h"
#include "plait/spec/model_presets.h"

namespace plait::plan {

// One profile per ClusterSpec::types entry (only of `used_types` when that is not empty; the
// others keep their name and memory and no speed). Throws plait::Error naming the cluster file
// and the device type when a profile does not cover the model.
std::vector<sim::DeviceProfile> resolve_type_profiles(const ClusterSpec& cluster, const spec::NamedModel& model,
                                                      std::int64_t seq,
                                                      const std::vector<std::string>& used_types = {});

// `profile` with every compute time multiplied by `slowdown`.
sim::DeviceProfile slowed_down(sim::DeviceProfile profile, double slowdown);

}  // namespace plait::plan
