#pragma once
// The part of a device's prediction that the analytic estimate (plan_estimate.h) and the
// simulation (plan_simulation.h) compute alike, so that the two agree on everything but the busy
// time and the activations (which each predicts its own way).
#include <cstddef>

#include "plait/plan/memory_policy.h"
#include "plait/plan/plan.h"
#include "plait/spec/sequence_partition.h"
#include "plait/sim/memory_model.h"

namespace plait::plan {

// Device `index` of stage group `group`, running as `rank`: which device, its micro-batches and
// capacity, its static bytes (the parameters of the group's virtual stages under the group's
// sharding policy, PlanChoice::shard_of, and the device's share; the host tier's bytes beside
// them when the policy offloads) and its reserve (the
// policy's reserve plus the working set of the partition's longest unit, with the head's when the
// group holds the last virtual stage). busy_seconds and activation_bytes are left 0.
DevicePrediction device_memory(const PlanningProblem& problem, const PlanChoice& choice, const MemoryPolicy& policy,
                               const sim::MemoryModel& memory, const spec::SequencePartition& partition, int group,
                               std::size_t index, int rank);

}  // namespace plait::plan
